"""Compilations: one file holding many letters (text/compilation.py), segmented, validated and
run against the scripted fake server."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, response_schema
from letterchunk.cli import main
from letterchunk.contract.validate import validate_path
from letterchunk.llm.judge import is_question
from letterchunk.report.analyze import analyze_dir
from letterchunk.report.html import collect
from letterchunk.runner.batch import plan_requests
from letterchunk.runner.pipeline import RunOptions, run_paths
from letterchunk.text.compilation import load_document, segment_letters
from letterchunk.text.segment import UNTITLED, section_titles
from test_pipeline import client_for, grounded_answer

ROOT = Path(__file__).resolve().parents[1]
# CI keeps the shared data beside the clone (../shared); LC_SHARED_DIR points elsewhere
SHARED = Path(os.environ.get("LC_SHARED_DIR", ROOT.parent / "shared"))
PARTNERSHIP = SHARED / "partnership" / "partnership_1960-1968.txt"
needs_shared = pytest.mark.skipif(
    not PARTNERSHIP.is_file(), reason=f"{PARTNERSHIP} absent (the shared data sits at ../shared)"
)

# (stem, letter_date) of every letter of the shared compilation, in reading order
PARTNERSHIP_LETTERS = [
    ("1960-L1", "1961-01-30"),  # dated only by its signature "1-30-61"
    ("1961-L1", "1961-07-22"),  # date line "July, 1961"; the day from its signature
    ("1961-L2", "1962-01-24"),
    ("1962-L1", "1962-07-06"),
    ("1962-L2", "1962-11-01"),
    ("1962-L3", "1963-01-18"),
    ("1963-L1", "1963-07-10"),
    ("1963-L2", "1963-11-06"),
    ("1963-L3", "1964-01-18"),
    ("1964-L1", "1964-07-08"),
    ("1964-L2", "1965-01-18"),
    ("1965-L1", "1965-07-09"),
    ("1965-L2", "1965-11-01"),
    ("1965-L3", "1966-01-20"),
    ("1966-L1", "1966-07-12"),
    ("1966-L2", "1967-01-25"),
    ("1967-L1", "1967-07-12"),
    ("1967-L2", "1967-10-09"),
    ("1967-L3", "1968-01-24"),
    ("1968-L1", "1968-07-11"),  # "July 11th, 1968"
]

HEADER = "                         Collected Letters to the Partners"
FOOTER = "example.org/letters                      reading copy                        Page {n}"
PARAGRAPH = (
    "Our results for the period compare favourably with the general market, and the partners "
    "should judge them over several years rather than over one. We hold a mixture of undervalued "
    "securities and workouts whose outcome depends on corporate events, not on the market. "
    "Nothing here promises that the record of the past will be repeated in the years ahead."
)


def _letter(date_line: str | None, title: str, signature: str = "Warren E. Buffett") -> list[str]:
    head = [
        "",
        "                              SMITH PARTNERS, LTD.",
        "",
        "    " * 8 + "12 MAIN ST.",
    ]
    if date_line is not None:
        head += ["", " " * 60 + date_line]
    body = ["", "To the Partners:", "", title, ""]
    for _ in range(6):
        body += [PARAGRAPH, ""]
    return head + body + ["Cordially,", "", signature]


def _paged(letters: list[list[str]], page: int = 30) -> str:
    """The letters one after the other, each on a new page, with a running header and footer."""
    out: list[str] = [HEADER]
    n = 1
    for lines in letters:
        for i in range(0, len(lines), page):
            out += lines[i : i + page]
            out += ["", FOOTER.format(n=n), HEADER]
            n += 1
    return "\n".join(out) + "\n"


def _write(tmp_path: Path, text: str, name: str = "collected.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------ the shared file


@needs_shared
def test_partnership_letters_and_dates_are_pinned():
    letters = load_document(PARTNERSHIP)
    assert [(x.stem, x.date) for x in letters] == PARTNERSHIP_LETTERS
    assert [x.year for x in letters] == [int(s[:4]) for s, _ in PARTNERSHIP_LETTERS]
    assert load_document(PARTNERSHIP, "partnership") == letters


@needs_shared
def test_partnership_segments_valid_without_running_lines(tmp_path):
    out = tmp_path / "out"
    assert main(["segment", str(PARTNERSHIP), "--out", str(out), "--quiet"]) == 0
    names = sorted(p.name for p in out.glob("*.jsonl"))
    assert names == sorted(f"{s}.jsonl" for s, _ in PARTNERSHIP_LETTERS)
    errors = [v for v in validate_path(out, stage="segmented") if v.severity == "error"]
    assert errors == []
    ids: list[str] = []
    for path in out.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            chunk = json.loads(line)
            ids.append(chunk["chunk_id"])
            assert "csinvesting" not in chunk["content"]
            assert "Buffett Partnership Letters 1957 to 1970" not in chunk["content"]
    assert len(ids) == len(set(ids))  # unique across the folder
    for path in out.glob("*_cleaned.txt"):
        assert "Page " not in path.read_text(encoding="utf-8").split("\n")[0]


# Tier-1 section titles of some letters of the shared file: the letterhead, the
# compilation's label ("1961 Letter"), date lines, salutations, signatures and the wrapped
# row labels of the results tables ("Annual / Compounded / Rate") title nothing; a short
# section between two headers stands alone rather than bury one of them
PARTNERSHIP_TITLES = {
    "1960-L1": [
        "The General Stock Market in 1960",
        "Results in 1960",
        "Multiplicity of Partnerships",
        "Advance Payments",
        "Sanborn Map",
    ],
    "1961-L1": [UNTITLED],  # "TO MY PARTNERS:" and no header
    "1961-L2": [
        "Our Performance in 1961",
        "A Word About Par",
        "Our Method of Operation",
        "Dempster Mill Manufacturing Company",
        "The Question of Conservatism",
        "The Question of Size",
        "And a Prediction",
        "Miscellaneous",
    ],
    "1962-L3": [
        "The Ground Rules",
        "Our Performance in 1962",
        "Investment Companies",
        "The Joys of Compounding",
        "Our Method of Operation",
        "Dempster Mill Manufacturing Company",
        "The Question of Conservatism",
        "The Usual Prediction",
        "Miscellaneous",
    ],
    "1963-L3": [
        "Our Performance in 1963",
        "Investment Companies",
        "The Joys of Compounding",
        "Our Method of Operation",
        "Miscellaneous",
        "TEXAS NATIONAL PETROLEUM",
    ],
    "1965-L1": [
        "First Half Performance",
        "Investment Companies",
        "Advance Payments and Advance Withdrawals",
        "Miscellaneous",
    ],
    "1966-L1": [
        "First Half Performance",
        "Investment Companies",
        "Hochschild, Kohn & Co.",
        "Market Forecasting",
    ],
    "1967-L1": ["First Half Performance", "Investment Companies", "Taxes", "Miscellaneous"],
}


@needs_shared
def test_partnership_section_titles_are_pinned():
    letters = load_document(PARTNERSHIP)
    titles = {
        x.stem: section_titles(chunks)
        for x, chunks in zip(letters, segment_letters(letters), strict=True)
    }
    assert {k: titles[k] for k in PARTNERSHIP_TITLES} == PARTNERSHIP_TITLES
    every = [t for ts in titles.values() for t in ts]
    # no letterhead, label, date line, salutation, signature or table fragment in any title
    bad = re.compile(
        r"KIEWIT|\bLetter\b|Buffett|PARTNERS|(?i:to my partners)|\bRate\b|Footnotes|WEB"
        r"|(?:January|July|October|November),? (?:\d+\w*, )?19\d\d|\d+-\d+-\d+"
    )
    assert [t for t in every if bad.search(t)] == []


@needs_shared
def test_run_on_the_partnership_letters_writes_valid_enriched_files(tmp_path):
    out = tmp_path / "out"
    with FakeOpenAI(default=grounded_answer) as server, client_for(server) as client:
        outcomes = run_paths([PARTNERSHIP], out, client, RunOptions(workers=2))
    assert [o.year for o in outcomes] == [s for s, _ in PARTNERSHIP_LETTERS]
    assert all(not o.pending and not o.failed for o in outcomes)
    errors = [v for v in validate_path(out, stage="enriched") if v.severity == "error"]
    assert errors == []
    chunks = [
        json.loads(line)
        for p in out.glob("*.jsonl")
        if p.name.count(".") == 1
        for line in p.read_text(encoding="utf-8").splitlines()
    ]
    assert len(chunks) == len(server.chat_requests) > 100  # one request per chunk
    assert all(c["metadata"]["contextual_summary"] for c in chunks)


# ------------------------------------------------------------------------ synthetic files


def test_running_lines_go_and_letters_tile_the_file(tmp_path):
    texts = [
        _letter("March 3, 1971", "The Year in Review"),
        _letter("9 August 1971", "First Half Performance"),
        _letter("November 2 1971", "To the Partners for 1972"),
        _letter("4/15/72", "Spring Report"),
    ]
    path = _write(tmp_path, _paged(texts))
    letters = load_document(path)
    assert [(x.stem, x.date) for x in letters] == [
        ("1970-L1", "1971-03-03"),
        ("1971-L1", "1971-08-09"),
        ("1971-L2", "1971-11-02"),
        ("1972-L1", "1972-04-15"),
    ]
    joined = "".join(x.text for x in letters)
    assert "Collected Letters" not in joined and "Page " not in joined
    # every word of every letter is kept, in order
    words = [w for t in texts for ln in t for w in ln.split()]
    assert joined.split() == words


def test_a_letter_without_date_line_is_unknown_with_a_warning(tmp_path, caplog):
    texts = [
        _letter("January 20, 1966", "Our Performance in 1965"),
        _letter(None, "An Undated Note"),
        _letter("July 12, 1966", "First Half Performance"),
    ]
    path = _write(tmp_path, _paged(texts))
    with caplog.at_level(logging.WARNING):
        letters = load_document(path, "partnership")
    assert [(x.stem, x.date) for x in letters] == [
        ("1965-L1", "1966-01-20"),
        ("1965-L2", "0000-00-00"),
        ("1966-L1", "1966-07-12"),
    ]
    assert letters[1].date_note and "no date line" in letters[1].date_note
    assert any("SMITH PARTNERS, LTD." in r.getMessage() for r in caplog.records)


def test_signature_dates_fill_a_month_only_date_line(tmp_path):
    texts = [
        _letter("July, 1961", "A Half Year", signature="Warren E. Buffett 7-22-61"),
        _letter("January 24, 1962", "Our Performance in 1961"),
    ]
    letters = load_document(_write(tmp_path, _paged(texts)))
    assert [(x.stem, x.date) for x in letters] == [
        ("1961-L1", "1961-07-22"),
        ("1961-L2", "1962-01-24"),
    ]


def test_no_boundary_is_one_letter_with_a_warning(tmp_path, caplog):
    path = _write(tmp_path, "\n\n".join([PARAGRAPH] * 5) + "\n\nJuly 4, 1975\n")
    with caplog.at_level(logging.WARNING):
        letters = load_document(path, "partnership")
    assert len(letters) == 1 and letters[0].stem == "1975-L1"
    assert any("no letter boundary" in r.getMessage() for r in caplog.records)
    # auto: not a compilation, read as one letter exactly as before
    [plain] = load_document(path)
    assert plain.stem is None


def test_berkshire_letters_stay_single_letters():
    for path in sorted((ROOT / "corpus" / "letters").glob("*.txt")):
        [letter] = load_document(path)
        assert letter.stem is None, path


def test_run_on_a_compilation_writes_valid_enriched_files(tmp_path):
    texts = [
        _letter("January 18, 1963", "The Ground Rules"),
        _letter("July 10, 1963", "First Half Performance"),
        _letter("November 6, 1963", "To the Partners for 1964"),
    ]
    path = _write(tmp_path, _paged(texts))
    out = tmp_path / "out"
    with FakeOpenAI(default=grounded_answer) as server, client_for(server) as client:
        outcomes = run_paths([path], out, client, RunOptions())
        # the partnership concepts are offered to a compilation's letters
        offered = json.dumps(response_schema(server.chat_requests[0].body)["properties"])
        assert '"workouts"' in offered
    assert [o.year for o in outcomes] == ["1962-L1", "1963-L1", "1963-L2"]
    assert all(not o.pending for o in outcomes)
    errors = [v for v in validate_path(out, stage="enriched") if v.severity == "error"]
    assert errors == []
    ids = [
        json.loads(line)["chunk_id"]
        for p in out.glob("*.jsonl")
        if p.name.count(".") == 1
        for line in p.read_text(encoding="utf-8").splitlines()
    ]
    assert len(ids) == len(set(ids))


def test_a_batch_plans_the_requests_a_live_run_sends_for_a_compilation(tmp_path):
    texts = [
        _letter("January 18, 1963", "The Ground Rules"),
        _letter("July 10, 1963", "First Half Performance"),
    ]
    path = _write(tmp_path, _paged(texts))
    with FakeOpenAI(default=grounded_answer) as server, client_for(server) as client:
        planned = plan_requests([path], client, RunOptions())
        run_paths([path], tmp_path / "out", client, RunOptions())
        # the two letters share sentences: a batch plans a repeated question once (a run
        # without a cache asks it again)
        live = list({json.dumps(r.body): r.body for r in server.all_chat_requests}.values())
    structured = [r for r in planned if not is_question(r.body)]
    # one structured request per chunk of both letters, each followed by its questions
    assert len({r.chunk_id for r in structured}) == len(structured) >= 2
    assert {r.chunk_id for r in planned} == {r.chunk_id for r in structured}
    assert [r.body for r in planned] == live


def test_analyze_and_report_list_the_letters_found(tmp_path):
    texts = [_letter("January 18, 1963", "The Ground Rules"), _letter("July 10, 1963", "Half")]
    out = tmp_path / "out"
    assert main(["segment", str(_write(tmp_path, _paged(texts))), "--out", str(out), "-q"]) == 0
    found = analyze_dir(out)["compilation_letters"]
    assert [(d["letter"], d["date"], d["year"]) for d in found] == [
        ("1962-L1", "1963-01-18", 1962),
        ("1963-L1", "1963-07-10", 1963),
    ]
    assert all(d["lines"] > 10 and d["chunks"] >= 1 for d in found)
    assert collect(out)["compilation_letters"] == found
