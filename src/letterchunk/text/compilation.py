"""Compilations: one file holding many letters (such as the Buffett Partnership letters
1957-1970) -> one :class:`~letterchunk.text.clean.CleanedLetter` per letter.

Document profiles (``--profile``):

* ``letter`` — the file is one letter (:func:`~letterchunk.text.clean.load_letter`; the
  Berkshire letters);
* ``partnership`` — the file is a compilation of letters;
* ``auto`` (the default) — a compilation when at least two letters are found (see 2.) and
  at least two of them are dated (at the top or at the signature) or headed by a title naming
  their year ("1957 Letter"): an appendix or an essay inside one letter is neither; else one
  letter exactly as ``letter`` reads it.  The file's name plays no part.

Every rule below is a general property of letters and pages, found by repetition and shape,
never by a file's wording (``tests/compilations.py`` generates compilations of other
formats to hold the rules to that).  What :func:`load_document` does to a compilation:

1. **Running lines** are removed before the file is cut: *page lines* — a line whose text,
   digits aside, repeats at least :data:`RUNNING_MIN_REPEATS` times and one of whose numbers
   grows by 1 to 3 from one occurrence to the next in most places (``www.… Page 8``,
   ``Page 8 of 40``, ``- 8 -``), a number under 1900 (a year is not a page); *periodic lines*
   — a short line that repeats, whatever its wording, never closer than a page's least lines
   nor further apart than two pages' most, from the first page to the last, and that is not
   a letterhead (followed by a date line or a salutation, or a name over an address, in most
   places) nor a title naming a different year each time ("1958 Letter"); and *running
   headers/footers* — a line whose text repeats on at least half as many pages as there are
   page lines, and that sits next to one in at least 80% of its occurrences.  A closing,
   signature (dated or not: "2-11-59", "2-20-60" step as page numbers do), salutation or
   date line is never a running line, however often it repeats.
   Each removed line becomes a page break for the cleaner, so the gap rules of
   :func:`~letterchunk.text.clean.clean_text` apply.
2. **Letter starts**.  The marks of a letter's head: a *salutation* ("To the Partners:",
   "TO MY PARTNERS FOR 1963:", "Dear …,"), a *title* naming a letter, a report or a year
   ("1960 Letter", "1997 Chairman's Letter", "SECOND ANNUAL LETTER TO LIMITED PARTNERS"), a
   *date line* in any common form, a *letterhead*: short centred or capital lines followed by
   a date line or a salutation, or a name line ("WARREN E. BUFFETT", "Buffett Associates,
   Ltd.") right above a street address or a town ("5202 Underwood Ave.", "OMAHA 31,
   NEBRASKA").  A letter's *signature* is a closing or a signer's name or title
   (:func:`~letterchunk.text.clean.is_signature`), a signer's name in capitals or not with a
   date beside it in any form ("WARREN E. BUFFETT 2-11-59", "Warren Buffett Feb. 11, 1959"),
   or a name alone right above a date line or the next letter's head; a name among a
   letter's head lines, or over an address, is its letterhead, never a signature.  Its *tail*
   is the lines that go with it: initials ("WEB:bf"), a postscript, page breaks, and one date
   line within three lines of it (not when the signature line carries its date, not after a
   postscript or a page break, not set far to the right of the signature, not before a
   salutation unless right below the signature and in line with it, not another day than
   the letter's date at its top: a letter has one date).
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
   year its head's title names ("1957 Letter"; the note says so), else on the year of the
   letter before it.  A signature date is one within three lines of a signature line (a date
   over a table's column near the end is not the letter's).  The running lines removed from
   a letter, and the furniture its cleaning removes, are counted in its chunks'
   ``boundary_note``.
5. **Names**: ``YYYY-L{k}`` (see :mod:`letterchunk.layout`); :func:`segment_letters` numbers
   each letter's sections after those of the year's earlier letters.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
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
    clean_counted,
    clean_text,
    extract_date,
    furniture_note,
    load_letter,
    month_date,
    parse_date_line,
    read_letter_file,
)
from letterchunk.text.segment import segment_letter
from letterchunk.text.starts import (
    _HEAD_MOST,
    _TAIL_DATE_GAP,
    _TITLE_LETTER,
    _TITLE_YEAR,
    HEAD_LINES,
    _is_address,
    _is_letterhead,
    _is_salutation,
    _is_signer_line,
    _is_title,
    _signed,
    _signs,
    find_letter_starts,
)
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
_TAIL_LINES = 40  # its signature among its last
_ANNUAL_LAST_MONTH = 3  # a letter dated January-March reports on the year before

_DIGITS = re.compile(r"\d+")
_BARE_PAGE = re.compile(r"[-–—(\[]? ?# ?[-–—)\]]?")
_LETTER = re.compile(r"[A-Za-z]")
_RUNNING_MAX_CHARS = 120  # a running header/footer is one short line
_PAGE_LEAST, _PAGE_MOST = 12, 80  # the lines of a page, at least and at most


@dataclass(frozen=True)
class LetterSpan:
    """One letter of a compilation: its lines ``[start, end)`` of the file."""

    start: int
    end: int
    running: int = 0  # running lines (page furniture) removed from it


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
    return bool(_signs(s) or _is_salutation(s) or any(parse_date_line(s)))


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


def _names_years(lines: Sequence[str], where: list[int]) -> bool:
    """Whether the occurrences are a short title naming a different year each time ("1958
    Letter", "Letter for 1959"): each letter's heading, not a running line."""
    years = {tuple(_TITLE_YEAR.findall(lines[i])) for i in where}
    return len(years) > 1 and all(
        len(lines[i].split()) <= 4 and _TITLE_YEAR.search(lines[i]) for i in where
    )


def _heads_letters(
    lines: Sequence[str], nonblank: list[int], pos: dict[int, int], where: list[int]
) -> bool:
    """Whether most occurrences are followed, within four lines, by a date line or a salutation,
    or are a letterhead's lines (a name over an address, an address): a letterhead, not a
    running line."""
    heads = 0
    for i in where:
        k = pos[i]
        after = [lines[j] for j in nonblank[k + 1 : k + 5]]
        heads += (
            any(_is_salutation(a.strip()) or any(parse_date_line(a)) for a in after)
            or _is_address(lines[i])
            or _is_letterhead(lines, nonblank, k)
        )
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
        if _letter_words(lines[where[0]]):
            continue  # a signature dated each year ("NAME 2-11-59", "NAME 2-20-60") is no page
        if (
            "#" in form
            and _is_page_form(lines, where)
            or (
                len(form) <= _RUNNING_MAX_CHARS
                and _is_periodic(where, len(lines))
                and not _heads_letters(lines, nonblank, pos, where)
                and not _names_years(lines, where)
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
# dates and years


def _head_date(lines: list[str]) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """(full date, (year, month) of a month-only date, the date line) from the head."""
    for s in lines[:HEAD_LINES]:
        full, month = parse_date_line(s)
        if full or month:
            return full, month, s.strip()
    return None, None, None


def _signature_date(lines: list[str]) -> str | None:
    """The last date of the signature: a date line within three lines of a signature line
    (when the letter has one: a date over a table's column is not its date), or a date after a
    name ("… 1-30-61")."""
    tail = lines[-_TAIL_LINES:]
    signed = [j for j, s in enumerate(tail) if _signs(s.strip()) or _is_signer_line(s.strip())]
    for j in range(len(tail) - 1, -1, -1):
        s = tail[j]
        full, _ = parse_date_line(s)
        if full and (not signed or any(abs(j - g) <= _TAIL_DATE_GAP for g in signed)):
            return full
        name, found = _signed(s)
        if found and (_NAME_LINE.match(name) or _signs(s)):
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


def _heading_year(text: str) -> tuple[int, str] | None:
    """``(year, line)`` of a title naming a year among the letter's head lines ("1957 Letter",
    "Letter for 1958", "1959 Report"), else None."""
    for s in [ln.strip() for ln in text.split("\n") if ln.strip()][:_HEAD_MOST]:
        years = _TITLE_YEAR.findall(s)
        if len(years) == 1 and _is_title(s) and _TITLE_LETTER.search(s):
            return int(years[0]), s
    return None


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
    """The file's lines, running lines turned into page breaks, and its letters' spans (each
    with the number of running lines it held)."""
    lines = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    running = running_lines(lines)
    raw_lines = lines
    lines = ["\f" if i in running else ln for i, ln in enumerate(lines)]
    starts = find_letter_starts(lines, running)
    ends = starts[1:] + [len(lines)]
    # counted as the cleaner counts: the lines with words (a bare page number is no news)
    worded = [i for i in running if _LETTER.search(raw_lines[i])]
    return lines, [
        LetterSpan(s, e, sum(s <= i < e for i in worded)) for s, e in zip(starts, ends, strict=True)
    ]


def _dated_letters(lines: list[str], spans: list[LetterSpan]) -> int:
    """How many of the letters found have a date of their own (at the top or at the
    signature): a compilation's letters do; an appendix or an essay inside one letter does not."""
    dated = 0
    for span in spans:
        text = clean_text("\n".join(lines[span.start : span.end]))
        dated += bool(text.strip()) and (
            _date(text)[0] != UNKNOWN_DATE or _heading_year(text) is not None
        )
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
        text, furniture = clean_counted("\n".join(lines[span.start : span.end]))
        if not text.strip():
            continue
        date, note, month = _date(text)
        titled = _heading_year(text)
        if date == UNKNOWN_DATE and month is None and titled is not None:
            year: int | None = titled[0]
            note = f"{note} letter_year {titled[0]} is from its heading '{titled[1]}'."
        else:
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
        clean_note = furniture_note(furniture + span.running)
        out.append(
            CleanedLetter(year, date, note, str(path), text, stem=stem, clean_note=clean_note)
        )
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
