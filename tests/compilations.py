"""Compilations built from the shared texts, each knowing its truth: the letters it holds, in
order, with their dates.  They are the unseen compilations the splitter is judged on: the
shared 1960-68 compilation cut into pages differently, its letterheads and titles stripped,
its date lines rewritten in other common forms, running headers and footers of other wordings
(with and without page numbers) every N lines, and annual letters concatenated.

The generator knows its sources (which lines are the shared compilation's own page lines,
where each of its letters starts); the splitter knows none of it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LC_SHARED_DIR", ROOT.parent / "shared"))
PARTNERSHIP = SHARED / "partnership" / "partnership_1960-1968.txt"
LETTERS = ROOT / "corpus" / "letters"

# first lines (1-based) of the 20 letters of the shared compilation, each at the top of a page,
# and the dates of the letters (read from the file: the head date line, else the signature)
PARTNERSHIP_STARTS = [1, 234, 360, 785, 998, 1093, 1623, 1933, 2002, 2577, 2762, 3408, 3600]
PARTNERSHIP_STARTS += [3659, 4166, 4392, 4794, 4938, 5134, 5357]
PARTNERSHIP_DATES = [
    "1961-01-30", "1961-07-22", "1962-01-24", "1962-07-06", "1962-11-01", "1963-01-18",
    "1963-07-10", "1963-11-06", "1964-01-18", "1964-07-08", "1965-01-18", "1965-07-09",
    "1965-11-01", "1966-01-20", "1966-07-12", "1967-01-25", "1967-07-12", "1967-10-09",
    "1968-01-24", "1968-07-11",
]  # fmt: skip
# annual letters with their signature dates (tests/test_corpus pins them)
ANNUAL = {1977: "1978-03-14", 1982: "1983-03-03", 1985: "1986-03-04", 1995: "1996-03-01"}
ANNUAL |= {2009: "2010-02-26", 2012: "2013-03-01"}

_SOURCE_RUNNING = re.compile(r"csinvesting|Buffett Partnership Letters 1957 to 1970")
_HEAD_DATE = re.compile(
    r"^(?P<month>[A-Z][a-z]+) (?P<day>\d{1,2})(?:st|nd|rd|th)?, (?P<year>\d{4})$"
)
_MONTHS = [_dt.date(2000, m, 1).strftime("%B") for m in range(1, 13)]

# a date in each common form
DATE_FORMS = (
    lambda d: f"{_MONTHS[d.month - 1]} {d.day}, {d.year}",  # January 22, 1969
    lambda d: f"{_MONTHS[d.month - 1][:3]}. {d.day}, {d.year}",  # Jan. 22, 1969
    lambda d: f"{d.month}/{d.day}/{d.year % 100:02d}",  # 1/22/69
    lambda d: f"{d.month}-{d.day}-{d.year % 100:02d}",  # 2-11-59
    lambda d: f"{d.day}{_ordinal(d.day)} {_MONTHS[d.month - 1]} {d.year}",  # 22nd January 1969
)
# running header and footer wordings ({n}: the page number, {total}: the pages); None: no line
WORDINGS: tuple[tuple[str | None, str | None], ...] = (
    (
        "                    Collected Partnership Letters",
        "                                 Page {n}",
    ),
    ("BPL -- ARCHIVE EDITION", "                                   - {n} -"),
    (None, "Partnership letters, reading copy                                    {n}/{total}"),
    ("            Letters to the Partners, a reading edition", None),  # no page number at all
    ("Omaha Letters Series", "www.example.org/archive          Letters          p. {n}"),
)


def _ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


@dataclass(frozen=True)
class Case:
    """A generated compilation and its truth."""

    name: str
    text: str
    dates: list[str]  # each letter's date, in reading order
    keys: list[str]  # a line of prose from each letter: the letter found must hold it
    running: list[str]  # the running lines put in: no letter found may hold one


def partnership_letters() -> list[list[str]]:
    """The lines of each letter of the shared compilation, its own page lines taken out."""
    lines = PARTNERSHIP.read_text(encoding="utf-8").split("\n")
    ends = PARTNERSHIP_STARTS[1:] + [len(lines) + 1]
    return [
        [ln for ln in lines[a - 1 : b - 1] if not _SOURCE_RUNNING.search(ln)]
        for a, b in zip(PARTNERSHIP_STARTS, ends, strict=True)
    ]


def strip_head(letter: list[str]) -> list[str]:
    """The letter without its letterhead and title: the centred lines above its date line or
    its first line of text."""
    out = list(letter)
    while out and (not out[0].strip() or _is_centred(out[0])):
        out.pop(0)
    return out


def _is_centred(line: str) -> bool:
    s = line.strip()
    indent = len(line) - len(line.lstrip())
    return indent >= 10 and _HEAD_DATE.match(s) is None and not s.endswith(":") and len(s) < 60


def reformat_date(letter: list[str], form: int) -> list[str]:
    """The letter with its head date line ("January 24, 1962") written in ``DATE_FORMS[form]``."""
    out = list(letter)
    for i, ln in enumerate(out[:20]):
        m = _HEAD_DATE.match(ln.strip())
        if m and m.group("month") in _MONTHS:
            d = _dt.date(
                int(m.group("year")), _MONTHS.index(m.group("month")) + 1, int(m.group("day"))
            )
            indent = ln[: len(ln) - len(ln.lstrip())]
            out[i] = indent + DATE_FORMS[form % len(DATE_FORMS)](d)
            break
    return out


def paginate(lines: list[str], every: int, wording: int) -> tuple[list[str], list[str]]:
    """``lines`` cut into pages of ``every`` lines, a running footer and header between pages
    in ``WORDINGS[wording]``; also the running lines put in."""
    header, footer = WORDINGS[wording % len(WORDINGS)]
    pages = [lines[i : i + every] for i in range(0, len(lines), every)]
    out: list[str] = []
    put: list[str] = []
    for n, page in enumerate(pages, start=1):
        if header and n > 1:
            out += [header, ""]
            put.append(header.strip())
        out += page
        if footer:
            text = footer.format(n=n, total=len(pages))
            out += ["", text]
            put.append(text.strip())
    return out, put


def _key(letter: list[str]) -> str:
    """A line of prose from the middle of the letter (eight words or more)."""
    prose = [ln.strip() for ln in letter if len(ln.split()) >= 8 and "  " not in ln.strip()]
    return " ".join(prose[len(prose) // 2].split())


def build(
    name: str,
    letters: list[list[str]],
    dates: list[str],
    *,
    every: int | None = None,
    wording: int = 0,
) -> Case:
    """A compilation of ``letters`` one after the other, paginated when ``every`` is given."""
    lines = [ln for letter in letters for ln in [*letter, ""]]
    running: list[str] = []
    if every:
        lines, running = paginate(lines, every, wording)
    keys = [_key(letter) for letter in letters]
    return Case(name, "\n".join(lines) + "\n", list(dates), keys, running)


def annual_letters(years: list[int]) -> list[list[str]]:
    return [(LETTERS / f"{y}.txt").read_text(encoding="utf-8").split("\n") for y in years]


def cases() -> list[Case]:
    """The generated formats (each a different cut, head, date form and page wording)."""
    letters = partnership_letters()
    dates = PARTNERSHIP_DATES
    stripped = [strip_head(x) for x in letters]
    redated = [reformat_date(x, i) for i, x in enumerate(letters)]
    bare_redated = [reformat_date(x, i + 2) for i, x in enumerate(stripped)]
    years = sorted(ANNUAL)
    out = [
        Case(
            "original",
            PARTNERSHIP.read_text(encoding="utf-8"),
            list(dates),
            [_key(x) for x in letters],
            [],
        ),
        build("pages-recut", letters, dates, every=52, wording=0),
        build("letterheads-stripped", stripped, dates, every=47, wording=1),
        build("dates-reformatted", redated, dates, every=60, wording=2),
        build("unnumbered-header", bare_redated, dates, every=55, wording=3),
        build("early-subset", bare_redated[:3], dates[:3], every=40, wording=4),
        build("middle-subset", redated[6:11], dates[6:11], every=44, wording=1),
        build(
            "annual-paginated",
            annual_letters(years),
            [ANNUAL[y] for y in years],
            every=58,
            wording=4,
        ),
        build("annual-plain", annual_letters(years[:4]), [ANNUAL[y] for y in years[:4]]),
    ]
    return out
