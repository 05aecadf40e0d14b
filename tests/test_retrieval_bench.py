"""The retrieval bench's question set is sound: every evidence passage is really in its letter.

bench/retrieval.py counts a hit as correct when a question's evidence lies inside the returned
text, so an evidence passage that is not in the letter (a typo, a changed quote mark) would make
that question unanswerable for every chunker.  This checks the file only: no model, no index.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from letterchunk.text.clean import load_letter

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "bench" / "retrieval_questions.jsonl"
LETTERS = ROOT / "corpus" / "letters"
KINDS = {"fact", "principle", "mistake", "table"}


def squash(text: str) -> str:
    return " ".join(text.split())


def _questions() -> list[dict]:
    return [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines() if line]


QS = _questions()


def test_fields_and_ids() -> None:
    for q in QS:
        assert set(q) == {"id", "year", "kind", "question", "evidence"}, q
        assert q["kind"] in KINDS, q["id"]
        assert q["question"].strip().endswith("?"), q["id"]
    ids = [q["id"] for q in QS]
    assert len(ids) == len(set(ids))


def test_counts_and_spread() -> None:
    kinds = Counter(q["kind"] for q in QS)
    years = {q["year"] for q in QS}
    assert len(QS) >= 60
    assert kinds.keys() == KINDS
    assert kinds["table"] >= 10
    assert len(years) >= 8
    # every letter asked about is enriched from cassettes/ in the bench: ours carries summaries
    recorded = {int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml") if p.stem.isdigit()}
    assert years <= recorded, f"no cassette for {sorted(years - recorded)}"


@pytest.mark.parametrize("q", QS, ids=[q["id"] for q in QS])
def test_evidence_is_verbatim_in_its_letter(q: dict) -> None:
    evidence = squash(q["evidence"])
    assert len(evidence.split()) >= 8, "evidence of at least 8 words"
    path = LETTERS / f"{q['year']}.txt"
    assert evidence in squash(path.read_text("utf-8")), "not in the letter file"
    # the chunkers see the cleaned text: the evidence must survive cleaning to be retrievable
    assert evidence in squash(load_letter(path).text), "lost by cleaning"


def test_questions_do_not_copy_their_evidence() -> None:
    """A question that repeats its evidence word for word measures only BM25 overlap."""
    for q in QS:
        words = squash(q["evidence"]).lower().split()
        question = squash(q["question"]).lower()
        copied = [
            " ".join(words[i : i + 6])
            for i in range(len(words) - 5)
            if " ".join(words[i : i + 6]) in question
        ]
        assert not copied, (q["id"], copied)
