"""Where the letters of a compilation start: the marks of a letter's head and of a letter's
signature, and :func:`find_letter_starts`, which cuts a file's lines into letters.

The rules are those of :mod:`letterchunk.text.compilation`'s module doc (2. Letter starts):
general properties of letters (a salutation, a title naming a letter or a year, a date line, a
letterhead of a name over an address; a closing, a signer's name with or without a date), never
a file's wording.  The running lines are removed before (they arrive as page breaks, ``"\\f"``).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from letterchunk.text.clean import _CLOSING, _NAME_LINE, is_signature, parse_date_line

__all__ = ["HEAD_LINES", "find_letter_starts"]

HEAD_LINES = 12  # the date line of a letter is among its first non-blank lines
_LETTER = re.compile(r"[A-Za-z]")
_SALUTATION = re.compile(
    r"^(?:to (?:my|the|all|our) [\w .,'&-]{2,60}|dear [\w .,'&-]{2,50}|(?:ladies and )?gentlemen)"
    r"\s*[:,]?$",
    re.IGNORECASE,
)
# whom a letter is addressed to, when its salutation has no colon ("To the Partners")
_ADDRESSEE = re.compile(
    r"\b(?:partners?|shareholders?|stockholders?|members|investors|owners|friends)\b", re.I
)
_TITLE_LETTER = re.compile(r"\b(?:letters?|reports?)\b", re.I)
_TITLE_YEAR = re.compile(r"(?<![\d,.$])(?:19|20)\d\d(?![\d,%])")
_POSTSCRIPT = re.compile(r"^(?:P\.\s?S\.|P/S\b|PS\b|P\.S\b)", re.I)
_INITIALS = re.compile(r"[A-Za-z]{1,4}(?:[:/ ]?[A-Za-z]{1,4})?|Enc(?:l|losures?)?\.?|\d{1,3}")
# a signer's name, in capitals or not, initials or not ("Warren E. Buffett", "WARREN E.
# BUFFETT", "W. E. Buffett"), a title after a comma allowed; the date beside it is split off first
_SIGNER = re.compile(
    r"(?:[A-Z][A-Za-z'-]+|[A-Z]\.)(?: [A-Z]\.)*(?: (?:[A-Z][A-Za-z'-]+|[A-Z]\.)){1,2}"
    r"(?:, [A-Z][A-Za-z]+(?: [A-Za-z]+){0,3})?"
)
# a street address or a town of a letterhead: "5202 Underwood Ave.", "810 KIEWIT PLAZA",
# "Omaha, Nebraska", "OMAHA 31, NEBRASKA", "1440 Kiewit Plaza, Omaha, Nebraska 68131"
_ADDRESS = re.compile(
    r"(?:(?!19\d\d|20\d\d)\d{1,5}|P\.? ?O\.? Box \d+)(?: [A-Z][A-Za-z.'-]*){1,4}"
    r"(?:,? [A-Z][A-Za-z.]*(?: \d{1,2})?(?:, [A-Z][A-Za-z.]+)?(?: \d{5})?)?"
    r"|[A-Z][A-Za-z.]+(?: \d{1,2})?, [A-Z][A-Za-z.]+(?: [A-Z][A-Za-z.]+)?(?: \d{5})?"
)

_HEAD_MOST = 6  # lines of a letterhead and title above a date line or a salutation
_WEAK_GAP = 3
_HEAD_DATE_SHIFT = 20  # a date line this far right of a signature heads the next letter
_TAIL_DATE_GAP = (
    3  # a signature's date is within three lines of it  # ... and its title or date line
)


def _indent(line: str) -> int:
    return len(line.expandtabs()) - len(line.expandtabs().lstrip())


def _is_date_line(line: str) -> bool:
    return any(parse_date_line(line))


def _is_salutation(s: str) -> bool:
    """ "To the Partners:", "TO MY PARTNERS FOR 1963:", "To the Shareholders of X Inc.:",
    "Dear Partner,", "Gentlemen:" — the line that opens a letter."""
    if not s[:1].isupper() or _SALUTATION.match(s) is None:
        return False
    return s.endswith((":", ",")) or (len(s.split()) <= 6 and _ADDRESSEE.search(s) is not None)


def _is_title(s: str) -> bool:
    """A short title line naming a year or a letter ("1960 Letter", "Letter to the Partners",
    "Chairman's Letter 1997"): no sentence, no table row."""
    words = s.split()
    return (
        0 < len(words) <= 8
        and len(s) <= 60
        and not s.endswith((".", ",", ";"))
        and s[0].isupper() | s[0].isdigit()
        and (
            _TITLE_LETTER.search(s) is not None
            or (_TITLE_YEAR.search(s) is not None and len(words) <= 3)
        )
        and sum(w[0].isdigit() for w in words) <= 1
        and not _is_date_line(s)
    )


def _is_caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 3 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


def _is_head_line(line: str) -> bool:
    """A line of a letter's head: a letterhead line (short, centred or in capitals), a title,
    a date line or a salutation."""
    s = line.strip()
    return bool(s) and (
        _is_date_line(s)
        or _is_salutation(s)
        or _is_title(s)
        or _is_address(s)
        or (
            len(s) <= 70
            and "   " not in s  # a table row's columns
            and _LETTER.search(s) is not None
            and (_indent(line) >= 10 or _is_caps(s))
        )
    )


def _tail_end(lines: Sequence[str], nonblank: list[int], k: int, head: str | None) -> int:
    """Index in ``nonblank`` of the first line after the signature at ``nonblank[k]`` and the
    lines that go with it: more signature lines, the signer's initials ("WEB:bf"), a page
    number, a postscript ("P.S. ..." to the end of its paragraph), and its date — one date
    line within three lines of a signature line, on its page, with no salutation next (a date
    line after a page break, a postscript or a salutation opens the next letter), unless the
    letter is dated at its top (``head``) to another day: a letter has one date.  A signature
    line with a date of its own ("NAME 2-11-59") takes no date line; a date line set far to the
    right of the signature is the next letter's head; a date line right below the signature and
    in line with it is the signature's, whatever follows."""
    signed = k
    dated = _signed(lines[nonblank[k]].strip())[1] is not None
    k += 1
    while k < len(nonblank):
        s = lines[nonblank[k]].strip()
        if _is_letterhead(lines, nonblank, k):
            break  # the next letter's letterhead
        if _POSTSCRIPT.match(s):
            k = _paragraph_end(lines, nonblank, k)
            signed = -_TAIL_DATE_GAP  # no signature date after a postscript
            continue
        if s == "\f":
            signed = -_TAIL_DATE_GAP
            k += 1
            continue
        if _signs(s) or _is_signer_line(s):
            signed = k
            dated = dated or _signed(s)[1] is not None
            k += 1
            continue
        if _INITIALS.fullmatch(s):
            k += 1
            continue
        shift = _indent(lines[nonblank[k]]) - _indent(lines[nonblank[max(signed, 0)]])
        if (
            _is_date_line(s)
            and not dated
            and k - signed <= _TAIL_DATE_GAP
            and shift < _HEAD_DATE_SHIFT
            and (k - signed == 1 and abs(shift) <= 10 or not _opens_letter(lines, nonblank, k))
            and head in (None, parse_date_line(s)[0])
        ):
            k += 1
            dated = True
            continue
        break
    return k


def _paragraph_end(lines: Sequence[str], nonblank: list[int], k: int) -> int:
    """Index in ``nonblank`` of the first line after the paragraph at ``nonblank[k]``."""
    k += 1
    while k < len(nonblank) and nonblank[k] == nonblank[k - 1] + 1 and lines[nonblank[k]] != "\f":
        k += 1
    return k


def _is_signer_line(s: str) -> bool:
    """A name below a closing, without initials ("Warren Buffett"), a date beside it or not."""
    if _is_salutation(s):
        return False  # "Dear Partner," opens the next letter
    name, _ = _signed(s)
    return bool(_NAME_LINE.match(name.rstrip(".")) or _SIGNER.fullmatch(name.rstrip(",")))


def _signed(s: str) -> tuple[str, str | None]:
    """``(the line without a date at its end, that date as ISO)``: "Warren E. Buffett 2-11-59",
    "WARREN E. BUFFETT Feb. 11, 1959", "Warren E. Buffett   11 February 1959"; a line with no
    date at its end: ``(the line, None)``."""
    words = s.split()
    last = words[-1].rstrip(".") if words else ""
    if not last[-1:].isdigit():
        return " ".join(words), None  # every date form ends with its year
    for n in range(min(4, len(words) - 1), 0, -1):
        found, _ = parse_date_line(" ".join(words[-n:]))
        if found:
            return " ".join(words[:-n]).rstrip(","), found
    return " ".join(words), None


@functools.lru_cache(maxsize=4096)
def _signs(s: str) -> bool:
    """Whether ``s`` signs a letter: :func:`~letterchunk.text.clean.is_signature`, or a signer's
    name in any case with a date beside it in any form ("WARREN E. BUFFETT 2-11-59"), or a
    name in capitals with initials ("WARREN E. BUFFETT")."""
    if is_signature(s):
        return True
    name, date = _signed(s)
    if not name or len(name) > 60 or _SIGNER.fullmatch(name) is None:
        return False
    return date is not None or (_is_caps(name) and re.search(r"\b[A-Z]\. ", name) is not None)


def _signs_at(lines: Sequence[str], nonblank: list[int], k: int) -> bool:
    """Whether ``nonblank[k]`` signs a letter: :func:`_signs`, or a signer's name without
    initials ("Warren Buffett") with a date line or the next letter's head right below it."""
    s = lines[nonblank[k]].strip()
    if _signs(s):
        return True
    return (
        k + 1 < len(nonblank)
        and _SIGNER.fullmatch(s) is not None
        and len(s.split()) <= 4
        and (
            parse_date_line(lines[nonblank[k + 1]])[0] is not None
            or _marker(lines, nonblank, k + 1) is not None
        )
    )


def _is_address(s: str) -> bool:
    """A letterhead's street address or town ("810 KIEWIT PLAZA", "Omaha, Nebraska")."""
    return len(s) <= 70 and _ADDRESS.fullmatch(s.strip()) is not None


def _is_letterhead(lines: Sequence[str], nonblank: list[int], k: int) -> bool:
    """Whether ``nonblank[k]`` opens a letterhead: a short name line (a person's, a firm's)
    followed, within two lines, by a street address or a town, not right below a closing
    ("Cordially," then a name is the signature)."""
    if not _address_below(lines, nonblank, k):  # the cheap test first: it rules out most lines
        return False
    s = lines[nonblank[k]].strip()
    if k and _CLOSING.match(lines[nonblank[k - 1]].strip()):
        return False
    if not s or len(s) > 60 or _is_address(s) or s.endswith((".", ":", ";")) and not _is_caps(s):
        return False
    # a dated name signs a letter
    return _signed(s)[1] is None and bool(_signs(s) or _SIGNER.fullmatch(s) or _is_caps(s))


def _address_below(lines: Sequence[str], nonblank: list[int], k: int) -> bool:
    """Whether a street address or a town is among the two lines below ``nonblank[k]``, in one
    block with it: no blank line between, but for a page break right above the address."""
    above = nonblank[k]
    for step, i in enumerate(nonblank[k + 1 : k + 3]):
        between = lines[above + 1 : i]
        if between and not (step == 0 and "\f" in between and _is_address(lines[i])):
            return False
        if _is_address(lines[i]):
            return True
        above = i
    return False


def _opens_letter(lines: Sequence[str], nonblank: list[int], k: int) -> bool:
    """Whether the date line at ``nonblank[k]`` opens a letter: a salutation is the next line (a
    signature's date is followed by the next letter's letterhead, or by nothing)."""
    after = [lines[i].strip() for i in nonblank[k + 1 : k + 4] if lines[i] != "\f"]
    return bool(after) and _is_salutation(after[0])


def _marker(lines: Sequence[str], nonblank: list[int], k: int) -> str | None:
    """What kind of letter start ``nonblank[k]`` is: "strong" (a salutation, a date line followed
    by a salutation, a letterhead followed by a date line or a salutation), "weak" (a title
    naming a year or a letter, a date line, a letterhead), or None."""
    s = lines[nonblank[k]].strip()
    if s == "\f":
        return None
    if _is_salutation(s):
        return "strong"
    ahead = []
    for j in range(k + 1, min(k + 6, len(nonblank))):
        a = lines[nonblank[j]].strip()
        if _signs(a) and not _is_letterhead(lines, nonblank, j):
            break  # what follows a signature is its tail, not this line's letter head
        ahead.append(a)
    if _is_date_line(s):
        return "strong" if any(_is_salutation(a) for a in ahead[:3]) else "weak"
    if _is_title(s):
        return "weak"
    if _is_letterhead(lines, nonblank, k):
        return "strong"
    if _is_head_line(lines[nonblank[k]]) and any(
        (_is_date_line(a) and not _column_header(ahead, j)) or _is_salutation(a)
        for j, a in enumerate(ahead[:4])
    ):
        heads = [a for a in ahead[:4] if _is_head_line(a) or not a]
        return "strong" if len(heads) >= 1 else "weak"
    return None


def _column_header(ahead: Sequence[str], j: int) -> bool:
    """Whether the date line ``ahead[j]`` heads a table's column ("12/31/12" over the figures)
    rather than a letter: a line of the next three has a column gap, as a table's rows do and a
    letter's salutation and first lines do not."""
    return any("   " in a for a in ahead[j + 1 : j + 4])


def find_letter_starts(lines: Sequence[str], running: AbstractSet[int] = frozenset()) -> list[int]:
    """First lines of the letters in ``lines`` (module doc, 2.); always starts with 0.

    ``running``: the indexes of the running lines (page breaks, never part of a letter start)."""
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    starts = [0]
    tail: int | None = None  # where the last signature's lines end (index in nonblank)
    dated: str | None = None  # the current letter's date line, once found in its head
    head: str | None = None  # ... when it gives the day
    # the file's first lines are front matter (a performance table, a cover page) until a letter
    # head, a date or a signature shows: the first letter head found there (its letterhead,
    # salutation and date lines, within HEAD_LINES) opens the first letter rather than a second
    # one, so front matter never becomes an undated letter of its own
    front_head: int | None = None  # k of that head's first line
    k = 0
    while k < len(nonblank):
        i = nonblank[k]
        s = lines[i].strip()
        if (
            i > starts[-1]
            and _signs_at(lines, nonblank, k)
            and i not in running
            and not _is_letterhead(lines, nonblank, k)
            and not _in_head(lines, nonblank, _nonblank_at(nonblank, starts[-1]), k)
        ):
            tail = _tail_end(lines, nonblank, k, head)
            for j in nonblank[k:tail]:  # the signature's date dates a letter with none at the top
                dated = dated or _sortable(lines[j])
            k = tail
            continue
        kind = _marker(lines, nonblank, k) if i > starts[-1] and i not in running else None
        start = None
        in_front = len(starts) == 1 and tail is None
        if front_head is None:
            in_front = in_front and dated is None
        else:
            in_front = in_front and k - front_head < HEAD_LINES
        if kind and in_front:
            front_head = k if front_head is None else front_head
        elif kind and tail is not None:
            start = _start_after_signature(lines, nonblank, running, tail, k, kind, dated)
        elif kind == "strong" and (
            _page_top(lines, running, i) or _later(lines, nonblank[k : k + 5], dated)
        ):  # an unsigned letter ends where a new page, or a later letter's head, begins
            start = _head_start(lines, nonblank, k)
        if start is not None and start > starts[-1]:
            starts.append(start)
            tail, dated, head = None, None, None
        if (
            dated is None
            and i >= starts[-1]
            and k - _nonblank_at(nonblank, starts[-1]) < HEAD_LINES
        ):
            dated, head = _sortable(s), parse_date_line(s)[0]
        k += 1
    return starts


def _in_head(lines: Sequence[str], nonblank: list[int], top: int, k: int) -> bool:
    """Whether ``nonblank[k]`` is in the head of the letter whose first line is
    ``nonblank[top]``: only head lines and page breaks above it (a name there is a letterhead's,
    not a signature: a letter is signed below its text)."""
    return k - top <= _HEAD_MOST and all(
        lines[j] == "\f" or _is_head_line(lines[j]) for j in nonblank[top:k]
    )


def _later(lines: Sequence[str], head: list[int], dated: str | None) -> bool:
    """Whether the first date line of ``head`` is later than ``dated`` (by at most two years)."""
    found = next((d for d in (_sortable(lines[i]) for i in head) if d), None)
    return bool(found and dated and dated < found <= _two_years(dated))


def _sortable(line: str) -> str | None:
    """The date of a date line as ``YYYY-MM-DD`` (a month-only date: its first day), else None."""
    full, month = parse_date_line(line)
    return full or (f"{month[0]:04d}-{month[1]:02d}-01" if month else None)


def _nonblank_at(nonblank: list[int], line: int) -> int:
    """Index in ``nonblank`` of the first non-blank line at or after ``line``."""
    return bisect.bisect_left(nonblank, line)


def _start_after_signature(
    lines: Sequence[str],
    nonblank: list[int],
    running: AbstractSet[int],
    tail: int,
    k: int,
    kind: str,
    dated: str | None,
) -> int | None:
    """Where the letter whose start marker is ``nonblank[k]`` begins, the previous letter's
    signature lines ending at ``nonblank[tail]``; None when the marker does not start one.

    * a title, date line or letterhead right after the signature (head lines only between):
      the next letter starts right after the signature;
    * a salutation (or a date or letterhead before one): where its head starts (what lies
      between the signature and the head, such as an appendix, stays with the letter signed);
    * a date line alone further on starts a letter when it is later than the current
      letter's date (a date in a statement or a table is earlier): where its head starts."""
    between = nonblank[tail:k]
    if kind == "weak":
        if len(between) <= _WEAK_GAP and all(
            lines[j] == "\f" or _is_head_line(lines[j]) for j in between
        ):
            return _first_text(lines, nonblank, tail)
        found = parse_date_line(lines[nonblank[k]])[0]
        if found and dated and dated < found <= _two_years(dated):
            return max(_head_start(lines, nonblank, k), _first_text(lines, nonblank, tail))
        return None
    return max(_head_start(lines, nonblank, k), _first_text(lines, nonblank, tail))


def _two_years(date: str) -> str:
    return f"{int(date[:4]) + 2:04d}{date[4:]}"


def _first_text(lines: Sequence[str], nonblank: list[int], k: int) -> int:
    """The first line from ``nonblank[k]`` on that is not a page break."""
    return next(j for j in nonblank[k:] if lines[j] != "\f")


def _head_start(lines: Sequence[str], nonblank: list[int], k: int) -> int:
    """The first line of the head that holds ``nonblank[k]``: back over head lines to the page
    break above them."""
    top = max(0, k - _HEAD_MOST)
    while k > top and lines[nonblank[k - 1]] != "\f" and _is_head_line(lines[nonblank[k - 1]]):
        k -= 1
    return nonblank[k]


def _page_top(lines: Sequence[str], running: AbstractSet[int], at: int) -> bool:
    """Whether line ``at`` opens a page: above it, past head lines and blank lines, a running
    line or the top of the file."""
    i = at - 1
    while (
        i >= 0
        and i not in running
        and lines[i] != "\f"
        and (not lines[i].strip() or _is_head_line(lines[i]))
    ):
        i -= 1
    return i < 0 or i in running or lines[i] == "\f"
