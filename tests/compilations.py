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
    years: list[int] | None = None  # each letter's letter_year, where the case knows it


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


# --------------------------------------------------------------------------------------------
# compilations of other formats, composed feature by feature: each letter's heading (a
# "YYYY Letter" line, a letterhead of a name and a street address, a title in capitals, a topic
# heading, a salutation or none), its signature date (any common form, on the signature line or
# the line after it, or none), and page furniture (a footer with an address, a tagline and a
# page number, a running title, "- N -", a date) at every page break, with or without form
# feeds.  The letters' text is cut from the shared letters (their middles: no head, no
# signature); only the furniture and the heads are made up, as a compilation's editor adds them.

UNKNOWN = "0000-00-00"
_NAME_FORMS = ("WARREN E. BUFFETT", "Warren E. Buffett", "BUFFETT ASSOCIATES, LTD.")
_ADDRESSES = (
    "5202 Underwood Ave. Omaha, Nebraska",
    "810 KIEWIT PLAZA",
    "1440 Kiewit Plaza, Omaha, Nebraska 68131",
)
_CAPS_TITLES = (
    "{ordinal} ANNUAL LETTER TO LIMITED PARTNERS",
    "ANNUAL REPORT TO THE PARTNERS",
    "LETTER TO THE LIMITED PARTNERS",
)
_TOPICS = ("The General Stock Market Picture in {year}", "Results in {year}:", "Our Results")
_SALUTATIONS = ("To the Partners:", "TO MY PARTNERS:", "Dear Partner,", "To the Limited Partners:")
_ORDINALS = ("FIRST", "SECOND", "THIRD", "FOURTH", "FIFTH", "SIXTH")
_SIGNERS = ("Warren E. Buffett", "WARREN E. BUFFETT", "Warren Buffett")
# the signature dates the issue names: 2-11-59, 2/11/59, Feb. 11, 1959, February 11th, 1959,
# 11 February 1959
SIGNATURE_DATE_FORMS = (
    lambda d: f"{d.month}-{d.day}-{d.year % 100:02d}",
    lambda d: f"{d.month}/{d.day}/{d.year % 100:02d}",
    lambda d: f"{_MONTHS[d.month - 1][:3]}. {d.day}, {d.year}",
    lambda d: f"{_MONTHS[d.month - 1]} {d.day}{_ordinal(d.day)}, {d.year}",
    lambda d: f"{d.day} {_MONTHS[d.month - 1]} {d.year}",
)
# page furniture: (header, footer); {n} the page number, {title} the compilation's name,
# {total} the pages, {date} a date that changes from page to page (a printing date)
FURNITURE: tuple[tuple[str | None, str | None], ...] = (
    (
        "                                      {title}",
        "www.example-investing.org                   studying/teaching/investing"
        "                                   Page {n}",
    ),
    ("{title}", "                                   - {n} -"),
    (None, "{title}          Page {n} of {total}"),
    ("    {title}    printed {date}", "                                         {n}"),
    ("{title}", None),  # a running title alone, at the top of every page but the first
)
TITLES = ("Partnership Letters 1957 to 1959", "THE EARLY LETTERS", "Letters to Partners")


@dataclass(frozen=True)
class Letter:
    """How one generated letter is announced and signed."""

    year: int  # the year it reports on
    date: str | None  # its signature date (ISO), None: undated
    head: tuple[str, ...]  # its heading lines, top to bottom (blank lines as "")
    date_form: int = 0  # SIGNATURE_DATE_FORMS index
    date_apart: bool = False  # the date on the line after the signature, not on it
    signer: int = 0


def body(source: int, part: int, lines: int = 70) -> list[str]:
    """About ``lines`` lines of prose from the middle of a shared annual letter (the shared
    folder's letters, whichever they are; else the corpus's), cut at blank lines: no head, no
    signature, no date line of its own."""
    folder = SHARED / "letters" if list((SHARED / "letters").glob("*.txt")) else LETTERS
    years = sorted(int(p.stem) for p in folder.glob("*.txt") if p.stem.isdigit())
    text = (folder / f"{years[source % len(years)]}.txt").read_text(encoding="utf-8")
    src = text.split("\n")
    last = len(src) * 3 // 4  # the signature, the date and any appendix lie below
    at = len(src) // 5 + (part * 37) % max(1, len(src) // 3)
    while at < last and src[at].strip():
        at += 1
    end = min(last, at + 1 + lines)
    while end < last and src[end].strip():
        end += 1
    return [ln for ln in src[at + 1 : end] if "\f" not in ln]


def letter_lines(letter: Letter, text: list[str]) -> list[str]:
    """The letter: its heading, its text, its signature and date as ``letter`` says."""
    signer = _SIGNERS[letter.signer % len(_SIGNERS)]
    tail = ["", "Sincerely,", ""] if letter.signer % 2 else [""]
    if letter.date is None:
        tail.append(signer)
    else:
        d = _dt.date.fromisoformat(letter.date)
        shown = SIGNATURE_DATE_FORMS[letter.date_form % len(SIGNATURE_DATE_FORMS)](d)
        tail += [signer, shown] if letter.date_apart else [f"{signer} {shown}"]
    return [*letter.head, "", *text, *tail]


def heading(year: int, parts: str, k: int, date: str | None = None) -> tuple[str, ...]:
    """A letter's heading made of ``parts``: y = "YYYY Letter", n = a name line, a = an address
    line, d = a date line (``date`` in ``DATE_FORMS[k]``), c = a title in capitals, t = a topic
    heading, s = a salutation, in that order."""
    centre = " " * 40
    out: list[str] = []
    for p in parts:
        if p == "d" and date is not None:
            shown = DATE_FORMS[k % len(DATE_FORMS)](_dt.date.fromisoformat(date))
            out += ["", f"{centre}{centre}{shown}"]
        if p == "y":
            out.append(f"{centre}{year} Letter")
        elif p == "n":
            out.append(f"{centre[:35]}{_NAME_FORMS[k % len(_NAME_FORMS)]}")
        elif p == "a":
            out.append(f"{centre[:30]}{_ADDRESSES[k % len(_ADDRESSES)]}")
        elif p == "c":
            title = _CAPS_TITLES[k % len(_CAPS_TITLES)]
            out += ["", f"{centre[:25]}{title.format(ordinal=_ORDINALS[k % len(_ORDINALS)])}"]
        elif p == "t":
            out += ["", _TOPICS[k % len(_TOPICS)].format(year=year)]
        elif p == "s":
            out += ["", _SALUTATIONS[k % len(_SALUTATIONS)]]
    return tuple(out)


def furnish(
    lines: list[str], every: int, form: int, *, title: str, feeds: bool = False
) -> tuple[list[str], list[str]]:
    """``lines`` cut into pages of ``every`` lines with ``FURNITURE[form]`` at each page break
    (and a form feed between pages when ``feeds``); also the furniture lines put in."""
    header, footer = FURNITURE[form % len(FURNITURE)]
    pages = [lines[i : i + every] for i in range(0, len(lines), every)]
    out: list[str] = []
    put: list[str] = []
    for n, page in enumerate(pages, start=1):
        fill = {"n": n, "total": len(pages), "title": title}
        fill["date"] = f"{(n % 12) + 1}/{(n * 7) % 27 + 1}/1961"
        if header and (n > 1 or form % 2 == 0):
            text = header.format(**fill)
            out += [text, ""]
            put.append(text.strip())
        out += page
        if footer:
            text = footer.format(**fill)
            out += ["", text]
            put.append(text.strip())
        if feeds and n < len(pages):
            out.append("\f")
    return out, put


def compose(
    name: str,
    letters: list[Letter],
    *,
    every: int | None = None,
    furniture: int = 0,
    feeds: bool = False,
    title: str = TITLES[0],
    lines: int = 70,
) -> Case:
    """A compilation of generated letters, one after the other, furnished when ``every``."""
    texts = [body(k * 7 + letter.year, k, lines) for k, letter in enumerate(letters)]
    out = [ln for lt, tx in zip(letters, texts, strict=True) for ln in [*letter_lines(lt, tx), ""]]
    put: list[str] = []
    if every:
        out, put = furnish(out, every, furniture, title=title, feeds=feeds)
    keys = [_key(tx) for tx in texts]
    dates = [lt.date or UNKNOWN for lt in letters]
    return Case(name, "\n".join(out) + "\n", dates, keys, put, [lt.year for lt in letters])


def annual_date(year: int, k: int) -> str:
    """A signature date early in the year after ``year`` (an annual letter's)."""
    return _dt.date(year + 1, 1 + k % 3, 1 + (k * 9) % 27).isoformat()


def early_partnership() -> Case:
    """A rendition of a 1957-1959 compilation as commonly circulated: each letter opens with a
    centred "YYYY Letter", a letterhead and no salutation, the second with a title in capitals;
    the first is undated, the second signed "NAME 2-11-59", the third dated on the line after
    its signature; a footer (address, tagline, page) and a running title on every page."""
    letters = [
        Letter(1957, None, heading(1957, "ynat", 0)),
        Letter(1958, "1959-02-11", heading(1958, "ynac", 1), date_form=0),
        Letter(1959, "1960-02-20", heading(1959, "ynat", 0), date_form=0, date_apart=True),
    ]
    return compose("early-partnership", letters, every=50, furniture=0, lines=130)


def feature_cases() -> list[Case]:
    """One generated format per feature of the issue, alone and mixed."""
    years = [1957, 1958, 1959, 1960]
    out = [early_partnership()]
    # no salutation: letterhead and "YYYY Letter" only, dates in each form
    out.append(
        compose(
            "no-salutation",
            [
                Letter(y, annual_date(y, k), heading(y, "yna", k), date_form=k)
                for k, y in enumerate(years)
            ],
        )
    )
    # numeric dates on the signature line or on the line after it, plain letterheads
    out.append(
        compose(
            "numeric-dates",
            [
                Letter(y, annual_date(y, k), heading(y, "na" if k % 2 else "nat", k), k % 2,
                       date_apart=k >= 2, signer=k)
                for k, y in enumerate(years)
            ],
        )
    )  # fmt: skip
    # furniture on every page, each wording, form feeds or not
    for form in range(len(FURNITURE)):
        out.append(
            compose(
                f"furniture-{form}",
                [
                    Letter(y, annual_date(y, k), heading(y, "yns", k), date_form=form + k)
                    for k, y in enumerate(years[:3])
                ],
                every=41 + 3 * form,
                furniture=form,
                feeds=form % 2 == 1,
                title=TITLES[form % len(TITLES)],
            )
        )
    # an undated letter between dated ones
    out.append(
        compose(
            "undated-letter",
            [
                Letter(1957, annual_date(1957, 0), heading(1957, "yna", 0), date_form=3),
                Letter(1958, None, heading(1958, "yna", 1)),
                Letter(1959, annual_date(1959, 2), heading(1959, "yna", 2), date_form=4),
            ],
        )
    )
    # a title in capitals and nothing else as the heading (after the first letter)
    out.append(
        compose(
            "title-only",
            [
                Letter(y, annual_date(y, k), heading(y, "c", k), date_form=k, date_apart=k == 1)
                for k, y in enumerate(years)
            ],
        )
    )
    # everything at once
    out.append(
        compose(
            "mixed",
            [
                Letter(1957, None, heading(1957, "yat", 2), signer=1),
                Letter(1958, annual_date(1958, 1), heading(1958, "c", 1), 1, date_apart=True),
                Letter(1959, annual_date(1959, 2), heading(1959, "ynas", 2), 2, signer=2),
                Letter(1960, annual_date(1960, 3), heading(1960, "yt", 0), 3),
            ],
            every=46,
            furniture=3,
            feeds=True,
            title=TITLES[1],
        )
    )
    return out
