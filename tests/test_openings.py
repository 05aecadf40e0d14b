"""A letter's opening and closing, and fragments around tables, are no section headers: the
letterhead with its label and date line, a salutation of any addressee, a signature dated on
its line, a plain name under a closing, the typist's initials, a row label wrapped under a
table, the subject of an enumeration."""

from __future__ import annotations

import pytest

from letterchunk.text.blocks import detect_blocks
from letterchunk.text.clean import CleanedLetter, clean_text
from letterchunk.text.segment import UNTITLED, segment_letter
from test_corpus import check_invariants
from test_segment import kinds, prose

LETTERHEAD = (
    "                                         1962 Letter\n"
    "                                  SMITH PARTNERSHIP, LTD.\n"
    "                                     12 GRAND AVENUE\n"
    "                                   SPRINGFIELD, OHIO\n"
    "\n"
)


def _letter(text: str, year: int = 1962) -> CleanedLetter:
    return CleanedLetter(
        year=year, date="1963-01-20", date_note=None, source_path="x", text=clean_text(text)
    )


def _titles(text: str) -> list[str]:
    letter = _letter(text)
    chunks = segment_letter(letter)
    assert check_invariants(letter.text, letter.year, chunks) == []
    return [c.metadata.section_title for c in chunks if c.metadata.chunk_tier == 1]


def _body(n: int = 4, seed: int = 1) -> str:
    return "\n\n".join(prose(6, seed + k, indent="") for k in range(n)) + "\n"


# ------------------------------------------------------------------------ openings


@pytest.mark.parametrize(
    ("date_line", "salutation"),
    [
        ("January 20, 1963", "TO MY PARTNERS:"),
        ("July, 1961", "To My Partners for 1964:"),
        ("July 11th, 1968", "Gentlemen:"),
        ("1-30-61", "Dear Partners,"),
    ],
)
def test_letterhead_date_and_salutation_are_one_opening_never_a_title(date_line, salutation):
    text = clean_text(LETTERHEAD + " " * 70 + date_line + "\n\n" + salutation + "\n\n" + _body())
    found = kinds(text)
    assert found[:2] == [("letterhead", "1962 Letter"), ("salutation", salutation)]
    assert not any(k == "header" for k, _ in found)
    assert _titles(text) == [UNTITLED]  # no header: the untitled convention


def test_the_first_header_after_the_opening_titles_the_first_chunk():
    text = LETTERHEAD + " " * 70 + "January 20, 1963\n\nOur Performance in 1962\n\n" + _body()
    text += "\nThe Joint Results\n\n" + _body(seed=9)
    assert _titles(text) == ["Our Performance in 1962", "The Joint Results"]


def test_partners_named_under_the_date_line_belong_to_the_letterhead():
    names = "Warren E. Buffett, General Partner\nWilliam Scott\nJohn M. Harding\n"
    text = LETTERHEAD + " " * 70 + "July 9, 1965\n" + names + "\nFirst Half Performance:\n\n"
    text += _body() + "\nInvestment Companies\n\n" + _body(seed=5)
    letter = _letter(text)
    chunks = [c for c in segment_letter(letter) if c.metadata.chunk_tier == 1]
    assert [c.metadata.section_title for c in chunks] == [
        "First Half Performance",
        "Investment Companies",
    ]
    assert all(c.metadata.section_hierarchy[0] == "Letter Body" for c in chunks)  # no sign-off
    assert "William Scott" in chunks[0].content  # never a word dropped


@pytest.mark.parametrize(
    "top",
    [
        "BERKSHIRE HATHAWAY INC.\n\nTo the Shareholders of Berkshire Hathaway Inc.:\n\n",
        "Berkshire's Performance vs. the S&P 500\n\n",
        "                                 The Year in Review\n\n",  # one centred title
    ],
)
def test_text_without_a_letterhead_has_no_opening(top):
    assert not any(k == "letterhead" for k, _ in kinds(clean_text(top + _body())))


# ------------------------------------------------------------------------ closings


@pytest.mark.parametrize(
    "closing",
    [
        "Warren E. Buffett 1-30-61",
        "Cordially,\n\nWarren Buffett",
        "Cordially,\n\nWarren E. Buffett\n\nWEBeh",
        "Sincerely,\nJohn Smith\nWEB:eh",
    ],
)
def test_a_signature_is_no_section_title(closing):
    text = clean_text("Sanborn Map\n\n" + _body() + "\n" + closing + "\n")
    found = kinds(text)
    assert found[-1][0] == "signature"
    assert [k for k, _ in found].count("signature") == 1
    assert _titles(text) == ["Sanborn Map"]


# ------------------------------------------------------------------------ around tables

TABLE = (
    "On a compounded basis, the results have been:\n"
    "\n"
    "Year                 Dow                Partnership         Limited Partners\n"
    "1957              -8.4%                  10.4%                  9.3%\n"
    "1957 – 58         26.9%                  55.6%                 44.5%\n"
    "1957 – 59         52.3%                  95.9%                 74.7%\n"
    "Annual             9.3%                  26.3%                 21.4%\n"
    "{wrap}\n"
    "\n"
)


@pytest.mark.parametrize("wrap", ["Compounded Rate", "Compounded\n   Rate", "       Rate"])
def test_a_row_label_wrapped_under_a_table_stays_in_the_table(wrap):
    text = clean_text(
        "Investment Companies\n\n" + _body(2) + "\n" + TABLE.format(wrap=wrap) + _body(2, 7)
    )
    tables = [b for b in detect_blocks(text) if b.kind == "table"]
    assert len(tables) == 1 and text[tables[0].start : tables[0].end].endswith("Rate")
    assert _titles(text) == ["Investment Companies"]


def test_footnotes_under_a_wrapped_label_join_the_table():
    foot = "Footnotes:\n\n    (1) Computed from changes in asset value plus distributions.\n\n"
    text = clean_text(
        "Investment Companies\n\n"
        + _body(2)
        + "\n"
        + TABLE.format(wrap="Compounded Rate")
        + foot
        + _body(2, 7)
    )
    table = next(b for b in detect_blocks(text) if b.kind == "table")
    assert text[table.start : table.end].endswith("distributions.")
    assert "Footnotes" not in _titles(text)


def test_the_subject_of_an_enumeration_is_no_header():
    items = "    (1) took the inventory from over $4 million to under $1 million;\n\n"
    items += "    (2) freed up capital for marketable security purchases.\n\n"
    text = clean_text("Dempster\n\n" + _body(2) + "\nHarry:\n\n" + items + _body(2, 4))
    assert ("header", "Harry:") not in kinds(text)
    assert _titles(text) == ["Dempster"]
