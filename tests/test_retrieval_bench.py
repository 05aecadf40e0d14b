"""The retrieval bench's question set is sound: every evidence passage is really in its letter.

bench/retrieval.py counts a hit as correct when a question's evidence lies inside the returned
text, so an evidence passage that is not in the letter (a typo, a changed quote mark) would make
that question unanswerable for every chunker.  This checks the file only: no model, no index.
The bench's own options are checked too: a model at an embeddings endpoint is measured through
the same cached vectors as a local one.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fake_openai import FakeOpenAI
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


def _bench():
    path = ROOT / "bench" / "retrieval.py"
    spec = importlib.util.spec_from_file_location("retrieval_bench", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_bench_embedding_options_are_index_options(capsys) -> None:
    bench = _bench()
    for argv in (
        ["--embed-url", "http://127.0.0.1:9/v1"],
        ["--embed-url", "http://127.0.0.1:9/v1", "--embed-model", "m", "--no-dense"],
        ["--embedder", "all-MiniLM-L6-v2", "--embed-model", "all-MiniLM-L6-v2"],
        ["--embedder", "all-MiniLM-L6-v2", "--embed-url", "http://127.0.0.1:9/v1"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            bench.parse(argv)
        assert exit_info.value.code == 2
        assert "--embed" in capsys.readouterr().err
    # --embedder (the bench's older option) names a local model as --embed-model does
    assert bench.parse(["--embedder", "all-MiniLM-L6-v2"]).embed_model == "all-MiniLM-L6-v2"
    assert bench.parse([]).embed_model is None  # the default: letterchunk's default model


def test_bench_measures_an_endpoint_model_through_its_vector_cache(tmp_path, monkeypatch) -> None:
    """--embed-url/--embed-model: the indexes are built with that server's vectors, asked once
    per text (the key from LETTERCHUNK_EMBED_API_KEY, as for `letterchunk index`)."""
    bench = _bench()
    assert bench.embedder_for(bench.parse(["--no-dense"])) is None
    monkeypatch.setenv("LETTERCHUNK_EMBED_API_KEY", "sk-bench-key")
    with FakeOpenAI() as server:
        args = bench.parse(
            ["--embed-url", server.base_url, "--embed-model", "fake-embed", "--embed-window", "64"]
        )
        model = bench.CachedVectors(bench.embedder_for(args), tmp_path)
        assert (model.name, model.window) == ("fake-embed@endpoint", 64)
        vectors = model.embed(["float", "book value", "float"])
        asked = [r for r in server.requests if r.path.rstrip("/").endswith("/embeddings")]
        assert len(asked) == 1
        assert asked[0].headers.get("Authorization") == "Bearer sk-bench-key"
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
        assert np.array_equal(vectors[0], vectors[2])
        assert not np.array_equal(vectors[0], vectors[1])
        again = model.embed(["book value", "float"])  # both cached: no request
        assert len([r for r in server.requests if r.path.rstrip("/").endswith("/embeddings")]) == 1
        assert np.array_equal(again, vectors[[1, 0]])
