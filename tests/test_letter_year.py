"""A letter's year comes from its text where the text says so (its dated signature), the file
name being the fallback; either way the user is told when the name is not what was used."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from letterchunk.cli import main
from letterchunk.errors import InputError
from letterchunk.runner.prepare import check_one_letter_per_key
from letterchunk.text.clean import load_letter

ROOT = Path(__file__).resolve().parents[1]
MISNAMED = ROOT / "corpus" / "letters" / "2018.txt"  # holds the 2017 letter, signed 2018-02-24
UNDATED = ROOT / "corpus" / "letters" / "1991.txt"  # ends mid-sentence: no signature


def test_the_text_year_wins_over_the_file_name_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        letter = load_letter(MISNAMED)
    assert (letter.year, letter.date, letter.key) == (2017, "2018-02-24", 2017)
    assert letter.cleaned_name == "2017_cleaned.txt"
    [msg] = [r.getMessage() for r in caplog.records]
    assert "2018.txt" in msg and "letter_year is 2017 (from the text)" in msg and "2018" in msg


def test_the_file_name_is_the_fallback_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        letter = load_letter(UNDATED)
    assert letter.year == 1991 and letter.date == "0000-00-00"
    assert any("from the file name only" in r.getMessage() for r in caplog.records)


def test_an_agreeing_name_says_nothing(caplog):
    with caplog.at_level(logging.WARNING):
        letter = load_letter(ROOT / "corpus" / "letters" / "1977.txt")
    assert letter.year == 1977 and caplog.records == []


def test_two_letters_of_one_year_are_refused(tmp_path):
    """A correctly named copy of the 2017 letter beside the misnamed file: both are 2017, so a
    run refuses them before anything is asked, naming both files."""
    folder = tmp_path / "letters"
    folder.mkdir()
    shutil.copy(MISNAMED, folder / "2017.txt")
    shutil.copy(MISNAMED, folder / "2018.txt")
    loaded = [(p, load_letter(p)) for p in sorted(folder.glob("*.txt"))]
    with pytest.raises(InputError) as err:
        check_one_letter_per_key(loaded)
    assert "2018.txt" in str(err.value) and "2017.txt" in str(err.value)
    # segment writes the first and reports the second as an input error (exit 2)
    out = tmp_path / "out"
    assert main(["segment", str(folder), "--out", str(out), "--quiet"]) == 2
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["2017.jsonl"]


def test_the_corpus_segments_without_error_and_holds_one_2017(tmp_path):
    out = tmp_path / "out"
    assert main(["segment", str(ROOT / "corpus" / "letters"), "--out", str(out), "-q"]) == 0
    names = {p.stem for p in out.glob("*.jsonl")}
    assert "2017" in names and "2018" not in names and len(names) == 46
