"""Cleaner: exactly the documented changes, year/date extraction, and refusal of bad files."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from letterchunk.cli import main
from letterchunk.errors import InputError
from letterchunk.text.clean import (
    _ANY_DATE_BODY,
    _NUMERIC_IN_LINE,
    UNKNOWN_DATE,
    clean_text,
    extract_date,
    extract_year,
    load_letter,
)

PROSE = (
    "     The textile business again had a very poor year. We\n"
    "have mistakenly predicted better results.\n"
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\r\nb\rc\n", "a\nb\nc\n"),  # line endings
        ("word   \nnext\t\n", "word\nnext\n"),  # trailing spaces and tabs
        ("\n\n\nbody\n\n\n", "body\n"),  # outer blank lines
        ("one\fTwo\n", "one\nTwo\n"),  # form feed is a page boundary
        ("end of\n[[PAGE_BREAK]]\nthe sentence\n", "end of\nthe sentence\n"),  # marker
        ("\ufeffbody\n", "body\n"),  # BOM
        ("a\x00b\x07c\n", "abc\n"),  # control characters
        ("end of page.\n\n                        7\nNext page\n", "end of page.\n\nNext page\n"),
        # a page number between blank lines: removed, and the break leaves one gap, not two
        ("end.\n\n- 12 -\n\nmore\n", "end.\n\nmore\n"),
        ("end.\n\n              12\n\n\nmore\n", "end.\n\nmore\n"),
        ("end of\n\n              12\n\nthe sentence\n", "end of\n\nthe sentence\n"),
        ("text\nPage 3\n\nmore\n", "text\nPage 3\n\nmore\n"),  # not alone: kept
        ("31› per share, 1⁄ 2 of it\n", "31› per share, 1⁄ 2 of it\n"),  # damage kept verbatim
    ],
)
def test_clean_text_changes_only_what_it_documents(raw, expected):
    assert clean_text(raw) == expected


def test_a_page_break_between_column_headings_and_rows_keeps_the_table_whole():
    from letterchunk.text.blocks import detect_blocks

    raw = (
        "Our holdings at yearend were:\n\n"
        "                               Cost        Market\n"
        "                            --------     --------\n\n"
        "                                                          14\n\n"
        "Company A ..................   $ 1,234     $ 5,678\n"
        "Company B ..................     2,345       6,789\n"
        "Total ......................   $ 3,579     $12,467\n\n"
        "We like these businesses.\n"
    )
    text = clean_text(raw)
    tables = [b for b in detect_blocks(text) if b.kind == "table"]
    assert len(tables) == 1
    assert "Cost" in text[tables[0].start : tables[0].end]
    assert "Total" in text[tables[0].start : tables[0].end]


def test_table_numbers_are_not_page_numbers():
    raw = "Year     Value\n1999     12\n2000     14\n   2001\n"
    assert "2001" in clean_text(raw)  # 4 digits: never a page number


def test_running_header_removed_only_when_repeated_at_page_boundaries():
    raw = "".join(
        f"ACME ANNUAL REVIEW\nPage {n} text goes on here.\nAnd it continues.\n\n          {n}\n"
        for n in range(1, 5)
    )
    out = clean_text(raw)
    assert "ACME ANNUAL REVIEW" not in out
    assert out.count("text goes on") == 4


def test_repeated_line_not_at_page_boundary_is_kept():
    raw = "(in millions)\nrow 1\n\n(in millions)\nrow 2\n\n(in millions)\nrow 3\n"
    assert clean_text(raw).count("(in millions)") == 3


def test_one_off_letterhead_is_kept():
    raw = "BERKSHIRE HATHAWAY INC.\n\nTo the Shareholders:\n\n" + PROSE
    assert clean_text(raw).startswith("BERKSHIRE HATHAWAY INC.\n")


def test_words_are_never_rewrapped():
    assert clean_text(PROSE) == PROSE


@pytest.mark.parametrize(
    ("tail", "date"),
    [
        ("                    Warren E. Buffett, Chairman\n\nMarch 14,1978\n", "1978-03-14"),
        ("Warren E. Buffett\nChairman of the Board\nMarch 4, 1986\n", "1986-03-04"),
        ("February 25, 2017      Warren E. Buffett\n      Chairman of the Board\n", "2017-02-25"),
        (
            "              Warren E. Buffett\nFeb. 28, 1989        Chairman of the Board\n",
            "1989-02-28",
        ),
        (
            "              Sincerely,\n              /s/ Warren E. Buffett\n Mar. 1, 1991\n",
            "1991-03-01",
        ),
        ("     Charles T. Munger\n     Vice Chairman\n     February 25th, 2015\n", "2015-02-25"),
        # no indentation at all (an HTML extraction), the date beside the title far apart
        ("Warren E. Buffett\nMarch 14, 1984" + " " * 60 + "Chairman of the Board\n", "1984-03-14"),
        ("Warren E. Buffett\n\nMarch 2, 1990\n", "1990-03-02"),
        ("Warren E. Buffett\nChairman of the Board\nFEBRUARY 27, 2015\n", "2015-02-27"),
        ("Warren E. Buffett\nChairman of the Board\n27 February 2015\n", "2015-02-27"),
        ("Sincerely,\n\nWarren E. Buffett\nChairman\n\nDated: March 1, 1990\n", "1990-03-01"),
    ],
)
def test_signature_dates(tail, date):
    text = "Body of the letter mentions March 3, 1980 in passing.\n\n" + tail
    assert extract_date(text) == (date, None)


def test_date_at_the_head_of_the_letter():
    text = "To the Shareholders:\n                        February 26, 1982\n\nBody text.\n"
    assert extract_date(text)[0] == "1982-02-26"


def test_month_and_year_only_is_a_date_to_the_month():
    date, note = extract_date(
        "Body.\n\nFebruary 2008        Warren E. Buffett\n   Chairman of the Board\n"
    )
    assert date == "2008-02-01" and "February 2008" in note and "month only" in note


@pytest.mark.parametrize(
    ("tail", "date"),
    [
        ("Warren E. Buffett 1-30-61\n", "1961-01-30"),
        ("Cordially,\n\nWarren E. Buffett\n2/11/59\n", "1959-02-11"),
        ("Warren E. Buffett, Chairman\n\n3/14/1978\n", "1978-03-14"),
    ],
)
def test_numeric_dates_beside_a_signature(tail, date):
    assert extract_date("Body of the letter.\n\n" + tail) == (date, None)


def test_a_numeric_date_beside_a_header_is_not_a_signature_date():
    text = "Body.\n\nCommon Stock Investments\n                 12/31/97\n\nShares  Company\n"
    assert extract_date(text)[0] == UNKNOWN_DATE


def test_dates_in_prose_are_ignored():
    date, note = extract_date(
        "On March 31, 1976 our gains were large.\n\nWarren E. Buffett, Chairman\n"
    )
    assert date == UNKNOWN_DATE and note


@pytest.mark.parametrize(
    ("name", "text", "date", "year"),
    [
        ("1986.txt", "", UNKNOWN_DATE, 1986),
        ("letter-2004-final.txt", "", UNKNOWN_DATE, 2004),
        ("letter.txt", "", "1987-02-27", 1986),  # written after the year closes
        ("2018.txt", "", "2018-02-24", 2017),  # the text's date wins over the file name
        ("letter.txt", "in 1990 and 1990, not 1989", UNKNOWN_DATE, 1990),  # most mentioned
        ("letter.txt", "no year here", UNKNOWN_DATE, None),
    ],
)
def test_extract_year(name, text, date, year):
    assert extract_year(name, text, date) == year


def test_load_letter(tmp_path):
    p = tmp_path / "1977.txt"
    p.write_text(
        "To the Stockholders:\r\n\r\n" + PROSE + "\nWarren E. Buffett, Chairman\nMarch 14,1978\n"
    )
    letter = load_letter(p)
    assert (letter.year, letter.date, letter.date_note) == (1977, "1978-03-14", None)
    assert letter.cleaned_name == "1977_cleaned.txt"
    assert "\r" not in letter.text


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("1990.txt", b"", "empty"),
        ("1990.txt", b"   \n\n  ", "empty"),
        # Unicode blanks (no-break space, em space, zero-width space, byte-order marks) too
        ("1990.txt", "\ufeff\u00a0\u2003\n\u200b\ufeff \u2060\n".encode(), "empty"),
        ("1990.txt", b"PK\x03\x04\x00\x00binary", "binary"),
        ("1990.txt", "caf\u00e9 r\u00e9sum\u00e9".encode("cp1252"), "not UTF-8"),
        ("notes.txt", b"A letter without any year at all.", "no letter year"),
    ],
)
def test_bad_files_are_refused_with_the_file_and_what_to_do(tmp_path, name, data, says):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError) as exc:
        load_letter(p)
    assert str(p) in str(exc.value) and says in str(exc.value)
    assert exc.value.path == str(p)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_letter(tmp_path / "1999.txt")


# The date scans are written for the regex engine's speed (first-letter groups, a lookbehind
# after the first digit); each must find exactly what its plain form finds.
_PLAIN_NUMERIC_DATE = re.compile(r"(?<![\d/.,-])\d{1,2}[-/]\d{1,2}[-/](?:\d{4}|\d{2})(?![\d/-])")
_MONTHS3 = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
_PLAIN_ANY_DATE = re.compile(
    "(?:" + "|".join(_MONTHS3 + [m.upper() for m in _MONTHS3]) + r")[A-Za-z]*\.?,?\s*"
    r"(?:\d{1,2}(?:st|nd|rd|th)?\s*,\s*)?(?:19|20)\d\d\b"
)
_date_bits = st.sampled_from(
    [*_MONTHS3, *(m.upper() for m in _MONTHS3), "uary", "Ju", "JA", "a", "1", "12", "19", "20",
     "1986", "2015", "3rd", "/", "-", ".", ",", " ", "\n", "x"]
)  # fmt: skip


@given(st.lists(_date_bits, max_size=30).map("".join))
def test_date_scans_find_what_their_plain_forms_find(text):
    def spans(rx):
        return [m.span() for m in rx.finditer(text)]

    assert spans(_NUMERIC_IN_LINE) == spans(_PLAIN_NUMERIC_DATE)
    assert spans(_ANY_DATE_BODY) == spans(_PLAIN_ANY_DATE)


@pytest.mark.parametrize(
    "data",
    [b"  \n\t\n", "\ufeff\u00a0\u2003\n\u200b\ufeff\n".encode()],
    ids=["ascii-blank", "unicode-blank"],
)
def test_a_blank_letter_is_refused_with_exit_2(tmp_path, capsys, data):
    """ASCII blanks and Unicode blanks alike: exit 2, the file named, nothing written."""
    path = tmp_path / "1990.txt"
    path.write_bytes(data)
    out = tmp_path / "out"
    assert main(["segment", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "the file is empty" in err
    assert not list(out.glob("*.jsonl"))
