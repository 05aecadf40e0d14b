"""The whole shipped corpus (every letter, not a sample) through the cleaner and segmenter.

Invariants checked for every chunk of every letter: span/content equality, Tier-1
tiling, Tier-2/3 nesting and two-way links, id format and tier, counts, year/source fields,
schema validity, the anti-orphan gate, headers starting (never ending) chunks, tables whole in
one Tier-3 chunk, and byte-identical output on rerun.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from letterchunk.contract.schema import CHUNK_ID_PATTERN, Chunk, dump_chunk
from letterchunk.text.blocks import detect_blocks
from letterchunk.text.clean import UNKNOWN_DATE, load_letter
from letterchunk.text.segment import T1_MIN, segment_letter
from letterchunk.tokens import count_tokens

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "letters"
LETTERS = sorted(CORPUS.glob("*.txt"))

# Letters whose text holds no full date anywhere (truncated extractions, or "February 2008"
# without a day).  Every other letter must get a real date from its signature block.
UNDATED = {"1975", "1980", "1991", "1996", "1997"}
MONTH_ONLY = {"2007"}  # "February 2008": dated to the month, with a note


def check_invariants(text: str, year: int, chunks: list[Chunk]) -> list[str]:
    """Every broken invariant as a message (empty list when all hold)."""
    bad: list[str] = []
    ids = [c.chunk_id for c in chunks]
    if len(set(ids)) != len(ids):
        bad.append("duplicate chunk ids")
    by_id = {c.chunk_id: c for c in chunks}
    for c in chunks:
        m = c.metadata
        s, e = m.source_span.start_char, m.source_span.end_char_exclusive
        if not re.match(CHUNK_ID_PATTERN, c.chunk_id):
            bad.append(f"{c.chunk_id}: id format")
        if int(c.chunk_id.split("-T")[1][0]) != m.chunk_tier:
            bad.append(f"{c.chunk_id}: tier mismatch")
        if not (0 <= s < e <= len(text)) or text[s:e] != c.content:
            bad.append(f"{c.chunk_id}: content != text[start:end]")
        if m.token_count != count_tokens(c.content) or m.char_count != len(c.content):
            bad.append(f"{c.chunk_id}: counts")
        if m.temporal_references.primary_year != year or m.letter_year != year:
            bad.append(f"{c.chunk_id}: year")
        if m.source_file != f"{year}_cleaned.txt":
            bad.append(f"{c.chunk_id}: source_file")
        if c.content != c.content.strip():
            bad.append(f"{c.chunk_id}: content has outer whitespace")
        if m.chunk_tier in (2, 3):
            parent = by_id.get(m.parent_chunk_id or "")
            if parent is None or c.chunk_id not in parent.metadata.child_chunk_ids:
                bad.append(f"{c.chunk_id}: parent link")
            else:
                ps = parent.metadata.source_span
                if not (ps.start_char <= s and e <= ps.end_char_exclusive):
                    bad.append(f"{c.chunk_id}: outside parent span")
                if c.chunk_id.split("-T")[0] != parent.chunk_id.split("-T")[0]:
                    bad.append(f"{c.chunk_id}: section differs from parent")
        for child in m.child_chunk_ids:
            if child not in by_id or by_id[child].metadata.parent_chunk_id != c.chunk_id:
                bad.append(f"{c.chunk_id}: child link {child}")
        if m.chunk_tier == 3:
            if m.content_type != "financial_table" or not m.has_table or not m.table_data:
                bad.append(f"{c.chunk_id}: tier-3 table fields")
            for td in m.table_data:
                if td.row_count != len(td.rows) or not td.columns:
                    bad.append(f"{c.chunk_id}: table_data shape")
        Chunk.model_validate(c.model_dump())
    t1 = [c for c in chunks if c.metadata.chunk_tier == 1]
    if not t1:
        bad.append("no tier-1 chunk")
        return bad
    pos = 0
    for c in t1:
        s, e = c.metadata.source_span.start_char, c.metadata.source_span.end_char_exclusive
        if s < pos:
            bad.append(f"{c.chunk_id}: overlaps the previous tier-1 chunk")
        elif text[pos:s].strip():
            bad.append(f"{c.chunk_id}: non-whitespace gap before it")
        pos = max(pos, e)
    if text[pos:].strip():
        bad.append("text after the last tier-1 chunk")
    order = [(c.metadata.source_span.start_char, c.metadata.chunk_tier, c.chunk_id) for c in chunks]
    if order != sorted(order):
        bad.append("chunks not in (start, tier, id) order")
    sections = [int(c.chunk_id.split("-S")[1].split("-")[0]) for c in t1]
    if sections != sorted(sections) or sorted(set(sections)) != list(range(1, max(sections) + 1)):
        bad.append("section indices are not 1..n in reading order")
    titles: dict[int, str] = {}
    for c in chunks:
        sec = int(c.chunk_id.split("-S")[1].split("-")[0])
        if titles.setdefault(sec, c.metadata.section_title) != c.metadata.section_title:
            bad.append(f"{c.chunk_id}: section_title differs within section {sec}")
    return bad


@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple]:
    out = {}
    for path in LETTERS:
        letter = load_letter(path)
        out[path.stem] = (letter, segment_letter(letter, tier2=True))
    return out


def test_corpus_is_complete():
    assert len(LETTERS) == 46


@pytest.mark.parametrize("path", LETTERS, ids=lambda p: p.stem)
def test_invariants(corpus, path):
    letter, chunks = corpus[path.stem]
    assert check_invariants(letter.text, letter.year, chunks) == []


@pytest.mark.parametrize("path", LETTERS, ids=lambda p: p.stem)
def test_anti_orphan_gate(corpus, path):
    letter, chunks = corpus[path.stem]
    for c in chunks:
        m = c.metadata
        if m.chunk_tier == 1 and m.token_count < T1_MIN:
            assert m.standalone_exception and m.exception_reason and m.retrieval_priority == "high"
        if m.chunk_tier == 2:
            assert m.token_count >= 120, c.chunk_id


@pytest.mark.parametrize("path", LETTERS, ids=lambda p: p.stem)
def test_headers_start_chunks_and_tables_stay_whole(corpus, path):
    letter, chunks = corpus[path.stem]
    text = letter.text
    t1 = [c for c in chunks if c.metadata.chunk_tier == 1]
    t3 = [c for c in chunks if c.metadata.chunk_tier == 3]
    for b in detect_blocks(text):
        if b.kind == "header":
            # never the last block of a chunk
            assert not any(c.metadata.source_span.end_char_exclusive == b.end for c in t1), text[
                b.start : b.end
            ]
        if b.kind in ("table", "paragraph", "list", "header"):
            inside = [
                c
                for c in t1
                if c.metadata.source_span.start_char <= b.start
                and b.end <= c.metadata.source_span.end_char_exclusive
            ]
            assert len(inside) == 1, (
                f"{b.kind} split across tier-1 chunks: {text[b.start : b.start + 60]!r}"
            )
        if b.kind == "table":
            assert any(
                c.metadata.source_span.start_char <= b.start
                and b.end <= c.metadata.source_span.end_char_exclusive
                for c in t3
            ), "table without a tier-3 chunk"


@pytest.mark.parametrize("path", LETTERS, ids=lambda p: p.stem)
def test_every_dated_letter_gets_its_signature_date(corpus, path):
    letter, chunks = corpus[path.stem]
    if path.stem in UNDATED:
        assert letter.date == UNKNOWN_DATE and letter.date_note
        assert all(letter.date_note in (c.metadata.boundary_note or "") for c in chunks)
    elif path.stem in MONTH_ONLY:
        assert letter.date.endswith("-01") and letter.date_note and "month" in letter.date_note
        assert all(letter.date_note in (c.metadata.boundary_note or "") for c in chunks)
    else:
        assert letter.date != UNKNOWN_DATE and letter.date_note is None
        year = int(letter.date[:4])
        assert year in (letter.year, letter.year + 1)
        assert all(c.metadata.letter_date == letter.date for c in chunks)


def test_output_is_byte_identical_on_rerun(corpus):
    for stem in ("1977", "1995", "2016"):
        letter, chunks = corpus[stem]
        again = segment_letter(load_letter(CORPUS / f"{stem}.txt"), tier2=True)
        assert [dump_chunk(c) for c in again] == [dump_chunk(c) for c in chunks]
