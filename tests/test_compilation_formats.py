"""Compilations of formats the project has no file of, composed feature by feature from the
shared letters' text (tests/compilations.py): letters announced by a "YYYY Letter" line, a
letterhead, a title in capitals or a salutation (or none), signed with a date in any common
form on the signature line or the line after it (or undated), page furniture on every page;
and single letters, which are never split."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compilations as gen
from letterchunk.text.clean import UNKNOWN_DATE
from letterchunk.text.compilation import load_document

SHARED_LETTERS = sorted((gen.SHARED / "letters").glob("*.txt"))
needs_letters = pytest.mark.skipif(
    not gen.LETTERS.is_dir(), reason=f"{gen.LETTERS} absent (the corpus letters)"
)
needs_shared = pytest.mark.skipif(
    not SHARED_LETTERS, reason=f"{gen.SHARED / 'letters'} absent (shared data at ../shared)"
)


def hypothesis_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _load(path: Path):
    logging.disable(logging.WARNING)
    try:
        return load_document(path)
    finally:
        logging.disable(logging.NOTSET)


@functools.cache
def _plain_words(path: Path) -> list[str]:
    """The words of a shared letter read as it is (once per process)."""
    [letter] = _load(path)
    return letter.text.split()


def _check(case: gen.Case, tmp: Path) -> None:
    """Every letter found, in order, holding its own text; dated as generated, or undated with
    a note and the year of its heading; no furniture line left in any letter."""
    path = tmp / f"{case.name}.txt"
    path.write_text(case.text, encoding="utf-8")
    letters = _load(path)
    assert [x.date for x in letters] == case.dates, case.name
    if case.years is not None:
        assert [x.year for x in letters] == case.years, case.name
    for letter, key in zip(letters, case.keys, strict=True):
        assert key in " ".join(letter.text.split()), (case.name, letter.stem, key)
        if letter.date == UNKNOWN_DATE:
            assert letter.date_note and "heading" in letter.date_note, letter.date_note
    running = set(case.running)
    inside = [ln for x in letters for ln in x.text.split("\n") if ln.strip() in running]
    assert inside == [], case.name
    # the furniture removed is counted in the notes of the letters it was in: every line with
    # words, nothing else (a bare page number "- 3 -" goes uncounted)
    counted = sum(
        int(m) for x in letters for m in re.findall(r"(\d+) page furniture", x.clean_note or "")
    )
    assert counted == sum(any(c.isalpha() for c in ln) for ln in case.running), case.name


@needs_letters
@pytest.mark.parametrize("case", gen.feature_cases(), ids=lambda c: c.name)
def test_each_feature_alone_and_mixed(case, tmp_path):
    _check(case, tmp_path)


@needs_letters
def test_the_early_partnership_rendition_is_three_letters(tmp_path):
    """The issue's file: three letters, the first undated (year from "1957 Letter"), the
    second signed "NAME 2-11-59", the third dated on the line after its signature."""
    case = gen.early_partnership()
    path = tmp_path / "partnership_1957-1959.txt"
    path.write_text(case.text, encoding="utf-8")
    letters = _load(path)
    assert [(x.stem, x.date) for x in letters] == [
        ("1957-L1", "0000-00-00"),
        ("1958-L1", "1959-02-11"),
        ("1959-L1", "1960-02-20"),
    ]
    assert "1957 Letter" in (letters[0].date_note or "")


# the heads a generated letter may have: each announces a letter after a signature (a year
# and "Letter", a letterhead of a name and an address, a title, a date line, a salutation)
HEADS = ("y", "yna", "ynat", "na", "nat", "c", "yc", "s", "ys", "ynas", "nas", "yd", "nad", "d")


@st.composite
def compilations(draw: st.DrawFn) -> gen.Case:
    count = draw(st.integers(2, 4))
    first = draw(st.integers(1956, 1995))
    undated = draw(st.sampled_from([None, *range(count)]))
    letters = []
    for k in range(count):
        year = first + k
        date = None if k == undated else gen.annual_date(year, draw(st.integers(0, 30)))
        # an undated letter names its year in its heading (the only place left to find it)
        heads = [h for h in HEADS if date is not None or h.startswith("y")]
        parts = draw(st.sampled_from(heads))
        letters.append(
            gen.Letter(
                year,
                date,
                gen.heading(year, parts, draw(st.integers(0, 5)), date),
                date_form=draw(st.integers(0, len(gen.SIGNATURE_DATE_FORMS) - 1)),
                date_apart=draw(st.booleans()),
                signer=draw(st.integers(0, 5)),
            )
        )
    furnished = draw(st.booleans())
    form = draw(st.integers(0, len(gen.FURNITURE) - 1))
    lines = draw(st.integers(50, 140))
    # furniture recurs on three pages or more: four pages at least (a header skips the first)
    every = min(draw(st.integers(40, 70)), count * lines // 4)
    return gen.compose(
        "random",
        letters,
        every=every if furnished else None,
        furniture=form,
        feeds=draw(st.booleans()),
        title=draw(st.sampled_from(gen.TITLES)),
        lines=lines,
    )


@needs_letters
@hypothesis_settings(40)
@given(case=compilations())
def test_random_compilations_of_unseen_formats(tmp_path, case):
    _check(case, tmp_path)


@needs_shared
@pytest.mark.parametrize("path", SHARED_LETTERS, ids=lambda p: p.stem)
def test_a_shared_letter_is_one_letter(path):
    [letter] = _load(path)
    assert letter.stem is None and letter.clean_note is None


@needs_shared
@hypothesis_settings(25)
@given(
    which=st.integers(0, 200),
    every=st.integers(40, 80),
    form=st.integers(0, len(gen.FURNITURE) - 1),
    feeds=st.booleans(),
    title=st.sampled_from(gen.TITLES),
)
def test_a_furnished_shared_letter_is_one_letter_without_its_furniture(
    tmp_path, which, every, form, feeds, title
):
    """Furniture at every page break of a single letter: still one letter, the furniture
    gone and counted, every other line kept in order."""
    source = SHARED_LETTERS[which % len(SHARED_LETTERS)]
    lines = source.read_text(encoding="utf-8").split("\n")
    every = min(every, len(lines) // 4)  # four pages at least: a header skips the first
    furnished, put = gen.furnish(lines, every, form, title=title, feeds=feeds or form == 4)
    path = tmp_path / source.name
    path.write_text("\n".join(furnished), encoding="utf-8")
    [letter] = _load(path)
    assert letter.stem is None
    assert letter.text.split() == _plain_words(source)
    # counted: the furniture with words (a bare page number "7" or "- 7 -" is not counted)
    worded = [ln for ln in put if any(c.isalpha() for c in ln)]
    assert letter.clean_note is not None and f"{len(worded)} page furniture" in letter.clean_note
