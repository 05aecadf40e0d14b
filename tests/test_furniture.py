"""Page furniture (running headers and footers) removed by the cleaner from any document: a
line that recurs, its numbers aside, on three or more pages, each time at a page edge; never a
line of the letter's own that happens to recur (a table caption, a heading used twice)."""

from __future__ import annotations

import pytest

import compilations as gen
from letterchunk.text.clean import clean_counted, clean_text, load_letter

PARAGRAPH = (
    "Our results this year were satisfactory, and the reasons are set out below in some\n"
    "detail, as they have been in earlier letters to the partners of this firm.\n"
)


def _pages(n: int, header: str | None, footer: str | None, *, feeds: bool = False) -> str:
    """``n`` pages of prose, each with ``header``/``footer`` ({n}: the page number)."""
    out = []
    for k in range(1, n + 1):
        page = [header.format(n=k), ""] if header else []
        page += [PARAGRAPH * 4, f"Section {k} runs on.\n", PARAGRAPH * 3]
        page += ["", footer.format(n=k)] if footer else []
        out.append("\n".join(page))
    return ("\n\f\n" if feeds else "\n").join(out) + "\n"


# (header, footer, form feeds): the furniture forms a compilation or a scan carries
FORMS = [
    ("Letters to the Partners", "www.example.org   studying/investing   Page {n}", False),
    ("THE EARLY LETTERS", "- {n} -", False),
    (None, "Collected letters          Page {n} of 9", False),
    ("Partnership Letters, printed 3/{n}/1961", "          {n}", False),
    ("Letters to the Partners", None, True),
    (None, "Omaha Letters Series    p. {n}", True),
]


@pytest.mark.parametrize(("header", "footer", "feeds"), FORMS)
def test_furniture_goes_and_is_counted(header, footer, feeds):
    raw = _pages(6, header, footer, feeds=feeds)
    text, removed = clean_counted(raw)
    # counted: the lines with words (a bare page number "- 3 -" goes but is not counted)
    worded = [x for x in (header, footer) if x and any(c.isalpha() for c in x.format(n=1))]
    for line in worded:
        assert line.split("{")[0].strip()[:12] not in text, line
    assert removed == 6 * len(worded)
    assert text.split() == _pages(6, None, None).split()


def test_a_table_caption_repeated_on_some_pages_stays():
    """A caption on three of ten numbered pages is content, not furniture (furniture is on
    every page)."""
    pages = []
    for k in range(1, 11):
        body = ["(in millions)", "Cost      Market", "12        14", ""] if k % 3 == 0 else []
        pages.append("\n".join([*body, PARAGRAPH * 5, "", f"          {k}"]))
    text, removed = clean_counted("\n".join(pages))
    assert text.count("(in millions)") == 3 and removed == 0


def test_a_heading_used_on_each_page_but_not_at_its_edge_stays():
    pages = [
        "\n".join([PARAGRAPH * 2, "", "Insurance Operations", "", PARAGRAPH * 3, "", f"- {k} -"])
        for k in range(1, 6)
    ]
    text, removed = clean_counted("\n".join(pages))
    assert text.count("Insurance Operations") == 5 and removed == 0


def test_a_numbered_list_is_not_page_numbers():
    raw = PARAGRAPH + "".join(f"Step {k}\n" for k in range(1, 6)) + PARAGRAPH
    assert clean_text(raw) == raw


def test_the_shared_compilation_read_as_one_file_loses_every_running_line():
    if not gen.PARTNERSHIP.is_file():
        pytest.skip("shared data absent")
    raw = gen.PARTNERSHIP.read_text(encoding="utf-8")
    text, removed = clean_counted(raw)
    running = [ln for ln in raw.split("\n") if gen._SOURCE_RUNNING.search(ln)]
    assert removed == len(running) > 100
    assert not gen._SOURCE_RUNNING.search(text)


def test_a_letter_with_furniture_says_so_in_its_note(tmp_path):
    path = tmp_path / "1971.txt"
    path.write_text(
        _pages(5, "Letters to the Partners", "Page {n}") + "Warren E. Buffett\nMarch 1, 1972\n",
        encoding="utf-8",
    )
    letter = load_letter(path)
    assert letter.clean_note == (
        "10 page furniture lines (running headers/footers) removed by the cleaner."
    )
