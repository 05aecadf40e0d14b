"""A BM25 search starts fast and answers as before: the token counts a hit's window needs come
from the index (retrieval.marks), exactly the tokenizer's; the parser built for one command is
the full parser's; the search path loads no tokenizer, numpy or pydantic."""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from letterchunk.cli import COMMANDS, build_parser
from letterchunk.retrieval.index import build_index
from letterchunk.retrieval.marks import MarkedCounter, marks_of, text_key
from letterchunk.retrieval.search import search
from letterchunk.tokens import count_tokens
from test_index_search import index_letters

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "letters"
QUESTIONS = [
    json.loads(line)["question"]
    for line in (ROOT / "bench" / "retrieval_questions.jsonl").read_text("utf-8").splitlines()
]
LETTER = (CORPUS / "1987.txt").read_text("utf-8")


@pytest.fixture(scope="module")
def letters_db(tmp_path_factory):
    """1977 and 1985 segmented with Tier-2 chunks, indexed for BM25."""
    folder = tmp_path_factory.mktemp("letters")
    return folder, index_letters(folder, (1977, 1985), folder / "letters.sqlite")


# texts with the characters that decide where o200k's pieces end: spaces after words, runs
# of blanks and line breaks, digits, punctuation, letters outside ASCII
_PIECES = st.sampled_from(
    ["the", " float", "  ", "\n", "\n\n", " $1,234", "Berkshire's", " —", "é", "12.5%", ".", " "]
)


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(_PIECES, min_size=1, max_size=120).map("".join),
    ends=st.lists(st.floats(0, 1), min_size=2, max_size=2),
)
def test_kept_counts_are_the_tokenizers_for_any_span(text, ends):
    a, b = sorted(round(e * len(text)) for e in ends)
    kept = MarkedCounter(text, marks_of(text, {a, b}))
    assert kept.count(a, b) == count_tokens(text[a:b])
    # points not kept: counted by the tokenizer, the same count
    assert MarkedCounter(text, None).count(a, b) == count_tokens(text[a:b])


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(LETTER)), st.integers(0, 3000))
def test_kept_counts_of_a_real_letter_are_exact(a, length):
    b = min(len(LETTER), a + length)
    kept = MarkedCounter(LETTER, marks_of(LETTER, {a, b}))
    assert kept.count(a, b) == count_tokens(LETTER[a:b])


def test_the_index_keeps_marks_for_every_chunk_text_and_no_other(letters_db, tmp_path):
    from letterchunk.retrieval.chunks import read_records

    folder, db = letters_db
    with sqlite3.connect(db) as conn:
        keys = {row[0] for row in conn.execute("SELECT text_sha FROM token_marks")}
    assert keys == {text_key(r.content) for r in read_records(folder)}
    # an index of one letter fewer drops the other letter's marks
    copy = tmp_path / "one.sqlite"
    copy.write_bytes(db.read_bytes())
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "1977.jsonl").write_bytes((folder / "1977.jsonl").read_bytes())
    build_index(tmp_path / "one", copy)
    with sqlite3.connect(copy) as conn:
        left = {row[0] for row in conn.execute("SELECT text_sha FROM token_marks")}
    assert left == {text_key(r.content) for r in read_records(tmp_path / "one")} < keys


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"window": 300},
        {"window": 60, "expand": True},
        {"tokens": 900},
        {"filters": None, "k": 8},
    ],
    ids=["default", "window300", "window60", "budget", "k8"],
)
def test_hits_from_kept_counts_equal_hits_counted_by_the_tokenizer(letters_db, tmp_path, options):
    _, db = letters_db
    bare = tmp_path / "bare.sqlite"
    bare.write_bytes(db.read_bytes())
    with sqlite3.connect(bare) as conn:  # no mark left: every count by the tokenizer
        conn.execute("DELETE FROM token_marks")
    for question in QUESTIONS[::3]:
        kept = search(db, question, mode="bm25", **options)
        counted = search(bare, question, mode="bm25", **options)
        assert kept == counted, question
    assert kept  # the questions are about these letters: some hit


def test_a_bm25_search_loads_no_tokenizer_numpy_or_pydantic(letters_db):
    _, db = letters_db
    code = (
        "import sys\n"
        "from letterchunk.cli import main\n"
        f"for q in {QUESTIONS[:12]!r}:\n"
        f"    main(['search', '--db', {str(db)!r}, '--bm25', '--window', '200', q])\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = {name.split(".")[0] for name in done.stderr.split()}
    assert done.stdout.count("\n1. ") + done.stdout.startswith("1. ") == 12  # each answered
    assert not loaded & {"tiktoken", "numpy", "pydantic", "sqlite_vec"}


def _command_help(parser: argparse.ArgumentParser, command: str) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command].format_help()


@pytest.mark.parametrize("command", COMMANDS)
def test_the_parser_built_for_one_command_helps_as_the_full_one(command):
    full = build_parser()
    assert _command_help(build_parser([command]), command) == _command_help(full, command)
    assert build_parser([command]).format_help() == full.format_help()
