"""The compilation splitter judged on compilations it has not seen: formats generated from the
shared texts (tests/compilations.py), each with its truth, and random ones (hypothesis)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compilations as gen
from letterchunk.text.clean import UNKNOWN_DATE
from letterchunk.text.compilation import load_document

needs_shared = pytest.mark.skipif(
    not gen.PARTNERSHIP.is_file(), reason=f"{gen.PARTNERSHIP} absent (shared data at ../shared)"
)


def _check(case: gen.Case, tmp: Path) -> None:
    """The split and the dates are the truth's; every letter has a date or a note saying why;
    no running line put in is left inside a letter."""
    path = tmp / f"{case.name}.txt"
    path.write_text(case.text, encoding="utf-8")
    logging.disable(logging.WARNING)
    try:
        letters = load_document(path)
    finally:
        logging.disable(logging.NOTSET)
    assert [x.date for x in letters] == case.dates, case.name
    for letter, key in zip(letters, case.keys, strict=True):
        assert key in " ".join(letter.text.split()), (case.name, letter.stem, key)
        assert letter.date != UNKNOWN_DATE or letter.date_note
    running = set(case.running)
    inside = [ln for x in letters for ln in x.text.split("\n") if ln.strip() in running]
    assert inside == [], case.name


def test_the_truth_starts_open_pages_of_the_shared_file():
    """The generator's truth, checked against the file: each letter starts on a new page."""
    if not gen.PARTNERSHIP.is_file():
        pytest.skip("shared data absent")
    lines = gen.PARTNERSHIP.read_text(encoding="utf-8").split("\n")
    for start in gen.PARTNERSHIP_STARTS[1:]:
        above = [ln for ln in lines[: start - 1] if ln.strip()][-1]
        assert "Buffett Partnership Letters 1957 to 1970" in above, start


@needs_shared
@pytest.mark.parametrize("case", gen.cases(), ids=lambda c: c.name)
def test_generated_formats_split_into_the_right_letters_with_the_right_dates(case, tmp_path):
    assert len({c.name for c in gen.cases()}) >= 5
    _check(case, tmp_path)


@needs_shared
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.integers(0, 17),
    count=st.integers(2, 5),
    strip=st.booleans(),
    forms=st.lists(st.integers(0, len(gen.DATE_FORMS) - 1), min_size=5, max_size=5),
    every=st.integers(38, 75),
    wording=st.integers(0, len(gen.WORDINGS) - 1),
)
def test_random_cuts_of_the_partnership_letters(
    tmp_path, first, count, strip, forms, every, wording
):
    letters = gen.partnership_letters()[first : first + count]
    dates = gen.PARTNERSHIP_DATES[first : first + count]
    if strip:
        letters = [gen.strip_head(x) for x in letters]
    letters = [gen.reformat_date(x, f) for x, f in zip(letters, forms, strict=False)]
    _check(gen.build("random", letters, dates, every=every, wording=wording), tmp_path)


@needs_shared
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    years=st.lists(st.sampled_from(sorted(gen.ANNUAL)), min_size=2, max_size=4, unique=True),
    every=st.one_of(st.none(), st.integers(45, 75)),
    wording=st.integers(0, len(gen.WORDINGS) - 1),
)
def test_annual_letters_concatenated(tmp_path, years, every, wording):
    years = sorted(years)
    case = gen.build(
        "annual",
        gen.annual_letters(years),
        [gen.ANNUAL[y] for y in years],
        every=every,
        wording=wording,
    )
    _check(case, tmp_path)
