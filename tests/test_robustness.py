"""The shipped letters, re-extracted differently: the same structure must come out.

Each variation is one a different PDF/HTML extraction of the same letter could give (CRLF line
ends, trailing blanks, tabs for indentation, no indentation at all, page numbers between
blank lines).  Over every shipped letter: no validator error, the same letter date, the same
number of tables, and every section title still found (a title may merge into a combined
"A / B" title when a smaller section falls under the Tier-1 minimum).
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path

import pytest

from letterchunk.contract.validate import LetterContext, validate_letter
from letterchunk.text.clean import CleanedLetter, clean_text, extract_date
from letterchunk.text.segment import UNTITLED, section_titles, segment_letter

LETTERS = sorted((Path(__file__).resolve().parents[1] / "corpus" / "letters").glob("*.txt"))

VARIATIONS = {
    "crlf": lambda s: s.replace("\n", "\r\n"),
    "trailing-blanks": lambda s: s.replace("\n", "   \n"),
    "tab-indent": lambda s: re.sub(r"\n {5}(?=\S)", "\n\t", s),
    "no-indent": lambda s: re.sub(r"\n +(?=[A-Za-z])", "\n", s),
    # a page number between blank lines before every third block that follows a blank line
    "page-numbers": lambda s: _every_third(
        re.compile(r"\n\n(?=\S)"), "\n\n                    - 7 -\n\n", s
    ),
}


def _every_third(gap: re.Pattern[str], page_break: str, s: str) -> str:
    seen = iter(range(len(s)))
    return gap.sub(lambda m: page_break if next(seen) % 3 == 0 else m.group(0), s)


def _structure(raw: str, year: int) -> tuple[str, set[str], int, list[str]]:
    text = clean_text(raw)
    date, note = extract_date(text)
    chunks = segment_letter(CleanedLetter(year, date, note, "x", text))
    context = LetterContext(cleaned_text=text)
    violations = validate_letter(chunks, stage="segmented", context=context)
    errors = [f"{v.code}: {v.message}" for v in violations if v.severity == "error"]
    titles = {t for title in section_titles(chunks) for t in title.split(" / ") if t != UNTITLED}
    tables = sum(len(c.metadata.table_data) for c in chunks if c.metadata.chunk_tier == 3)
    return date, titles, tables, errors


@cache
def _original(path: Path) -> tuple[str, frozenset[str], int]:
    date, titles, tables, errors = _structure(path.read_text(encoding="utf-8"), int(path.stem))
    assert errors == []
    return date, frozenset(titles), tables


@pytest.mark.parametrize("variation", sorted(VARIATIONS))
def test_other_extractions_of_the_letters_give_the_same_structure(variation, caplog):
    caplog.set_level(logging.ERROR)
    problems = []
    for path in LETTERS:
        date0, titles0, tables0 = _original(path)
        raw = VARIATIONS[variation](path.read_text(encoding="utf-8"))
        date, titles, tables, errors = _structure(raw, int(path.stem))
        if errors:
            problems.append(f"{path.name}: {errors[:2]}")
        if date != date0:
            problems.append(f"{path.name}: date {date} != {date0}")
        if tables != tables0:
            problems.append(f"{path.name}: {tables} tables != {tables0}")
        lost = sorted(titles0 - titles)
        if lost:
            problems.append(f"{path.name}: titles lost {lost}")
    assert problems == []
