"""Compilations: one file holding many letters (such as the Buffett Partnership letters
1957-1970) -> one :class:`~letterchunk.text.clean.CleanedLetter` per letter.

Document profiles (``--profile``):

* ``letter`` — the file is one letter (:func:`~letterchunk.text.clean.load_letter`; the
  Berkshire letters);
* ``partnership`` — the file is a compilation of letters;
* ``auto`` (the default) — a compilation when at least two letters are found (see 2.) and
  at least two of them are dated (at the top or at the signature: an appendix or an essay
  inside one letter is not), else one letter exactly as ``letter`` reads it.

Every rule below is a general property of letters and pages, found by repetition and shape,
never by a file's wording (``tests/compilations.py`` generates compilations of other
formats to hold the rules to that).  What :func:`load_document` does to a compilation:

1. **Running lines** are removed before the file is cut: *page lines* — a line whose text,
   digits aside, repeats at least :data:`RUNNING_MIN_REPEATS` times and one of whose numbers
   grows by 1 to 3 from one occurrence to the next in most places (``www.… Page 8``,
   ``Page 8 of 40``, ``- 8 -``), a number under 1900 (a year is not a page); *periodic lines*
   — a short line that repeats, whatever its wording, never closer than a page's least lines
   nor further apart than two pages' most, from the first page to the last, and that is not
   a letterhead (followed by a date line or a salutation in most places); and *running
   headers/footers* — a line whose text repeats on at least half as many pages as there are
   page lines, and that sits next to one in at least 80% of its occurrences.  A closing,
   signature, salutation or date line is never a running line, however often it repeats.
   Each removed line becomes a page break for the cleaner, so the gap rules of
   :func:`~letterchunk.text.clean.clean_text` apply.
2. **Letter starts**.  The marks of a letter's head: a *salutation* ("To the Partners:",
   "TO MY PARTNERS FOR 1963:", "Dear …,"), a *title* naming a letter or a year ("1960
   Letter", "1997 Chairman's Letter"), a *date line* in any common form, a *letterhead* (short
   centred or capital lines) followed by a date line or a salutation.  A letter's *signature*
   is a closing or a signer's name or title (:func:`~letterchunk.text.clean.is_signature`);
   its *tail* the lines that go with it: initials ("WEB:bf"), a postscript, page breaks, and
   one date line within three lines of it (not after a postscript or a page break, not before
   a salutation, not another day than the letter's date at its top: a letter has one date).
   A new letter starts where, after the previous letter's signature and tail,

   * a title, date line or letterhead comes first (head lines only before it): right after
     the tail;
   * a salutation, or a date line or letterhead with one: where its head starts (what lies
     between, such as an appendix, stays with the letter signed);
   * a date line alone comes later on, dated after the current letter (by at most two
     years: a date in a statement or a table is earlier): where its head starts.

   An unsigned letter ends where a salutation's head opens a page or is dated after it.  The
   first letter starts at the top of the file, so a title page belongs to it.  The letters
   tile the file: every line that is not a running line belongs to exactly one letter.
3. Each letter is cleaned by :func:`~letterchunk.text.clean.clean_text` into its own text.
4. **Date**: the date line among the first :data:`HEAD_LINES` non-blank lines, in any form
   :func:`~letterchunk.text.clean.parse_date_line` reads ("January 24, 1962", "Jan. 22,
   1969", "July 11th, 1968", "22nd January 1969", "1/22/69", "2-11-59"); when that line gives
   only a month ("July, 1961") or is missing, the signature's date ("July 22, 1961", "Warren
   E. Buffett 1-30-61", a Berkshire signature block) when it agrees with that month; a month
   alone dates the letter to the month's first day, with a note.  No date: ``0000-00-00``, a
   note in the chunks' ``boundary_note`` and a warning naming the letter's first line.
   **Year**: the year the letter reports on — an annual letter dated January to March
   reports on the year before; any other letter on its date's year; an undated one on the
   year of the letter before it.
5. **Names**: ``YYYY-L{k}`` (see :mod:`letterchunk.layout`); :func:`segment_letters` numbers
   each letter's sections after those of the year's earlier letters.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError
from letterchunk.layout import compilation_stem
from letterchunk.text.clean import (
    _NAME_LINE,
    _YEAR_IN_NAME,
    _YEAR_IN_TEXT,
    RUNNING_MIN_REPEATS,
    UNKNOWN_DATE,
    CleanedLetter,
    clean_text,
    extract_date,
    is_signature,
    load_letter,
    month_date,
    parse_date_line,
    read_letter_file,
)
from letterchunk.text.segment import segment_letter
from letterchunk.tokens import span_counter

__all__ = [
    "PROFILES",
    "Profile",
    "HEAD_LINES",
    "LetterSpan",
    "find_letter_starts",
    "load_document",
    "load_documents",
    "running_lines",
    "segment_letters",
]

log = logging.getLogger(__name__)

Profile = Literal["auto", "letter", "partnership"]
PROFILES: tuple[Profile, ...] = ("auto", "letter", "partnership")
HEAD_LINES = 12  # the date line of a letter is among its first non-blank lines
_TAIL_LINES = 40  # its signature among its last
_ANNUAL_LAST_MONTH = 3  # a letter dated January-March reports on the year before

_DIGITS = re.compile(r"\d+")
_BARE_PAGE = re.compile(r"[-–—(\[]? ?# ?[-–—)\]]?")
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
_TITLE_LETTER = re.compile(r"\bletters?\b", re.I)
_TITLE_YEAR = re.compile(r"(?<![\d,.$])(?:19|20)\d\d(?![\d,%])")
_POSTSCRIPT = re.compile(r"^(?:P\.\s?S\.|P/S\b|PS\b|P\.S\b)", re.I)
_INITIALS = re.compile(r"[A-Za-z]{1,4}(?:[:/ ]?[A-Za-z]{1,4})?|Enc(?:l|losures?)?\.?|\d{1,3}")
# a numeric date in a signature: "1-30-61", "1/30/1961" (month first), at the end of a line
_NUMERIC_DATE = re.compile(r"(?<![\d/-])\d{1,2}[-/]\d{1,2}[-/](?:\d{4}|\d{2})\s*$")
_RUNNING_MAX_CHARS = 120  # a running header/footer is one short line
_PAGE_LEAST, _PAGE_MOST = 12, 80  # the lines of a page, at least and at most
_HEAD_MOST = 6  # lines of a letterhead and title above a date line or a salutation
_WEAK_GAP = 3
_TAIL_DATE_GAP = (
    3  # a signature's date is within three lines of it  # ... and its title or date line
)


@dataclass(frozen=True)
class LetterSpan:
    """One letter of a compilation: its lines ``[start, end)`` of the file."""

    start: int
    end: int


# --------------------------------------------------------------------------------------------
# running lines


def _form(line: str) -> str:
    """A line's text with its numbers as ``#`` and its spaces closed up."""
    return " ".join(_DIGITS.sub("#", line).split())


def _occurrences(lines: Sequence[str]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for i, ln in enumerate(lines):
        s = ln.strip()
        if s and len(s) <= 200:
            found[_form(s)].append(i)
    return found


def _is_page_form(lines: Sequence[str], where: list[int]) -> bool:
    """Whether the occurrences ``where`` of one form number pages: one of their numbers (the
    same place from the end: ``Page 8``, ``Page 8 of 40``) grows by 1 to 3 in most steps."""
    found = [_DIGITS.findall(lines[i]) for i in where]
    width = min(len(f) for f in found)
    for place in range(1, width + 1):
        nums = [int(f[-place]) for f in found]
        if max(nums) >= 1900:
            continue  # a year is not a page
        steps = [b - a for a, b in zip(nums, nums[1:], strict=False)]
        if sum(1 <= d <= 3 for d in steps) >= 0.8 * len(steps):
            return True
    return False


def _letter_words(line: str) -> bool:
    """A closing, salutation, signature or date: words of a letter, whatever their repetition."""
    s = line.strip()
    return bool(is_signature(s) or _is_salutation(s) or any(parse_date_line(s)))


def _is_periodic(where: list[int], total: int) -> bool:
    """Whether occurrences at lines ``where`` of a file of ``total`` lines recur as pages do:
    never closer than a page's least lines, never further apart than two pages' most, from
    the first page to the last."""
    reach = 2 * _PAGE_MOST
    gaps = [b - a for a, b in zip(where, where[1:], strict=False)]
    return (
        min(gaps) >= _PAGE_LEAST
        and max(gaps) <= reach
        and where[0] <= reach
        and total - where[-1] <= reach
    )


def _heads_letters(
    lines: Sequence[str], nonblank: list[int], pos: dict[int, int], where: list[int]
) -> bool:
    """Whether most occurrences are followed, within four lines, by a date line or a salutation:
    a letterhead, not a running line."""
    heads = 0
    for i in where:
        after = [lines[j] for j in nonblank[pos[i] + 1 : pos[i] + 5]]
        heads += any(_is_salutation(a.strip()) or any(parse_date_line(a)) for a in after)
    return heads >= 0.5 * len(where)


def running_lines(lines: Sequence[str]) -> set[int]:
    """Indexes of the compilation's page lines and running headers/footers (module doc, 1.)."""
    occ = _occurrences(lines)
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    pos = {i: k for k, i in enumerate(nonblank)}
    anchors: set[int] = {i for i, ln in enumerate(lines) if "\f" in ln}
    for form, where in occ.items():
        if len(where) < RUNNING_MIN_REPEATS:
            continue
        if not _LETTER.search(form):  # a bare page number ("- 7 -"): a page line too
            if _BARE_PAGE.fullmatch(form) and _is_page_form(lines, where):
                anchors.update(where)
            continue
        if (
            "#" in form
            and _is_page_form(lines, where)
            or (
                len(form) <= _RUNNING_MAX_CHARS
                and _is_periodic(where, len(lines))
                and not _letter_words(lines[where[0]])
                and not _heads_letters(lines, nonblank, pos, where)
            )
        ):
            anchors.update(where)
    if not anchors:
        return set()
    out = set(anchors)
    for form, where in occ.items():
        if len(where) < max(RUNNING_MIN_REPEATS, len(anchors) / 2) or not _LETTER.search(form):
            continue
        if where[0] in anchors or _letter_words(lines[where[0]]):
            continue
        beside = 0
        for i in where:
            k = pos[i]
            near = nonblank[max(0, k - 1) : k + 2]
            beside += any(j in anchors for j in near) or k == 0 or k == len(nonblank) - 1
        if beside >= 0.8 * len(where):
            out.update(where)
    return out


# --------------------------------------------------------------------------------------------
# letter starts


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
    letter is dated at its top (``head``) to another day: a letter has one date."""
    signed = k
    k += 1
    dated = False
    while k < len(nonblank):
        s = lines[nonblank[k]].strip()
        if _POSTSCRIPT.match(s):
            k = _paragraph_end(lines, nonblank, k)
            signed = -_TAIL_DATE_GAP  # no signature date after a postscript
            continue
        if s == "\f":
            signed = -_TAIL_DATE_GAP
            k += 1
            continue
        if is_signature(s) or _is_signer_line(s):
            signed = k
            k += 1
            continue
        if _INITIALS.fullmatch(s):
            k += 1
            continue
        if (
            _is_date_line(s)
            and not dated
            and k - signed <= _TAIL_DATE_GAP
            and not _opens_letter(lines, nonblank, k)
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
    return bool(_NAME_LINE.match(_NUMERIC_DATE.sub("", s).strip().rstrip(".")))


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
    ahead = [lines[i].strip() for i in nonblank[k + 1 : k + 6] if lines[i] != "\f"]
    if _is_date_line(s):
        return "strong" if any(_is_salutation(a) for a in ahead[:3]) else "weak"
    if _is_title(s):
        return "weak"
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
        if i > starts[-1] and is_signature(s) and i not in running:
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


# --------------------------------------------------------------------------------------------
# dates and years


def _head_date(lines: list[str]) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """(full date, (year, month) of a month-only date, the date line) from the head."""
    for s in lines[:HEAD_LINES]:
        full, month = parse_date_line(s)
        if full or month:
            return full, month, s.strip()
    return None, None, None


def _signature_date(lines: list[str]) -> str | None:
    """The last date of the signature: a date line, or a date after a name ("… 1-30-61")."""
    for s in reversed(lines[-_TAIL_LINES:]):
        full, _ = parse_date_line(s)
        if full:
            return full
        m = _NUMERIC_DATE.search(s)
        if m and (s[: m.start()].strip() == "" or _NAME_LINE.match(s[: m.start()].rstrip())):
            found, _ = parse_date_line(m.group(0))
            if found:
                return found
    return None


def _date(text: str) -> tuple[str, str | None, tuple[int, int] | None]:
    """``(letter_date, date_note, (year, month) of a month-only date line)`` of one cleaned
    letter (module doc, 4.)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    full, month, shown = _head_date(lines)
    if full:
        return full, None, None
    signed = _signature_date(lines) or _known(extract_date(text)[0])
    if signed and (month is None or (int(signed[:4]), int(signed[5:7])) == month):
        return signed, None, None
    if month is not None and shown is not None:
        return (*month_date(month[0], month[1], shown), month)
    found, note = extract_date(text)  # a signature dated to the month only, or nothing
    if found != UNKNOWN_DATE:
        return found, note, None
    return (
        UNKNOWN_DATE,
        "Letter date unknown: no date line at the top and no dated signature.",
        None,
    )


def _known(date: str) -> str | None:
    return None if date == UNKNOWN_DATE else date


def _reported_year(
    date: str, month: tuple[int, int] | None, text: str, before: int | None
) -> int | None:
    """The year a letter reports on (module doc, 4.)."""
    if date != UNKNOWN_DATE:
        month = int(date[:4]), int(date[5:7])
    if month is not None:
        return month[0] - 1 if month[1] <= _ANNUAL_LAST_MONTH else month[0]
    if before is not None:
        return before
    counts = Counter(int(y) for y in _YEAR_IN_TEXT.findall(text))
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else None


# --------------------------------------------------------------------------------------------
# loading


def _split(raw: str) -> tuple[list[str], list[LetterSpan]]:
    """The file's lines, running lines turned into page breaks, and its letters' spans."""
    lines = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    running = running_lines(lines)
    lines = ["\f" if i in running else ln for i, ln in enumerate(lines)]
    starts = find_letter_starts(lines, running)
    ends = starts[1:] + [len(lines)]
    return lines, [LetterSpan(s, e) for s, e in zip(starts, ends, strict=True)]


def _dated_letters(lines: list[str], spans: list[LetterSpan]) -> int:
    """How many of the letters found have a date of their own (at the top or at the
    signature): a compilation's letters do; an appendix or an essay inside one letter does not."""
    dated = 0
    for span in spans:
        text = clean_text("\n".join(lines[span.start : span.end]))
        dated += bool(text.strip()) and _date(text)[0] != UNKNOWN_DATE
    return dated


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.split("\n") if ln.strip()), "")


def _letters(path: Path, lines: list[str], spans: list[LetterSpan]) -> list[CleanedLetter]:
    """One cleaned, dated, named letter per span; a span with no text is skipped."""
    out: list[CleanedLetter] = []
    per_year: Counter[int] = Counter()
    before: int | None = None
    name_year = _YEAR_IN_NAME.search(path.stem)
    for n, span in enumerate(spans, start=1):
        text = clean_text("\n".join(lines[span.start : span.end]))
        if not text.strip():
            continue
        date, note, month = _date(text)
        year = _reported_year(date, month, text, before)
        if year is None and name_year:
            year = int(name_year.group(1))
        if year is None:
            raise InputError(
                path,
                f"letter {n} (line {span.start + 1}, '{_first_line(text)}') has no year in its "
                "date, its signature or its text; add its date line",
            )
        if date == UNKNOWN_DATE:
            log.warning(
                "%s: letter %d (line %d) starting '%s' has no date line: letter_date %s (%s)",
                path,
                n,
                span.start + 1,
                _first_line(text),
                UNKNOWN_DATE,
                note,
            )
        per_year[year] += 1
        stem = compilation_stem(year, per_year[year])
        out.append(CleanedLetter(year, date, note, str(path), text, stem=stem))
        before = year
    return out


def load_document(path: str | Path, profile: Profile = "auto") -> list[CleanedLetter]:
    """The letters of the file ``path``: one (``letter``), or each of a compilation.

    ``auto`` reads a file with fewer than two letter starts exactly as ``letter`` does.
    ``partnership`` on a file where no boundary is found gives one letter and a warning.
    Raises :class:`InputError` as :func:`~letterchunk.text.clean.load_letter` does.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
    p = Path(path)
    if profile == "letter":
        return [load_letter(p)]
    raw = read_letter_file(p)
    lines, spans = _split(raw)
    if profile == "auto" and (len(spans) < 2 or _dated_letters(lines, spans) < 2):
        return [load_letter(p)]
    if len(spans) < 2:
        log.warning(
            "%s: no letter boundary found (no letterhead, or date line and salutation, after a "
            "signed letter); read as one letter",
            p,
        )
    letters = _letters(p, lines, spans)
    if not letters:
        raise InputError(p, "the file holds no text after cleaning; pass a letter text file")
    return letters


def segment_letters(letters: Iterable[CleanedLetter], *, tier2: bool = False) -> list[list[Chunk]]:
    """``segment_letter`` over ``letters`` in order; a compilation's letter numbers its sections
    after the sections of its year's earlier letters, so chunk ids are unique in the folder."""
    next_section: dict[int, int] = {}
    out = []
    for letter in letters:
        if letter.stem is not None:
            letter = replace(letter, first_section=next_section.get(letter.year, 1))
        chunks = segment_letter(letter, tier2=tier2)
        if letter.stem is not None:
            sections = [int(c.chunk_id.split("-")[1][1:]) for c in chunks]
            next_section[letter.year] = max(sections, default=letter.first_section - 1) + 1
        out.append(chunks)
    return out


def load_documents(
    paths: Iterable[Path], profile: Profile = "auto"
) -> Iterator[tuple[Path, list[CleanedLetter] | InputError]]:
    """:func:`load_document` over ``paths`` in order, one file ahead: while the caller segments a
    file's letters, the tokenizer pass over the next file's first letter is already running
    (as :func:`~letterchunk.text.segment.load_letters` does).  A file that cannot be used comes
    as its :class:`InputError`, so the caller can report it and go on."""
    ahead: tuple[Path, list[CleanedLetter] | InputError] | None = None
    for path in paths:
        letters: list[CleanedLetter] | InputError
        try:
            letters = load_document(path, profile)
        except InputError as exc:
            letters = exc
        else:
            span_counter(letters[0].text)
        if ahead is not None:
            yield ahead
        ahead = (path, letters)
    if ahead is not None:
        yield ahead
