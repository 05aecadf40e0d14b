"""Compilations: one file holding many letters (such as the Buffett Partnership letters
1957-1970) -> one :class:`~letterchunk.text.clean.CleanedLetter` per letter.

Document profiles (``--profile``):

* ``letter`` — the file is one letter (:func:`~letterchunk.text.clean.load_letter`; the
  Berkshire letters);
* ``partnership`` — the file is a compilation of letters;
* ``auto`` (the default) — a compilation when at least two letter starts are found (see 2.),
  else one letter exactly as ``letter`` reads it.

What :func:`load_document` does to a compilation, in order:

1. **Running lines** are removed before the file is cut: *page lines* — a line whose text,
   digits aside, repeats at least :data:`RUNNING_MIN_REPEATS` times and whose last number grows
   by 1 to 3 from one occurrence to the next in most places (``www.… Page 8``, ``Page 9``), a
   number under 1900 (a year is not a page) — and *running headers/footers* — a line whose text
   repeats on at least half as many pages as there are page lines and form feeds, and that sits
   next to one (previous or next non-blank line) in at least 80% of its occurrences.  A closing,
   salutation or personal-name line is never a running line, however often it repeats.  Each
   removed line becomes a page boundary for the cleaner, so the gap rules of
   :func:`~letterchunk.text.clean.clean_text` apply.
2. **Letter starts**: a *letterhead* — at least two short indented lines (a blank line between
   them allowed), one of them in capitals, followed within four non-blank lines by a date line
   or a salutation ("TO MY PARTNERS:", "Dear …") — or a date line followed within three
   non-blank lines by a salutation.  The first letter starts at the top of the file, so a title
   page belongs to it.  A start is kept only when the text since the previous one holds a
   closing or a signature ("Cordially", "Warren E. Buffett"), or when it opens a page (the
   non-blank line before it is a running line), so a statement's centred heading in the middle
   of a letter's page does not cut it.  The letters tile the file: every line that is not a
   running line belongs to exactly one letter.
3. Each letter is cleaned by :func:`~letterchunk.text.clean.clean_text` into its own text.
4. **Date**: the date line among the first :data:`HEAD_LINES` non-blank lines ("January 24,
   1962", "July 11th, 1968"); when that line gives only a month ("July, 1961") or is missing,
   the signature's date in the last lines ("July 22, 1961", "Warren E. Buffett 1-30-61") when
   it agrees with that month.  No date: ``0000-00-00``, a note in the chunks' ``boundary_note``
   and a warning naming the letter's first line.  **Year**: the year the letter reports on — an
   annual letter dated January to March reports on the year before; any other letter on its
   date's year; an undated one on the year of the letter before it.
5. **Names**: ``YYYY-L{k}`` (see :mod:`letterchunk.layout`); :func:`segment_letters` numbers
   each letter's sections after those of the year's earlier letters.
"""

from __future__ import annotations

import datetime as _dt
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
    _MONTH_RE,
    _MONTHS,
    _NAME_LINE,
    _SIGNATURE_CUE,
    _YEAR_IN_NAME,
    _YEAR_IN_TEXT,
    RUNNING_MIN_REPEATS,
    UNKNOWN_DATE,
    CleanedLetter,
    clean_text,
    load_letter,
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
_LETTER = re.compile(r"[A-Za-z]")
_SALUTATION = re.compile(
    r"^(?:to (?:my|the|all|our) [\w .,'-]{2,50}|dear [\w .,'-]{2,50}|(?:ladies and )?gentlemen)"
    r"\s*[:,]?$",
    re.IGNORECASE,
)
_CLOSING = re.compile(r"^(?:cordially|sincerely|yours|very truly|respectfully|best regards)", re.I)
# a numeric date: "1-30-61", "1/30/1961" (month first), at the end of a line
_NUMERIC_DATE = re.compile(r"(?<![\d/-])(\d{1,2})[-/](\d{1,2})[-/](\d{4}|\d{2})\s*$")
# a date line: "January 24, 1962", "July 11th, 1968", "October 9 1967", "9 October 1967",
# "July, 1961" (month only), "1-30-61"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_FULL_LINES = (
    re.compile(rf"^{_MONTH_RE}\s*{_DAY}\s*,?\s*{_YEAR}$", re.I),
    re.compile(rf"^{_DAY}\s+{_MONTH_RE},?\s+{_YEAR}$", re.I),
)
_MONTH_LINE = re.compile(rf"^{_MONTH_RE}\s*,?\s+{_YEAR}$", re.I)


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
    """Whether the occurrences ``where`` of one form number pages (their last number grows)."""
    nums = []
    for i in where:
        found = _DIGITS.findall(lines[i])
        if not found:
            return False
        nums.append(int(found[-1]))
    if max(nums) >= 1900:
        return False
    steps = [b - a for a, b in zip(nums, nums[1:], strict=False)]
    return sum(1 <= d <= 3 for d in steps) >= 0.8 * len(steps)


def _letter_words(line: str) -> bool:
    """A closing, salutation or personal name: words of a letter, whatever their repetition."""
    s = line.strip()
    return bool(
        _CLOSING.match(s) or _SALUTATION.match(s) or _SIGNATURE_CUE.search(s) or _NAME_LINE.match(s)
    )


def running_lines(lines: Sequence[str]) -> set[int]:
    """Indexes of the compilation's page lines and running headers/footers (module doc, 1.)."""
    occ = _occurrences(lines)
    anchors: set[int] = {i for i, ln in enumerate(lines) if "\f" in ln}
    for form, where in occ.items():
        if (
            len(where) >= RUNNING_MIN_REPEATS
            and "#" in form
            and _LETTER.search(form)
            and _is_page_form(lines, where)
        ):
            anchors.update(where)
    if not anchors:
        return set()
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    pos = {i: k for k, i in enumerate(nonblank)}
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
    s = line.strip()
    if not s or len(s) > 40:
        return False
    return bool(
        any(rx.match(s) for rx in _FULL_LINES) or _MONTH_LINE.match(s) or _NUMERIC_DATE.fullmatch(s)
    )


def _is_heading_line(line: str) -> bool:
    """A short indented line, as letterheads are printed (centred)."""
    s = line.strip()
    return len(s) <= 70 and _LETTER.search(s) is not None and _indent(line) >= 10


def _is_caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 3 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


def _letterhead_start(lines: Sequence[str], nonblank: list[int], k: int) -> int | None:
    """The first line of the letterhead that starts at ``nonblank[k]``, or None."""
    block = [nonblank[k]]
    j = k + 1
    while (
        j < len(nonblank)
        and _is_heading_line(lines[nonblank[j]])
        and not _is_date_line(lines[nonblank[j]])
        and nonblank[j] - block[-1] <= 2
    ):
        block.append(nonblank[j])
        j += 1
    if len(block) < 2 or not any(_is_caps(lines[i]) for i in block):
        return None
    after = [lines[i].strip() for i in nonblank[j : j + 4]]
    if any(_is_date_line(s) or _SALUTATION.match(s) for s in after):
        return block[0]
    return None


def _signed(lines: Sequence[str], start: int, end: int) -> bool:
    """Whether lines ``[start, end)`` hold a closing or a signature ("… Buffett 1-30-61")."""
    for i in range(start, end):
        s = _NUMERIC_DATE.sub("", lines[i]).strip()
        if s and (_CLOSING.match(s) or _SIGNATURE_CUE.search(s) or _NAME_LINE.match(s)):
            return True
    return False


def _page_top(lines: Sequence[str], running: AbstractSet[int], at: int) -> bool:
    """Whether line ``at`` opens a page: the non-blank line before it is a running line."""
    i = at - 1
    while i >= 0 and i not in running and not lines[i].strip():
        i -= 1
    return i < 0 or i in running


def find_letter_starts(lines: Sequence[str], running: AbstractSet[int] = frozenset()) -> list[int]:
    """First lines of the letters in ``lines`` (module doc, 2.); always starts with 0.

    ``running``: the indexes of the running lines (never part of a letterhead)."""
    nonblank = [i for i, ln in enumerate(lines) if ln.strip() and i not in running]
    found: list[int] = []
    k = 0
    while k < len(nonblank):
        i = nonblank[k]
        start = None
        if _is_heading_line(lines[i]) and (k == 0 or not _is_heading_line(lines[nonblank[k - 1]])):
            start = _letterhead_start(lines, nonblank, k)
        if start is None and _is_date_line(lines[i]):
            after = [lines[j].strip() for j in nonblank[k + 1 : k + 4]]
            if any(_SALUTATION.match(s) for s in after):
                start = i
        if start is not None and (not found or found[-1] < start):
            found.append(start)
        k += 1
    starts = [0]
    for s in found:
        if s > starts[-1] and (_signed(lines, starts[-1], s) or _page_top(lines, running, s)):
            starts.append(s)
    return starts


# --------------------------------------------------------------------------------------------
# dates and years


def _line_date(line: str) -> str | None:
    """The ISO date of a date line with a day, else None."""
    s = line.strip()
    m = _FULL_LINES[0].match(s) or _FULL_LINES[1].match(s)
    if m:
        try:
            month = _MONTHS[m.group("month").lower()]
            return _dt.date(int(m.group("year")), month, int(m.group("day"))).isoformat()
        except ValueError:
            return None
    m = _NUMERIC_DATE.fullmatch(s)
    return _numeric(m) if m else None


def _numeric(m: re.Match[str]) -> str | None:
    month, day, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if year < 100:
        year += 1900 if year >= 50 else 2000
    try:
        return _dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def _head_date(lines: list[str]) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """(full date, (year, month) of a month-only date, the date line) from the head."""
    for s in lines[:HEAD_LINES]:
        if not _is_date_line(s):
            continue
        full = _line_date(s)
        if full:
            return full, None, s.strip()
        m = _MONTH_LINE.match(s.strip())
        if m:
            return None, (int(m.group("year")), _MONTHS[m.group("month").lower()]), s.strip()
    return None, None, None


def _signature_date(lines: list[str]) -> str | None:
    """The last date of the signature: a date line, or a date after a name ("… 1-30-61")."""
    for s in reversed(lines[-_TAIL_LINES:]):
        if _is_date_line(s) and _line_date(s):
            return _line_date(s)
        m = _NUMERIC_DATE.search(s)
        if m and (s[: m.start()].strip() == "" or _NAME_LINE.match(s[: m.start()].rstrip())):
            found = _numeric(m)
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
    signed = _signature_date(lines)
    if signed and (month is None or (int(signed[:4]), int(signed[5:7])) == month):
        return signed, None, None
    if month is not None:
        note = f"Letter date unknown: the date line gives only '{shown}' (no day)."
        return UNKNOWN_DATE, note, month
    return (
        UNKNOWN_DATE,
        "Letter date unknown: no date line at the top and no dated signature.",
        None,
    )


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


def _dated_heads(lines: list[str], spans: list[LetterSpan]) -> int:
    """How many letters have a date line at the top (a compilation's letters do; a letter
    dated only at its signature, such as a Berkshire letter, does not)."""
    dated = 0
    for span in spans:
        head = [ln for ln in lines[span.start : span.end] if ln.strip()][:HEAD_LINES]
        dated += any(_is_date_line(ln) for ln in head)
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
    if profile == "auto" and _dated_heads(lines, spans) < 2:
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
