"""Cleaner: one raw letter file -> the cleaned text every ``source_span`` indexes.

What :func:`clean_text` changes, exactly (and nothing else):

1. Line endings: ``\\r\\n`` and lone ``\\r`` become ``\\n``.  A form feed (``\\f``) or a
   ``[[PAGE_BREAK]]`` marker (spec §1.1) is a page boundary: it becomes a single line break.
   Other C0 control characters (except ``\\t`` and ``\\n``) and DEL are removed; a UTF-8
   byte-order mark at the start is removed.
2. Trailing spaces and tabs are stripped from every line.
3. Page-number lines are removed: a line holding nothing but a page number (``7``, ``- 7 -``,
   ``Page 7``), 1 to 3 digits, that is either indented by at least
   :data:`PAGE_NUMBER_MIN_INDENT` spaces or stands alone between blank lines / a page boundary.
4. Running headers and footers are removed: a short line (at most 80 characters, containing a
   letter) whose text repeats at least :data:`RUNNING_MIN_REPEATS` times and where *every*
   occurrence sits next to a page boundary (within two non-blank lines of a page-number line or
   a form feed, or among the first/last two lines of the file).  Detection is by repetition,
   never by a list of known strings, so a one-off letterhead such as ``BERKSHIRE HATHAWAY
   INC.`` stays; a line on under a third of the pages (a caption over a few tables) stays too.
4b. Page furniture is removed: a line of at most :data:`FURNITURE_MAX_CHARS` characters that
   recurs, its numbers aside (a page number, a printing date), on at least a third of the
   pages (:data:`FURNITURE_SHARE`) and three at least, each occurrence on a page of its own
   and at a page edge: within two non-blank lines of a form feed, a page-number line, a line
   that numbers pages, or another such line (a running title above the next page's text).  A
   line numbers pages when one of its numbers grows by 1 to 3 from page to page and it says
   "Page" or "p. N", is a number alone, or is set in columns (``www.… studying/investing
   Page 9``, ``Letters  Page 3 of 40``); a heading with a number ("Part 3") or a numbered
   list does not.  The lines with words removed by 4 and 4b are counted: :func:`load_letter`
   notes the count in ``clean_note``, which the segmenter adds to every chunk's
   ``boundary_note``.
5. Where a removed line (page number, running header/footer, page boundary) had blank lines
   both above and below it, the blank lines below it are removed too: the page break leaves
   the one gap that was there on the page, not two (a table's column headings and rows, or a
   header and its text, stay as close as they were printed).
6. Blank lines at the start and end of the text are dropped and the text ends with exactly one
   ``\\n``.

Words are never rewritten: no re-wrapping, no de-hyphenation, no quote normalisation, no repair
of encoding damage (``31›`` stays ``31›``).  Blank lines inside the text are kept as they are.

Encoding policy of :func:`load_letter`: the file must be UTF-8 (a BOM is allowed).  A file
of blanks only, ASCII or Unicode (no-break and em spaces, zero-width spaces, byte-order marks),
is refused as empty.  Anything
else is refused with an :class:`~letterchunk.errors.InputError` that says how to convert it
(``iconv -f cp1252 -t utf-8``); no encoding is guessed, so offsets never depend on a guess.

Year and date: :func:`extract_date` takes ``letter_date`` from the signature block (see
there); :func:`extract_year` takes ``letter_year`` from that date where the text has one (a
letter is written after the year it reports on closes), else from a ``YYYY`` in the file name,
else from the content (see there).  When the text's year and the file name's disagree, the
text wins and :func:`load_letter` warns; when the name is all there is, it warns too.  A name
whose year no letter can have (``1850.txt``, ``2999.txt``) is refused rather than replaced by
a year of the text.  A date given to the month only ("February 2008") is dated to the month's
first day with a ``date_note`` saying so; when no date exists the date is ``"0000-00-00"`` and
``date_note`` says why; the segmenter copies the note into ``boundary_note`` (docs/spec.md §0.3).
:func:`parse_date_line` reads a line that holds nothing but a date, in any common form.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import logging
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from letterchunk.errors import InputError
from letterchunk.layout import LetterKey, cleaned_name

__all__ = [
    "CleanedLetter",
    "load_letter",
    "read_letter_file",
    "clean_text",
    "clean_counted",
    "furniture_note",
    "extract_year",
    "extract_date",
    "parse_date_line",
    "is_signature",
    "month_date",
    "year_of_date",
    "UNKNOWN_DATE",
    "PAGE_NUMBER_MIN_INDENT",
    "RUNNING_MIN_REPEATS",
]

log = logging.getLogger(__name__)

UNKNOWN_DATE = "0000-00-00"
PAGE_NUMBER_MIN_INDENT = 8
RUNNING_MIN_REPEATS = 3

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
# the characters _CONTROL matches: ``c in text`` for each is a fast C scan, five times quicker
# than the regex searching a letter that has none (the common case)
_CONTROL_CHARS = tuple(chr(c) for c in (*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F))
_PAGE_NUMBER = re.compile(r"^(\s*)(?:[-–—]\s*)?(?:page\s+)?(\d{1,3})(?:\s*[-–—])?\s*$", re.I)
_FORMFEED_MARK = "\x0c"
_LETTER_CHAR = re.compile(r"[A-Za-z]")
_PAGE_LEAST_LINES = 12  # a page holds this many lines as a rule
_LIST_GAP = 3  # page numbers are never this close
# a form feed or a [[PAGE_BREAK]] marker, with at most one line break on each side
_PAGE_BREAK = re.compile(r"\n?[ \t]*(?:\f|\[\[PAGE_BREAK\]\])(?:[ \t]*\n)?", re.I)


@dataclass(frozen=True)
class CleanedLetter:
    """A cleaned letter: ``text`` is what every chunk's ``source_span`` indexes."""

    year: int
    date: str
    date_note: str | None
    source_path: str
    text: str
    # a compilation's letter (text.compilation): its file stem YYYY-Lk, and the number of its
    # first section (it continues the year's earlier letters, so chunk ids stay unique)
    stem: str | None = None
    first_section: int = 1
    # what the cleaner removed that a reader of the chunks should know of (page furniture)
    clean_note: str | None = None

    @property
    def key(self) -> LetterKey:
        """What names the letter's output files: its year, or its compilation stem."""
        return self.stem if self.stem is not None else self.year

    @property
    def cleaned_name(self) -> str:
        return cleaned_name(self.key)


# --------------------------------------------------------------------------------------------
# cleaning


def _is_page_number(lines: list[str], i: int) -> bool:
    s = lines[i].strip()
    if not s or len(s) > 12 or not any(c.isdigit() for c in s):
        return False
    m = _PAGE_NUMBER.match(lines[i])
    if not m:
        return False
    if int(m.group(2)) == 0:
        return False
    if len(m.group(1).expandtabs()) >= PAGE_NUMBER_MIN_INDENT:
        return True
    prev_blank = i == 0 or lines[i - 1].strip() in ("", _FORMFEED_MARK)
    next_blank = i + 1 >= len(lines) or lines[i + 1].strip() in ("", _FORMFEED_MARK)
    return prev_blank and next_blank


def _running_lines(lines: list[str], boundary: list[bool], stripped: list[str]) -> set[str]:
    """Texts of short lines that repeat and always sit next to a page boundary
    (``stripped``: each line's ``strip()``)."""
    if not any(boundary):
        return set()
    counts = Counter(s for s in stripped if s and len(s) <= 80)
    repeated = {
        s for s, n in counts.items() if n >= RUNNING_MIN_REPEATS and re.search(r"[A-Za-z]", s)
    }
    if not repeated or not any(boundary):
        return set()
    nonblank = [i for i, s in enumerate(stripped) if s]
    pos = {i: k for k, i in enumerate(nonblank)}
    near: dict[str, bool] = {s: True for s in repeated}
    for i, s in enumerate(stripped):
        if s not in near or not near[s]:
            continue
        k = pos[i]
        if k < 2 or k >= len(nonblank) - 2:
            continue  # the start and the end of the file are page boundaries too
        window = nonblank[max(0, k - 2) : k + 3]
        # a form feed / page number may also be blank-separated: look at raw neighbours too
        raw = range(max(0, i - 3), min(len(lines), i + 4))
        if not (any(boundary[j] for j in window) or any(boundary[j] for j in raw)):
            near[s] = False
    # furniture is on most pages: a caption over a table on three pages of ten is the letter's
    pages = 1 + sum(b and not any(boundary[max(0, j - 3) : j]) for j, b in enumerate(boundary))
    return {s for s, ok in near.items() if ok and counts[s] >= pages * FURNITURE_SHARE}


_DIGIT_RUN = re.compile(r"\d+")
_DIGIT = re.compile(r"\d")
# what marks a line as a page's number, not a heading's ("Part 3"): the word page, "p. 3", a
# number standing alone, or the columns of a footer set apart by wide gaps
_PAGE_MARK = re.compile(r"\bpage\b|\bp\.\s?\d|^\W*\d{1,3}\W*$|\S\s{3,}\S", re.I)
FURNITURE_MAX_CHARS = 160  # a footer of an address, a tagline and a page number fits
# furniture is on most pages, at least this share of them (a page-number line, a form feed and
# a document's own numbering can each mark a page, so the pages counted run high); a caption
# over a table on three pages of ten is the letter's own
FURNITURE_SHARE = 1 / 3


def _page_steps(numbers: list[list[str]]) -> bool:
    """Whether one place of ``numbers`` (counted from the end of each line: ``Page 8``, ``Page 8
    of 40``) grows by 1 to 3 from one occurrence to the next in most steps, under 1900 (a
    year is not a page)."""
    width = min(len(n) for n in numbers)
    for place in range(1, width + 1):
        nums = [int(n[-place]) for n in numbers]
        if max(nums) >= 1900:
            continue
        steps = [b - a for a, b in zip(nums, nums[1:], strict=False)]
        if sum(1 <= d <= 3 for d in steps) >= 0.8 * len(steps):
            return True
    return False


def _furniture(stripped: list[str], boundary: list[bool]) -> set[int]:
    """Indexes of page furniture (module doc, 4b): short lines that recur, their numbers aside,
    on three or more pages, each occurrence at a page edge."""
    # lines with a number, by their text with each number as "#" and spaces closed up
    numbered: dict[str, list[int]] = {}
    for i, s in enumerate(stripped):
        if len(s) <= FURNITURE_MAX_CHARS and not boundary[i] and _DIGIT.search(s):
            numbered.setdefault(" ".join(_DIGIT_RUN.sub("#", s).split()), []).append(i)
    # page edges to start from: form feeds, page-number lines, and lines that number pages
    anchors = {i for i, b in enumerate(boundary) if b}
    for w in numbered.values():
        if (
            _spread(w)
            and all(_PAGE_MARK.search(stripped[i]) for i in w)
            and _page_steps([_DIGIT_RUN.findall(stripped[i]) for i in w])
        ):
            anchors.update(w)
    if not anchors:
        return set()  # no page edge to stand at: nothing is furniture
    recurring = [w for w in numbered.values() if len(w) >= RUNNING_MIN_REPEATS]
    plain = Counter(s for s in stripped if s and len(s) <= FURNITURE_MAX_CHARS)
    texts = {s for s, n in plain.items() if n >= RUNNING_MIN_REPEATS and _LETTER_CHAR.search(s)}
    if texts:
        by_text: dict[str, list[int]] = {}
        for i, s in enumerate(stripped):
            if s in texts and not _DIGIT.search(s):
                by_text.setdefault(s, []).append(i)
        recurring += list(by_text.values())
    nonblank = [i for i, s in enumerate(stripped) if s or boundary[i]]
    pos = {i: k for k, i in enumerate(nonblank)}
    pages = max(
        1 + sum(b and not any(boundary[max(0, j - 3) : j]) for j, b in enumerate(boundary)),
        max((len(w) for w in recurring if w[0] in anchors), default=0),
    )
    found = {i for w in recurring for i in w if i in anchors}
    grew = True
    while grew:  # a line next to furniture is at the page edge too
        grew = False
        edges = sorted(anchors | found)
        for w in recurring:
            if w[0] in found or len(w) < max(RUNNING_MIN_REPEATS, pages * FURNITURE_SHARE):
                continue
            if (
                _LETTER_CHAR.search(stripped[w[0]])
                and all(_at_edge(pos[i], nonblank, anchors | found) for i in w)
                and _on_pages(w, edges)
            ):
                found.update(w)
                grew = True
    return found - {i for i, b in enumerate(boundary) if b}


def _spread(where: list[int]) -> bool:
    """Whether lines at ``where`` are spread as page numbers are: three or more, a page apart
    as a rule (a page at a letter's end may be short), never on neighbouring lines as the rows
    of a numbered list are."""
    gaps = sorted(b - a for a, b in zip(where, where[1:], strict=False))
    return (
        len(where) >= RUNNING_MIN_REPEATS
        and gaps[0] >= _LIST_GAP
        and gaps[len(gaps) // 2] >= _PAGE_LEAST_LINES
    )


def _on_pages(where: list[int], edges: list[int]) -> bool:
    """Whether each occurrence at ``where`` is on a page of its own: a page edge (``edges``,
    sorted) lies between any two of them."""
    return all(
        bisect.bisect_right(edges, a) < bisect.bisect_left(edges, b)
        for a, b in zip(where, where[1:], strict=False)
    )


def _at_edge(k: int, nonblank: list[int], edges: set[int]) -> bool:
    """Whether ``nonblank[k]`` is next to a page edge: within two non-blank lines of one, or
    among the first/last two lines of the text."""
    if k < 2 or k >= len(nonblank) - 2:
        return True
    return any(j in edges for j in nonblank[k - 2 : k + 3])


def clean_text(raw: str) -> str:
    """Clean one letter's raw text (see the module docstring for the exact list of changes)."""
    return clean_counted(raw)[0]


def clean_counted(raw: str) -> tuple[str, int]:
    """:func:`clean_text`, and how many running header/footer lines (page furniture) it
    removed."""
    text = raw.lstrip("\ufeff")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\f" in text or "[[" in text:
        text = _PAGE_BREAK.sub("\n" + _FORMFEED_MARK + "\n", text)
    if any(c in text for c in _CONTROL_CHARS):
        text = _CONTROL.sub("", text)
    lines = [ln.rstrip(" \t") for ln in text.split("\n")]
    stripped = [ln.strip() for ln in lines]  # once: every pass below reads it
    # _is_page_number asked only of short lines with a digit (it rejects every other line)
    page = [
        0 < len(s) <= 12
        and ln != _FORMFEED_MARK
        and any(c.isdigit() for c in s)
        and _is_page_number(lines, i)
        for i, (ln, s) in enumerate(zip(lines, stripped, strict=True))
    ]
    boundary = [p or ln == _FORMFEED_MARK for p, ln in zip(page, lines, strict=True)]
    running = _running_lines(lines, boundary, stripped)
    furniture = _furniture(stripped, boundary) if len(lines) > 2 * _PAGE_LEAST_LINES else set()
    kept: list[str] = []
    last_blank = False  # whether kept[-1] is blank
    after_gap = False  # a page artifact was just removed with blank lines above it
    removed = 0
    for i, (ln, s, is_page) in enumerate(zip(lines, stripped, page, strict=True)):
        if is_page or ln == _FORMFEED_MARK or (running and s in running) or i in furniture:
            # counted: the lines with words (a bare page number is no news to a reader)
            removed += not is_page and _LETTER_CHAR.search(s) is not None
            after_gap = after_gap or (bool(kept) and last_blank)
            continue
        if after_gap and not s:
            continue  # the blank lines on both sides of a page break are one gap, not two
        after_gap = False
        kept.append(ln)
        last_blank = not s
    while kept and not kept[0].strip():
        kept.pop(0)
    while kept and not kept[-1].strip():
        kept.pop()
    return ("\n".join(kept) + "\n" if kept else ""), removed


# --------------------------------------------------------------------------------------------
# year and date

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_RE = (
    r"(?P<month>January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
# month names in any case ("FEBRUARY 27, 2015"); day first too ("27 February 2015")
_FULL_DATE = re.compile(
    rf"\b{_MONTH_RE}\s*(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s*,\s*(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_FULL_DATE_DAY_FIRST = re.compile(
    rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH_RE},?\s+(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH_RE}\s+(?P<year>(?:19|20)\d\d)\b", re.IGNORECASE)
_DATE_LABEL = re.compile(r"^(?:dated|date)\s*:?$", re.IGNORECASE)  # "Dated: March 1, 1990"
# A date anywhere: r"\b" + _ANY_DATE_BODY.  The leading \b is checked on each hit instead of
# in the pattern, so the regex engine can skip ahead to the months' first letters (a pattern
# that opens with \b is tried at every position: 4x slower over a letter).  Same hits: no
# month name can start inside a match that began in the middle of a word.
# (No re.IGNORECASE here: it would stop the engine skipping ahead, 5x slower; capitalised and
# all-capital month names are listed instead.)  The names are grouped by first letter: the
# engine then tests one branch per capital it stops at, not up to 24 (a third quicker; at any
# position at most one three-letter name can match, so the order of the branches is moot).
_ANY_DATE_BODY = re.compile(
    r"(?:J(?:an|un|ul|AN|UN|UL)|F(?:eb|EB)|M(?:ar|ay|AR|AY)|A(?:pr|ug|PR|UG)|S(?:ep|EP)"
    r"|O(?:ct|CT)|N(?:ov|OV)|D(?:ec|EC))[A-Za-z]*\.?,?\s*"
    r"(?:\d{1,2}(?:st|nd|rd|th)?\s*,\s*)?"
    r"(?:19|20)\d\d\b"
)
_WORD_CHAR = re.compile(r"\w")
_SIGNATURE_CUE = re.compile(
    r"\b(Chairman|Vice Chairman|President|Chief Executive|Sincerely|Cordially|Yours)\b|/s/"
)
# a personal name alone on its line ("Warren E. Buffett", "Charles T. Munger, Vice Chairman"),
# indented or not (HTML extractions lose the indent): it only counts next to a date line
_NAME_LINE = re.compile(
    r"^\s*[A-Z][a-z]+(?: [A-Z]\.)?(?: [A-Z][a-z]+){1,2}(?:, [A-Z][a-z]+(?: [A-Z][a-z]+)?)?$"
)
_CLOSING = re.compile(
    r"^(?:cordially|sincerely|yours|very truly|respectfully|best regards|with best wishes)\b",
    re.I,
)
_SIGNER_TITLE = re.compile(
    r"(?:Vice )?Chairman(?: of the Board)?|(?:General |Managing )?Partner|President"
    r"|Chief Executive Officer",
    re.I,
)
# "Warren E. Buffett" at the start of its line, or after a wide gap ("February 2008    Warren
# E. Buffett"): a first name, middle initials, a last name, then nothing, a title or a date
_SIGNER_NAME = re.compile(
    r"(?:^|\s{3,})[A-Z][a-z]+(?: [A-Z]\.)+ [A-Z][a-z]+(?:[,;]? [A-Za-z ,.]{0,40}|\s+\S{6,10})?\.?$"
)
_YEAR_IN_NAME = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")
_NUMBER_IN_NAME = re.compile(r"(?<!\d)([12]\d{3})(?!\d)")  # what a user meant as a year
FIRST_LETTER_YEAR = 1950  # before any Buffett letter (the validator's related_years bound)
_YEAR_IN_TEXT = re.compile(r"(?<![\d,.$])((?:19|20)\d\d)(?![\d,])")
# a whole line that is a date, in the forms letters use: "January 22, 1969", "Jan. 22, 1969",
# "March 14,1978", "July 11th, 1968", "22nd January 1969", "22 Jan. 1969", "1/22/69",
# "2-11-59", "1969-01-22"; month only: "July, 1961", "February 2008"
_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR4 = r"(?P<year>(?:19|20)\d\d)"
_WHOLE_DATES = (
    re.compile(rf"{_MONTH_RE}\s*{_ORDINAL}\s*,?\s*{_YEAR4}", re.I),
    re.compile(rf"{_ORDINAL}\s+(?:of\s+)?{_MONTH_RE},?\s+{_YEAR4}", re.I),
)
_WHOLE_MONTH = re.compile(rf"{_MONTH_RE},?\s+{_YEAR4}", re.I)
_ISO_DATE = re.compile(r"(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)")
# month first, as American letters write it; a two-digit year is 19YY from 50 on, else 20YY
_NUMERIC_DATE = re.compile(r"(?P<month>\d{1,2})[-/](?P<day>\d{1,2})[-/](?P<year>\d{4}|\d{2})")
# the test of the character before the date is made after its first digit (a lookbehind over
# both): a pattern that opens with a lookbehind is tried at every position of the text, one that
# opens with \d only at digits (3x quicker over a letter, same matches)
_NUMERIC_IN_LINE = re.compile(r"\d(?<![\d/.,-]\d)\d?[-/]\d{1,2}[-/](?:\d{4}|\d{2})(?![\d/-])")


def _iso(year: int, month: int, day: int) -> str | None:
    if year < 100:
        year += 1900 if year >= 50 else 2000
    try:
        return _dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def parse_date_line(line: str) -> tuple[str | None, tuple[int, int] | None]:
    """A line that holds nothing but a date (a final period allowed): ``(ISO date, None)``;
    a month and a year only: ``(None, (year, month))``; anything else ``(None, None)``."""
    s = line.strip().rstrip(".").strip()
    if not s or len(s) > 40 or not any(c.isdigit() for c in s):
        return None, None
    for rx in _WHOLE_DATES:
        m = rx.fullmatch(s)
        if m:
            month = _MONTHS[m.group("month").lower()]
            return _iso(int(m.group("year")), month, int(m.group("day"))), None
    for rx in (_NUMERIC_DATE, _ISO_DATE):
        m = rx.fullmatch(s)
        if m:
            return _iso(int(m.group("year")), int(m.group("month")), int(m.group("day"))), None
    m = _WHOLE_MONTH.fullmatch(s)
    if m:
        return None, (int(m.group("year")), _MONTHS[m.group("month").lower()])
    return None, None


def furniture_note(count: int) -> str | None:
    """The boundary note of a letter whose running headers/footers the cleaner removed."""
    if not count:
        return None
    lines = "line" if count == 1 else "lines"
    return f"{count} page furniture {lines} (running headers/footers) removed by the cleaner."


def month_date(year: int, month: int, shown: str) -> tuple[str, str]:
    """``(letter_date, date_note)`` of a letter dated to the month only: the month's first day,
    and a note that says so (a reader accepts "February 2008" as the letter's date)."""
    return (
        f"{year:04d}-{month:02d}-01",
        f"Letter dated to the month only ('{shown}'); letter_date is that month's first day.",
    )


def _date_lines(text: str, lines: list[str]) -> list[tuple[int, re.Match[str], bool]]:
    """Lines that hold a date standing alone (possibly beside a name/title across wide space).

    Returns (line index, match, full) where ``full`` is False for a month-and-year-only date.
    One regex pass over the whole text finds the candidates; only their lines are examined.
    """
    hits: dict[int, None] = {}
    line, pos = 0, 0
    for hit in _ANY_DATE_BODY.finditer(text):
        at = hit.start()
        if at and _WORD_CHAR.match(text, at - 1):
            continue  # no word boundary before the month: not a date
        line += text.count("\n", pos, at)
        pos = at
        hits[line] = None
    out = []
    for i in hits:
        s = lines[i].strip()
        if not s or len(s) > 120:
            continue
        for rx, full in ((_FULL_DATE, True), (_FULL_DATE_DAY_FIRST, True), (_MONTH_YEAR, False)):
            m = rx.search(s)
            if not m:
                continue
            before, after = s[: m.start()].rstrip(), s[m.end() :].lstrip(". ")
            # alone (or after "Dated:"), or separated from the rest of the line by a wide gap
            # (signature columns)
            ok_before = (
                not before
                or _DATE_LABEL.match(before) is not None
                or re.search(r"\S\s{3,}$", s[: m.start()]) is not None
            )
            ok_after = not after or re.match(r"\s{3,}", s[m.end() :]) is not None
            if ok_before and ok_after:
                out.append((i, m, full))
                break
    return out


def is_signature(line: str) -> bool:
    """Whether ``line`` signs a letter: a closing ("Cordially,", "Sincerely yours"), a signer's
    title alone ("Chairman of the Board"), or a personal name with a middle initial, alone or
    with a title or a date beside it ("Warren E. Buffett, Chairman", "Warren E. Buffett
    1-30-61").  Stricter than a name-shaped line: "Common Stock Investments" is a header."""
    s = " ".join(line.split())
    if not s or len(s) > 80:
        return False
    return bool(
        _CLOSING.match(s)
        or _SIGNER_TITLE.fullmatch(s)
        or _SIGNER_NAME.search(s)
        or s.startswith("/s/")
    )


def _is_signature_line(ln: str) -> bool:
    s = ln.strip()
    # short once the column gap between a date and a title is closed up
    return (
        bool(s)
        and len(" ".join(s.split())) <= 80
        and (_SIGNATURE_CUE.search(s) is not None or _NAME_LINE.match(ln) is not None)
    )


def extract_date(text: str) -> tuple[str, str | None]:
    """``(letter_date, date_note)`` from the signature block of ``text``.

    A date line is a line holding a date alone or beside a name/title across 3+ spaces
    ("February 25, 2017      Warren E. Buffett"); formats: "March 4, 1986", "March 14,1978",
    "Feb. 27, 2016", "February 25th, 2017".  The first date line within three lines of a
    signature line (a title such as "Chairman", "/s/", "Sincerely", or an indented personal
    name) wins; failing that, a date line among the first five non-blank lines (letters dated
    at the top); failing that, a numeric date ("1-30-61") beside a signature line.  Only a
    month and a year ("February 2008"): the month's first day, with a note that the letter is
    dated to the month only.  No date at all: ``"0000-00-00"`` and a note.
    """
    lines = text.split("\n")
    candidates = _date_lines(text, lines)
    sig = {
        j
        for i, _, _ in candidates
        for j in range(max(0, i - 3), min(len(lines), i + 4))
        if _is_signature_line(lines[j])
    }
    head = []
    for i, ln in enumerate(lines):
        if ln.strip():
            head.append(i)
            if len(head) == 5:
                break
    partial = None
    for want_head in (False, True):
        for i, m, full in candidates:
            near = i in head if want_head else any(abs(i - j) <= 3 for j in sig)
            if not near:
                continue
            if not full:
                partial = partial or m.group(0)
                continue
            month = _MONTHS[m.group("month").lower()]
            day, year = int(m.group("day")), int(m.group("year"))
            if 1 <= day <= 31:
                return f"{year:04d}-{month:02d}-{day:02d}", None
    numeric = _numeric_signature_date(lines)
    if numeric:
        return numeric, None
    shown = _MONTH_YEAR.search(partial) if partial else None
    if shown:
        return month_date(int(shown.group("year")), _MONTHS[shown.group("month").lower()], shown[0])
    return UNKNOWN_DATE, "Letter date unknown: no dated signature block in the letter text."


def _numeric_signature_date(lines: list[str]) -> str | None:
    """A numeric date ("1-30-61", "2/11/59") standing alone, after a name, or across a wide
    gap from one, within three lines of a signature line; None when there is none.

    Signature lines are looked for only near a line with a numeric date (one regex pass over
    the text finds those): a letter has few, and the signature test of every line is costly."""
    text = "\n".join(lines)
    dated: set[int] = set()
    line, pos = 0, 0
    for hit in _NUMERIC_IN_LINE.finditer(text):  # no match spans a newline
        line += text.count("\n", pos, hit.start())
        pos = hit.start()
        dated.add(line)
    near = {i for j in dated for i in range(max(0, j - 3), min(len(lines), j + 4))}
    for i in sorted(i for i in near if is_signature(lines[i])):
        for j in range(max(0, i - 3), min(len(lines), i + 4)):
            for m in _NUMERIC_IN_LINE.finditer(lines[j]):
                before, after = lines[j][: m.start()], lines[j][m.end() :]
                beside = (
                    not before.strip()
                    or re.search(r"\S\s{3,}$", before) is not None
                    or _NAME_LINE.match(before.rstrip()) is not None
                )
                if beside and (not after.strip() or re.match(r"\s{3,}", after)):
                    found, _ = parse_date_line(m.group(0))
                    if found:
                        return found
    return None


def year_of_date(date: str) -> int:
    """The year a letter dated ``date`` reports on: the year before for January-June (letters
    are written after the year closes), else the date's year."""
    y, mo = int(date[:4]), int(date[5:7])
    return y - 1 if mo <= 6 else y


def extract_year(path: str | Path, text: str, date: str = UNKNOWN_DATE) -> int | None:
    """``letter_year``: what the text says (:func:`year_of_date` of its date); else a ``YYYY``
    (1900-2099) in the file name; else the year mentioned most often in the text (ties: the
    later year).  None when there is no year at all.
    """
    if date != UNKNOWN_DATE:
        return year_of_date(date)
    m = _YEAR_IN_NAME.search(Path(path).stem)
    if m:
        return int(m.group(1))
    counts = Counter(int(y) for y in _YEAR_IN_TEXT.findall(text))
    if not counts:
        return None
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


# --------------------------------------------------------------------------------------------
# loading


def _check_name_year(path: Path) -> None:
    """A year in the file name that no letter can have (``1850.txt``, ``2999.txt``) is refused,
    not silently replaced by a year found in the text."""
    m = _NUMBER_IN_NAME.search(path.stem)
    last = _dt.date.today().year + 1
    if m and not FIRST_LETTER_YEAR <= int(m.group(1)) <= last:
        raise InputError(
            path,
            f"the file name says year {m.group(1)}, which no letter can have "
            f"({FIRST_LETTER_YEAR}-{last}); rename the file to the letter's year, "
            "e.g. 1986.txt",
        )


def _notice_year(p: Path, year: int, date: str) -> None:
    """Warn where the year does not come from the text, or where the file name disagrees."""
    m = _YEAR_IN_NAME.search(p.stem)
    if date == UNKNOWN_DATE:
        if m:
            log.warning(
                "%s: no dated signature in the text; letter_year %d comes from the file name only",
                p,
                year,
            )
    elif m and int(m.group(1)) != year:
        log.warning(
            "%s: signature date %s: the letter reports on %d, so letter_year is %d (from the "
            "text), not %s (the file name); its files are named %d",
            p,
            date,
            year,
            year,
            m.group(1),
            year,
        )


def read_letter_file(p: Path) -> str:
    """The text of a letter file; :class:`InputError` (naming the file and what to do) when it
    cannot be read, is empty, is binary (NUL bytes) or is not UTF-8."""
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(p, f"cannot read the file ({exc.strerror}); check the path") from exc
    if not data.strip():
        raise InputError(p, _EMPTY)
    if b"\x00" in data:
        raise InputError(
            p, "the file looks binary (it contains NUL bytes); pass a plain-text letter (.txt)"
        )
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            p,
            f"the file is not UTF-8 (invalid byte at offset {exc.start}); convert it first, "
            f"e.g. `iconv -f cp1252 -t utf-8 {p.name} > fixed.txt`",
        ) from exc
    if _is_blank(raw):
        raise InputError(p, _EMPTY)
    return raw


# an ASCII-blank file and a file of Unicode blanks (no-break or em spaces, zero-width spaces,
# byte-order marks) are the same to a reader: empty
_EMPTY = (
    "the file is empty (nothing but blank characters: spaces, no-break spaces, zero-width "
    "spaces or byte-order marks); pass a letter text file with content"
)


def _is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: white space (any Unicode space) and invisible format
    characters (zero-width space, byte-order mark, word joiner) only."""
    # stops at the first visible character: the first of a real letter
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text.strip())


def load_letter(path: str | Path) -> CleanedLetter:
    """Read, check and clean one letter file.

    Raises :class:`InputError` (naming the file and what to do) when the file cannot be read,
    is empty, is binary (NUL bytes), is not UTF-8, holds no text after cleaning, or has no
    recognisable year.
    """
    p = Path(path)
    text, furniture = clean_counted(read_letter_file(p))
    if not text.strip():
        raise InputError(p, "the file holds no text after cleaning; pass a letter text file")
    _check_name_year(p)
    date, note = extract_date(text)
    year = extract_year(p, text, date)
    if year is None:
        raise InputError(
            p,
            "no letter year found (none in the file name or the text); "
            "rename the file to YYYY.txt, e.g. 1986.txt",
        )
    _notice_year(p, year, date)
    return CleanedLetter(
        year=year,
        date=date,
        date_note=note,
        source_path=str(p),
        text=text,
        clean_note=furniture_note(furniture),
    )
