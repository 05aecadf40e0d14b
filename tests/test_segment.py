"""Block detection, table parsing and the Tier-1/2/3 rules on small hand-built letters."""

from __future__ import annotations

import random

import pytest

from letterchunk.text.blocks import detect_blocks, is_table_row
from letterchunk.text.clean import CleanedLetter, clean_text, load_letter
from letterchunk.text.segment import (
    T1_MAX,
    T1_MIN,
    T2_MIN,
    UNTITLED,
    _SpanCounter,
    section_titles,
    segment_letter,
)
from letterchunk.text.tables import parse_table
from letterchunk.tokens import count_tokens
from test_corpus import check_invariants

WORDS = (
    "insurance float earnings capital managers textile business shareholders value growth "
    "intrinsic market price acquisition operations premium underwriting results reserves"
).split()


def prose(n_sentences: int, seed: int, indent: str = "     ", width: int = 64) -> str:
    """A paragraph of ``n_sentences`` plausible sentences wrapped at ``width``."""
    rnd = random.Random(seed)
    sentences = []
    for _ in range(n_sentences):
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(8, 16))]
        sentences.append(" ".join(words).capitalize() + ".")
    text, line, lines = " ".join(sentences), indent, []
    for w in text.split():
        if len(line) + len(w) + 1 > width:
            lines.append(line.rstrip())
            line = ""
        line += w + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


def letter(body: str, year: int = 1984) -> CleanedLetter:
    return CleanedLetter(
        year=year, date=f"{year + 1}-03-01", date_note=None, source_path="x", text=clean_text(body)
    )


def kinds(text: str) -> list[tuple[str, str]]:
    return [(b.kind, text[b.start : b.end].split("\n")[0].strip()) for b in detect_blocks(text)]


# --------------------------------------------------------------------------------------------
# blocks


def test_header_without_blank_line_and_after_removed_page_number():
    raw = (
        prose(3, 1) + "\n\n                    3\nWhat We Hope to Accomplish\n" + prose(3, 2) + "\n"
    )
    text = clean_text(raw)
    assert ("header", "What We Hope to Accomplish") in kinds(text)


def test_paragraphs_running_into_each_other_split_at_the_indent():
    text = prose(3, 1) + "\n" + prose(3, 2) + "\n"
    assert [k for k, _ in kinds(text)] == ["paragraph", "paragraph"]


@pytest.mark.parametrize(
    "sep", ["* * * * * * * *", "*   *   *", "************", "∗ ∗ ∗", "⁎⁎⁎", "________"]
)
def test_separator_styles_and_text_directly_after(sep):
    text = prose(2, 1) + "\n\n                 " + sep + "\n" + prose(2, 2) + "\n"
    assert [k for k, _ in kinds(text)] == ["paragraph", "separator", "paragraph"]


@pytest.mark.parametrize(
    ("header", "is_header"),
    [
        ("Insurance Operations", True),
        ("INSURANCE OPERATIONS", True),
        ("Acquisition Criteria:", True),
        ("The Economics of Property/Casualty Insurance", True),
        ("In the Business Segment Data on pages 36-38 and in the", False),  # wrapped prose
        ("the textile business again had", False),
        ("Total earnings ........  $ 1,234  $ 2,345", False),
        # a title with a sentence-case subtitle in parentheses
        ("“The Bet” (or how your money finds its way to Wall Street)", True),
        ("Three Very Good Businesses (and a Few Thoughts About Incentive Compensation)", True),
        ("Berkshire’s 50th Anniversary", True),  # "50th" is no lowercase word "th"
        ("Our results (which were poor this year)", False),  # the part before is not a title
    ],
)
def test_header_kinds(header, is_header):
    text = prose(2, 1) + "\n\n" + header + "\n\n" + prose(2, 2) + "\n"
    assert (
        ("header", header.rstrip(":")) in [(k, t.rstrip(":")) for k, t in kinds(text)]
    ) == is_header


def test_units_caption_above_a_table_is_its_caption_not_a_section_title():
    text = (
        prose(2, 1) + "\n\nBalance Sheet 12/31/12 (in millions)\n\n"
        "Assets                                              Liabilities and Equity\n"
        "Cash and equivalents . . . . . .     $ 5,338        Notes payable . . . . . .    $ 1,454\n"
        "Inventory . . . . . . . . . . . .       9,675        "
        "Other liabilities . . . .      8,527\n\n" + prose(2, 2) + "\n"
    )
    blocks = detect_blocks(text)
    assert "header" not in [b.kind for b in blocks]
    (table,) = [b for b in blocks if b.kind == "table"]
    assert table.title == "Balance Sheet 12/31/12 (in millions)"


TABLE_LEADERS = """\
                                                 1977        1976
Capital Cities Communications ..........    $ 10,909    $ 13,228
Government Employees Insurance
   Company Convertible Preferred .......      19,417      33,033
Kaiser Industries, Inc. . . . . . . . . .        778       6,039
                                             --------    --------
Total ..................................    $ 31,104    $ 52,300
"""

TABLE_ALIGNED = """\
              Fund of          Fund of          S&P
 Year         Funds A          Funds B          Index Fund
 2008          -16.5%           -22.3%           -37.0%
 2009           11.3%            14.5%            26.6%
 2010            5.9%             6.8%            15.1%
"""


@pytest.mark.parametrize("table", [TABLE_LEADERS, TABLE_ALIGNED])
def test_table_right_after_prose_with_caption_and_footnote(table):
    text = (
        prose(3, 1)
        + " The record follows:\n"
        + "Results of the Year (in thousands)\n"
        + table
        + "\n* Excludes capital gains.\n\n"
        + prose(3, 2)
        + "\n"
    )
    blocks = detect_blocks(text)
    tables = [b for b in blocks if b.kind == "table"]
    assert len(tables) == 1
    t = tables[0]
    body = text[t.start : t.end]
    assert body.startswith("Results of the Year") and body.endswith("Excludes capital gains.")
    assert t.title == "Results of the Year (in thousands)"
    assert [b.kind for b in blocks] == ["paragraph", "table", "paragraph"]


def test_indented_quoted_prose_is_not_a_table():
    quote = "\n".join("           " + ln.strip() for ln in prose(4, 3).split("\n"))
    text = prose(2, 1) + "\n\n" + quote + "\n\n" + prose(2, 2) + "\n"
    assert "table" not in [k for k, _ in kinds(text)]


@pytest.mark.parametrize("bullet", ["•", "o", "Š", "\uf0b7"])
def test_bullet_lists(bullet):
    items = "\n\n".join(
        f"   {bullet}   " + prose(1, i, indent="").replace("\n", "\n       ") for i in range(3)
    )
    text = prose(2, 1) + " These are:\n\n" + items + "\n\n" + prose(2, 2) + "\n"
    assert [k for k, _ in kinds(text)] == ["paragraph", "list", "paragraph"]


@pytest.mark.parametrize(
    "sign_off",
    [
        "February 25, 2017                    Warren E. Buffett\n"
        "                                     Chairman of the Board\n",
        "Warren E. Buffett\nChairman of the Board\n27 February 2015\n",
        "Warren E. Buffett\nChairman of the Board\nFEBRUARY 27, 2015\n",
    ],
)
def test_signature_block(sign_off):
    text = prose(2, 1) + "\n\n" + sign_off
    assert [k for k, _ in kinds(text)] == ["paragraph", "signature"]


@pytest.mark.parametrize(
    ("line", "row"),
    [
        ("1965 ...........................        23.8        49.5", True),
        ("Revenues . . . . . . . . . . . . .   $61,665 $66,099 $59,100", True),
        (" 2008          -16.5%           -22.3%", True),
        ("Total earnings $ 85,945 $ 68,632 $ 70,146", True),
        ("Revenues\t$ 1,234\t$ 2,345", True),
        ("grubby detail work . . . dealmaking is romantic, sexy. That's", False),
        ("policyholders, agents, employees and owners alike.   We look", False),
        ("In 1977 our operating earnings on beginning equity capital", False),
    ],
)
def test_table_rows(line, row):
    assert is_table_row(line) is row


# --------------------------------------------------------------------------------------------
# table parsing


def test_parse_table_with_leaders_wrapped_rows_and_totals():
    columns, rows = parse_table(TABLE_LEADERS)
    assert columns == ["Item", "1977", "1976"]
    assert rows[0] == ["Capital Cities Communications", "$ 10,909", "$ 13,228"]
    assert rows[1] == [
        "Government Employees Insurance Company Convertible Preferred",
        "19,417",
        "33,033",
    ]
    assert rows[-1] == ["Total", "$ 31,104", "$ 52,300"]
    assert len(rows) == 4


def test_parse_aligned_table_names_columns_from_stacked_headers():
    columns, rows = parse_table(TABLE_ALIGNED)
    assert columns == ["Year", "Fund of Funds A", "Fund of Funds B", "S&P Index Fund"]
    assert rows == [
        ["2008", "-16.5%", "-22.3%", "-37.0%"],
        ["2009", "11.3%", "14.5%", "26.6%"],
        ["2010", "5.9%", "6.8%", "15.1%"],
    ]


BALANCE_SHEET = """\
                         Balance Sheet 12/31/16 (in millions)

Assets                                                    Liabilities and Equity
Cash and equivalents . . . . . . . .     $ 8,073          Notes payable . . . . . . . . .    $ 2,054
Accounts receivable . . . . . . . .       11,183          Other current liabilities . . .     12,464
Inventory . . . . . . . . . . . . .       15,727          Total current liabilities . . .     14,518
Other current assets . . . . . . .         1,039
Total current assets . . . . . . .        36,022
                                                          Deferred taxes . . . . . . . . .    12,044
Fixed assets . . . . . . . . . . . .      18,915          Berkshire equity . . . . . . . .    37,412
                                         $54,937                                             $54,937"""  # noqa: E501 - a real table line


def test_parse_two_tables_side_by_side():
    columns, rows = parse_table(BALANCE_SHEET, "Balance Sheet 12/31/16 (in millions)")
    assert columns == ["Assets", "Column 1", "Liabilities and Equity", "Column 3"]
    assert rows == [
        ["Cash and equivalents", "$ 8,073", "Notes payable", "$ 2,054"],
        ["Accounts receivable", "11,183", "Other current liabilities", "12,464"],
        ["Inventory", "15,727", "Total current liabilities", "14,518"],
        ["Other current assets", "1,039", "", ""],
        ["Total current assets", "36,022", "", ""],
        ["", "", "Deferred taxes", "12,044"],
        ["Fixed assets", "18,915", "Berkshire equity", "37,412"],
        ["", "$54,937", "", "$54,937"],
    ]


def test_a_repeated_phrase_between_values_is_a_column_not_a_second_table():
    text = "\n".join(
        f"{y} ......   profit     {v:>6}     less than zero      {r}%"
        for y, v, r in [
            (1967, "17.3", "5.50"),
            (1968, "19.9", "5.90"),
            (1969, "23.4", "6.79"),
            (1971, "52.5", "5.81"),
        ]
    )
    columns, rows = parse_table(text)
    assert rows[0] == ["1967", "profit", "17.3", "less than zero", "5.50%"]
    assert len(columns) == 5


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        (  # ragged rows, numbers set with single spaces: one value per column, left to right
            "                                                  2009        2008        2007\n"
            "Revenues . . . . . . . . . . . . . . . . . . . $61,665 $66,099 $59,100\n"
            "Operating expenses . . . . . . . . . .   59,509      61,937      55,026\n"
            "Interest expense . . . . . . . . . . . . . . .       98         139         127",
            [
                ["Revenues", "$61,665", "$66,099", "$59,100"],
                ["Operating expenses", "59,509", "61,937", "55,026"],
                ["Interest expense", "98", "139", "127"],
            ],
        ),
        (  # a label with a bare leader takes the values on the next line
            "                                                  2009        2008        2007\n"
            "Revenues . . . . . . . . . . . . . . . . . . . . . . .\n"
            "                                               $66,610     $61,665     $66,099\n"
            "Interest expense . . . . . . . . . . . . .           111          98         139",
            [
                ["Revenues", "$66,610", "$61,665", "$66,099"],
                ["Interest expense", "111", "98", "139"],
            ],
        ),
    ],
)
def test_values_keep_their_columns_however_the_rows_were_set(text, rows):
    assert parse_table(text) == (["Item", "2009", "2008", "2007"], rows)


def test_a_heading_over_several_columns_names_each_of_them():
    text = (
        "                                    Pre-Tax Earnings       Net Earnings\n"
        "                                    ----------------     ----------------\n"
        "                                     1985      1984       1985      1984\n"
        "Insurance underwriting ........   $(44,230) $(48,060)  $(23,569) $(25,955)\n"
        "Net investment income .........     95,217    68,903     79,716    62,059\n"
        "Buffalo News ..................     29,921    27,328     14,580    13,317"
    )
    columns, rows = parse_table(text)
    assert columns == [
        "Item",
        "Pre-Tax Earnings 1985",
        "Pre-Tax Earnings 1984",
        "Net Earnings 1985",
        "Net Earnings 1984",
    ]
    assert rows[1] == ["Net investment income", "95,217", "68,903", "79,716", "62,059"]


def test_footnote_marks_on_values_and_a_labelled_heading_row():
    text = (
        "Investee                            1994         1993          1994      1993\n"
        "The Coca-Cola Company .........      7.8%         7.2%         116(2)      94\n"
        "Federal Home Loan Mortgage Corp.     6.3%(1)      6.8%(1)       47(2)      41(2)\n"
        "Gannett Co., Inc. .............      4.9%         ---            4(2)     ---"
    )
    columns, rows = parse_table(text)
    assert columns == ["Investee", "1994", "1993", "1994", "1993"]
    assert rows[1] == ["Federal Home Loan Mortgage Corp", "6.3%(1)", "6.8%(1)", "47(2)", "41(2)"]
    assert len(rows) == 3


def test_a_table_of_nothing_but_year_headings_keeps_a_row():
    columns, rows = parse_table(
        "              2015         2014        2013\n              2015         2014        2013"
    )
    assert rows and len(columns) == 4


def test_a_detached_heading_stub_that_is_no_caption_gives_no_empty_section_title():
    text = (
        prose(3, 1) + "\n\nNo. of Shares\n\n"
        "or Share Equiv.                                           Cost       Market\n"
        "---------------                                        ---------- ----------\n"
        "     460,650   Affiliated Publications, Inc. ......    $  3,516    $ 16,929\n"
        "     908,800   Crum & Forster .....................      47,144      48,962\n"
        "   2,101,244   General Foods, Inc. ................      66,277      83,680\n\n"
        + prose(3, 2)
        + "\n"
    )
    chunks = segment_letter(letter(text))
    assert all(c.metadata.section_title.strip() for c in chunks)


def test_year_headings_with_a_footnote_mark_start_a_new_table():
    text = (
        prose(2, 1) + "\n\n"
        "Fixed assets . . . . . . . . . . . .      18,915          Equity . . . . .    37,412\n"
        "Other assets . . . . . . . . . . . .       3,183          Other . . . . . .       579\n"
        "                                         $54,937                              $54,937\n\n"
        "Earnings Statement (in millions)\n"
        "                                              2012           2011*           2010\n"
        "Revenues . . . . . . . . . . . . . . . .    $83,255       $72,406         $66,610\n"
        "Net earnings . . . . . . . . . . . . . .    $ 3,699       $ 3,039         $ 2,462\n\n"
        + prose(2, 2)
        + "\n"
    )
    tables = [b for b in detect_blocks(text) if b.kind == "table"]
    assert len(tables) == 2
    assert tables[1].title == "Earnings Statement (in millions)"


# --------------------------------------------------------------------------------------------
# tiers


def build_letter() -> str:
    parts = [
        "BERKSHIRE HATHAWAY INC.\n\nTo the Shareholders of Berkshire Hathaway Inc.:\n",
        prose(30, 1),
        "Textile Operations\n",
        prose(20, 2),
        prose(12, 3),
        "Banking\n",
        prose(3, 4),  # a stub section: merged
        "Insurance Investments\n",
        prose(10, 5) + " The holdings were as follows:",
        "Results of the Year (in thousands)\n" + TABLE_LEADERS.rstrip(),
        prose(5, 6),
        "                     * * * * * * * *\n" + prose(7, 7),  # afterthought (not a bridge)
        "Insurance Underwriting\n",
        "\n\n".join(prose(12, 10 + i) for i in range(14)),  # long: split
        prose(8, 30)
        + "\n\n                        Warren E. Buffett\n"
        + "March 4, 1985          Chairman of the Board",
        "Appendix\n\nAcquisition Criteria\n",
        prose(25, 40),
    ]
    return "\n\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def built():
    let = letter(build_letter())
    return let, segment_letter(let, tier2=True)


def test_built_letter_invariants(built):
    let, chunks = built
    assert check_invariants(let.text, let.year, chunks) == []


def test_tier1_sizes_and_merges(built):
    _, chunks = built
    t1 = [c for c in chunks if c.metadata.chunk_tier == 1]
    assert all(c.metadata.token_count >= T1_MIN for c in t1)
    banking = [c for c in t1 if c.content.startswith("Banking")]
    assert banking and "merged forward" in banking[0].metadata.boundary_note
    assert "section 'Banking'" in banking[0].metadata.merged_from
    assert any("merged backward" in (c.metadata.boundary_note or "") for c in t1), (
        "the short afterthought after the separator merges backward"
    )


def test_long_section_split_at_paragraphs(built):
    let, chunks = built
    parts = [
        c
        for c in chunks
        if c.metadata.chunk_tier == 1 and c.metadata.section_title == "Insurance Underwriting"
    ]
    assert len(parts) >= 2
    assert [c.chunk_id[-3:] for c in parts] == [f"{i:03d}" for i in range(1, len(parts) + 1)]
    assert len({c.chunk_id.split("-T")[0] for c in parts}) == 1
    for c in parts:
        assert T1_MIN <= c.metadata.token_count <= T1_MAX
        assert c.content.rstrip().endswith(".") or c.content.rstrip().endswith("Board")


def test_table_chunk(built):
    let, chunks = built
    (t3,) = [c for c in chunks if c.metadata.chunk_tier == 3]
    m = t3.metadata
    assert m.content_type == "financial_table" and m.has_table and m.retrieval_priority == "high"
    assert t3.content.startswith("Insurance Investments")  # header + lead-in included
    assert t3.content.endswith(prose(5, 6).strip()[-30:])  # interpretation included
    (td,) = m.table_data
    assert td.table_name == "Results of the Year (in thousands)" and td.row_count == 4
    parent = next(c for c in chunks if c.chunk_id == m.parent_chunk_id)
    assert t3.chunk_id in parent.metadata.child_chunk_ids
    assert t3.chunk_id.split("-T")[0] == parent.chunk_id.split("-T")[0]
    assert m.section_hierarchy == ["Tables", m.section_title]


TABLE_ROWS = (
    "\n\n"
    "                                     1996        1995\n"
    "Net earnings ................    $ 1,234     $ 1,000\n"
    "Book value ..................     12,345      10,000\n"
    "Per share ...................     $7,100      $5,800\n\n"
)


@pytest.mark.parametrize(
    ("lead_in", "name"),
    [
        (
            "We show below our 1985 yearend net holdings in marketable equities. All of them are "
            "listed.",
            "Our 1985 yearend net holdings in marketable equities",
        ),
        (
            "The table that follows shows the main sources of Berkshire's reported earnings, as "
            "usual.",
            "The main sources of Berkshire's reported earnings",
        ),
        (
            "The table below shows our cost of float since we entered the business.",
            "Our cost of float",
        ),
        (
            "Below is the tally on our underwriting and float for each major sector of insurance "
            "in the years we have owned these businesses.",
            "The tally on our underwriting and float for each major sector",
        ),
        (
            "Here's a recap of pre-tax underwriting earnings and float by division:",
            "Here's a recap of pre-tax underwriting earnings and float by division",
        ),
        (
            "Here's the record on how earnings of our businesses have grown, again per share.",
            "The record on how earnings of our businesses have grown",
        ),
        # the describing sentence one paragraph up
        (
            "The table that follows shows the main sources of our reported earnings.\n\n     "
            "The total net earnings we show in the table are, of course, after tax.",
            "The main sources of our reported earnings",
        ),
        ("As usual, here are the numbers.", "Results – table 1"),  # one bare noun: no name
        # "we show in the table are" says nothing about the table: the section names it
        (
            "The total net earnings we show in the table are, of course, after tax.",
            "Results – table 1",
        ),
    ],
)
def test_uncaptioned_table_named_from_what_its_lead_in_says_it_shows(lead_in, name):
    body = (
        "Results\n\n"
        + prose(6, 1)
        + "\n\n     "
        + lead_in
        + TABLE_ROWS
        + "     That was a good year for us and we expect more of the same.\n"
    )
    (t3,) = [c for c in segment_letter(letter(body)) if c.metadata.chunk_tier == 3]
    assert [td.table_name for td in t3.metadata.table_data] == [name]


def test_headers_start_chunks_and_hierarchy(built):
    _, chunks = built
    t1 = [c for c in chunks if c.metadata.chunk_tier == 1]
    assert t1[0].metadata.section_title == UNTITLED
    assert any(c.content.startswith("Textile Operations") for c in t1)
    appendix = [c for c in t1 if c.metadata.section_hierarchy[0] == "Appendix"]
    assert appendix and appendix[0].content.startswith("Appendix")
    assert appendix[0].metadata.section_hierarchy == ["Appendix", "Acquisition Criteria"]
    assert section_titles(chunks)[0] == UNTITLED
    assert len(section_titles(chunks)) == len(set(section_titles(chunks)))


def test_tier2_pairing(built):
    _, chunks = built
    t2 = [c for c in chunks if c.metadata.chunk_tier == 2]
    assert t2
    assert all(c.metadata.token_count >= T2_MIN for c in t2)
    assert not any(c.metadata.chunk_tier == 2 for c in segment_letter(letter(build_letter())))


def test_tiny_letter_is_one_chunk_with_a_note():
    chunks = segment_letter(letter("Just a short note.\n"))
    assert (
        len(chunks) == 1 and "shorter than the Tier-1 minimum" in chunks[0].metadata.boundary_note
    )


def test_unknown_date_goes_to_boundary_note():
    let = CleanedLetter(
        1990, "0000-00-00", "Letter date unknown: x.", "x", clean_text(prose(30, 1))
    )
    assert all("Letter date unknown" in c.metadata.boundary_note for c in segment_letter(let))


def test_sign_off_above_the_salutation_opens_no_empty_section():
    text = (
        "February 25, 2017      Warren E. Buffett\n"
        "                                  Chairman of the Board\n"
        "To the Shareholders of Berkshire Hathaway Inc.:\n"
    )
    let = letter(text)
    chunks = segment_letter(let)
    assert chunks and check_invariants(let.text, let.year, chunks) == []


def test_paragraph_does_not_end_on_the_blank_line_before_a_bullet():
    # "We" ends without punctuation and the next text line starts lowercase ("o" bullet):
    # a page-break continuation was tried, then refused; the paragraph must end at "We"
    text = (
        "     The textile business again had a very poor year in 1977. We\n\n"
        "   o   Our preference would be to reach this goal directly.\n"
    )
    blocks = detect_blocks(text)
    assert [b.kind for b in blocks] == ["paragraph", "list"]
    assert text[blocks[0].start : blocks[0].end].endswith("1977. We")


def test_load_letters_reads_one_ahead_and_keeps_order_and_errors(tmp_path):
    from letterchunk.errors import InputError
    from letterchunk.text.segment import load_letters

    (tmp_path / "1984.txt").write_text(build_letter(), encoding="utf-8")
    (tmp_path / "1985.txt").write_bytes(b"")
    # the same letter text, one dated a year later: the text's date gives the year
    later = build_letter().replace("March 4, 1985", "March 3, 1987")
    assert later != build_letter()
    (tmp_path / "1986.txt").write_text(later, encoding="utf-8")
    paths = sorted(tmp_path.iterdir())
    got = list(load_letters(paths))
    assert [p for p, _ in got] == paths
    assert isinstance(got[1][1], InputError) and "1985.txt" in str(got[1][1])
    first, third = got[0][1], got[2][1]
    assert (first.year, third.year) == (1984, 1986)
    # segmenting a letter read ahead gives the chunks of one read on its own
    assert segment_letter(third) == segment_letter(load_letter(paths[2]))


def test_span_counter_is_exact():
    text = build_letter()
    counter = _SpanCounter(text)
    rnd = random.Random(7)
    for _ in range(300):
        a = rnd.randrange(len(text))
        b = rnd.randrange(a, len(text) + 1)
        assert counter.count(a, b) == count_tokens(text[a:b])


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_segment_folder_with_bad_files(tmp_path, capsys):
    from letterchunk.cli import main

    src = tmp_path / "letters"
    src.mkdir()
    (src / "1984.txt").write_text(build_letter(), encoding="utf-8")
    (src / "1985.txt").write_bytes(b"")
    (src / "1986.txt").write_bytes(b"\x00\x01binary")
    (src / "TRAPS.md").write_text("# notes\n")
    out = tmp_path / "out"
    assert main(["segment", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1985.txt" in err and "empty" in err
    assert "1986.txt" in err and "binary" in err
    assert "TRAPS.md" in err and "not a letter" in err
    assert sorted(p.name for p in out.iterdir()) == ["1984.jsonl", "1984_cleaned.txt"]
    first = (out / "1984.jsonl").read_bytes()
    assert main(["segment", str(src / "1984.txt"), "--out", str(out), "--tier2", "-q"]) == 0
    assert main(["segment", str(src / "1984.txt"), "--out", str(out)]) == 0
    assert (out / "1984.jsonl").read_bytes() == first  # byte-identical on rerun


def test_cli_segment_missing_path(tmp_path, capsys):
    from letterchunk.cli import main

    assert main(["segment", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_second_document_after_a_sign_off_is_an_appendix():
    body = "\n\n".join(
        [
            "To the Shareholders of Berkshire Hathaway Inc.:",
            prose(40, 1),
            "February 27, 2015                          Warren E. Buffett\n"
            "                                           Chairman of the Board",
            "Vice Chairman’s Thoughts – Past and Future",
            prose(40, 2),
            prose(30, 3),
            "                                           Charles T. Munger\n"
            "                                           Vice Chairman",
        ]
    )
    let = letter(body + "\n", year=2014)
    chunks = segment_letter(let)
    assert check_invariants(let.text, 2014, chunks) == []
    last = [c for c in chunks if c.metadata.chunk_tier == 1][-1]
    assert last.metadata.section_hierarchy == [
        "Appendix",
        "Vice Chairman’s Thoughts – Past and Future",
    ]
    assert last.content.rstrip().endswith("Vice Chairman")
