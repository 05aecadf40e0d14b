"""Table rows whose label holds digit groups, or runs into the row's first figures.

A label cell may hold digit groups of its own (a date "(acquired 7/1/91)", "1-1-90", a year, a
range "1957 – 58", a name "Phillips 66" or "3M", a footnote mark "(4)"), and a figure may be set
one space after the label ("H. H. Brown (acquired 7/1/91) 13,616"), so the two-space split leaves
it in the label.  Property: every row keeps one cell per value column, the label is the label
and the figures are the figures, in their columns.  The tables are generated from real labels
of the letters and random figures, laid out as the letters set them.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.text.tables import parse_table

SETTINGS = settings(
    max_examples=int(os.environ.get("LC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# row labels of the letters (corpus and shared), with dates, years, ranges, footnote marks and
# numbers in names among them
LABELS = [
    "H. H. Brown (acquired 7/1/91)",
    "Scott Fetzer - Diversified Mfg",
    "Scott Fetzer Manufacturing Group",
    "Total Earnings - All Entities",
    "Special Gen. Foods Distribution",
    "Nebraska Furniture Mart(1)",
    "Interest Expense (4)",
    "Interest Expense*",
    "Western utilities (acquired March 21, 2006)",
    "Phillips 66",
    "3M",
    "Class B",
    "Balance 1-1-90",
    "Net worth (acquired 12/31/89)",
    "1989 (Revised)",
    "1st half 1964",
    "1957 – 58",
    "Notes due 1995",
    "Buffalo News",
    "Wesco - other than Insurance",
]
FIGURE = st.one_of(
    st.integers(0, 9_999_999).map(lambda n: f"{n:,}"),
    st.integers(1, 999_999).map(lambda n: f"({n:,})"),
    st.integers(1, 999_999).map(lambda n: f"${n:,}"),
    st.integers(1, 999_999).map(lambda n: f"$ {n:,}"),
    st.integers(0, 9999).map(lambda n: f"{n / 10:.1f}%"),
    st.just("---"),
)


@st.composite
def tables(draw):
    """``(text, expected rows, number of value columns)``.

    Most rows set their label and figures apart (two spaces or more, figures right-aligned in
    their columns); some set their first ``g`` figures one space after the label, the first
    of them ending within two columns of its column's right edge (as "H. H. Brown ... 13,616"
    does; only numbers: a dash so set reads as a hyphen); some leave a column empty after a
    label with digit groups of its own.
    """
    ncols = draw(st.integers(2, 5))
    nrows = draw(st.integers(4, 9))
    width = draw(st.integers(12, 16))  # a value column's width; figures are at most 10 wide
    rows = []
    for _ in range(nrows):
        label = draw(st.sampled_from(LABELS))
        figs = draw(st.lists(FIGURE.filter(lambda f: len(f) <= 10), min_size=ncols, max_size=ncols))
        rows.append((label, figs))
    # at most 2 rows in 5 are set differently, so most rows define the columns
    kinds = draw(
        st.lists(st.sampled_from(["apart", "glued", "blank"]), min_size=nrows, max_size=nrows)
    )
    for k in range(len(kinds)):
        if sum(x != "apart" for x in kinds[: k + 1]) * 5 > nrows * 2:
            kinds[k] = "apart"
    glued = {k: draw(st.integers(1, ncols)) for k, x in enumerate(kinds) if x == "glued"}
    label_w = max(len(label) for label, _ in rows) + 2
    first_edge = max(
        [label_w + width]
        + [len(rows[k][0]) + 1 + len(rows[k][1][0]) + 2 for k in glued]  # room for a shift
    )
    edges = [first_edge + c * width for c in range(ncols)]
    lines, expected = [], []
    for k, (label, figs) in enumerate(rows):
        cells = list(figs)
        if kinds[k] == "blank":
            cells[draw(st.integers(0, ncols - 1))] = ""
        if k in glued:
            g = glued[k]
            # a dash set one space after a label reads as a hyphen of it: only numbers are glued
            cells[:g] = [c if c != "---" else "1,000" for c in cells[:g]]
            shift = draw(st.integers(-2, 2))
            head = " ".join([label, *cells[:g]])
            start = edges[0] + shift - len(label) - 1 - len(cells[0])
            line = " " * start + head
            for c in range(g, ncols):
                line = line + " " * max(2, edges[c] - len(line) - len(cells[c])) + cells[c]
        else:
            indent = draw(st.integers(0, 2))
            line = " " * indent + label
            for c in range(ncols):
                if cells[c]:
                    line = line.ljust(edges[c] - len(cells[c])) + cells[c]
        lines.append(line)
        expected.append([label, *cells])
    return "\n".join(lines), expected, ncols


@SETTINGS
@given(tables())
def test_each_row_keeps_its_label_and_its_figures_in_their_columns(case):
    text, expected, ncols = case
    # every line is a data row, as block detection flags them (which lines are rows is
    # lines.is_table_row's concern, tested on its own)
    columns, rows = parse_table(text, row_flags=[True] * len(expected))
    assert len(columns) == ncols + 1, text
    assert rows == expected, text


# the rows of the letters this rule came from, as they stand (1991: "Sources of Reported
# Earnings"; 1984: a total set with single spaces; partnership 1964: a range and a half year)
LETTER_1991 = """\
                                  1991        1990        1991        1990
                               ---------- ---------- ---------- ----------
    Net Investment Income ...   331,846      327,047      285,173      282,613
  H. H. Brown (acquired 7/1/91) 13,616         ---          8,611        ---
  Buffalo News ..............    37,113       43,954       21,841       25,981
  Fechheimer ................    12,947       12,450        6,843        6,605
                              ----------      ----------   ----------     ----------
Operating Earnings              400,508         482,477      315,753        370,745
Total Earnings - All Entities $ 592,986       $ 516,466    $ 439,908      $ 394,093"""

LETTER_1984 = """\
                                 1984       1983     1984      1983      1984      1983
                               -------- -------- -------- -------- -------- --------
  Buffalo News ..............    27,328     19,352     27,328     16,547    13,317     8,832
  Nebraska Furniture Mart(1)     14,511      3,812     11,609      3,049     5,917     1,521
Operating Earnings ..........   87,739   61,043   82,021   51,410   70,015   48,644
Special Gen. Foods Distribution 8,111      --      7,896     --      7,294     --
                              -------- -------- -------- -------- -------- --------
Total Earnings - all entities $200,549 $147,878 $191,293 $136,074 $148,896 $112,166"""

PARTNERSHIP = """\
Year                 Dow                    Partnership      Limited Partners
1957                        -8.4%               10.4%                 9.3%
1957 – 58                   26.9%               55.6%                44.5%
1957 – 59                   52.3%               95.9%                74.7%
1st half 1964               10.9%               12.0%                10.5%"""


def test_the_letters_rows_with_figures_after_the_label():
    _, rows = parse_table(LETTER_1991)
    assert rows[1] == ["H. H. Brown (acquired 7/1/91)", "13,616", "---", "8,611", "---"]
    assert rows[-1] == ["Total Earnings - All Entities", "$ 592,986", "$ 516,466"] + [
        "$ 439,908",
        "$ 394,093",
    ]
    assert all(len(r) == 5 for r in rows)
    _, rows = parse_table(LETTER_1984)
    assert rows[3] == ["Special Gen. Foods Distribution", "8,111", "--", "7,896", "--"] + [
        "7,294",
        "--",
    ]
    assert rows[-1][0] == "Total Earnings - all entities"
    assert rows[-1][1:] == "$200,549 $147,878 $191,293 $136,074 $148,896 $112,166".split()


def test_a_range_or_a_year_ending_a_label_stays_in_it():
    _, rows = parse_table(PARTNERSHIP)
    labels = [r[0] for r in rows]
    assert "1957 – 58" in labels and "1957 – 59" in labels and "1st half 1964" in labels
    assert all(len(r) == len(rows[0]) for r in rows)
