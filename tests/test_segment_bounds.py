"""Tier-1 size bounds on long sections built from the shared letters' own paragraphs, and
bridges (a short passage after a separator) that never bury the next section's header.

Generated variants: a run of a letter's paragraphs (3-10k tokens) as one section, with and
without a header; the same run as one paragraph (no blank lines between, so only sentence
boundaries are left).  Every Tier-1 chunk must stay within the bounds, tile the letter, and cut
no paragraph that fits the maximum.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from letterchunk.text.blocks import detect_blocks
from letterchunk.text.clean import CleanedLetter, clean_text, load_letter
from letterchunk.text.segment import T1_MAX, T1_MIN, segment_letter
from letterchunk.tokens import count_tokens
from test_corpus import check_invariants

SHARED = Path(__file__).resolve().parents[2] / "shared" / "letters"
LETTERS = sorted(SHARED.glob("*.txt")) or sorted(
    (Path(__file__).resolve().parents[1] / "corpus" / "letters").glob("*.txt")
)


def _paragraphs(path: Path) -> list[str]:
    text = load_letter(path).text
    return [
        text[b.start : b.end]
        for b in detect_blocks(text)
        if b.kind == "paragraph" and len(text[b.start : b.end]) > 200
    ]


def _letter(body: str) -> CleanedLetter:
    return CleanedLetter(
        year=1999, date="2000-03-01", date_note=None, source_path="x", text=clean_text(body)
    )


def _run(seed: int) -> tuple[list[str], int]:
    rnd = random.Random(seed)
    paras = _paragraphs(rnd.choice(LETTERS))
    target, start = rnd.randint(3000, 10000), rnd.randrange(len(paras))
    run: list[str] = []
    while sum(count_tokens(p) for p in run) < target:
        run.append(paras[(start + len(run)) % len(paras)])
    return run, target


def _t1(let: CleanedLetter):
    chunks = segment_letter(let, tier2=True)
    assert check_invariants(let.text, let.year, chunks) == []  # tiling, offsets, links
    return [c for c in chunks if c.metadata.chunk_tier == 1]


@pytest.mark.parametrize("header", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_a_long_section_of_real_paragraphs_splits_within_the_bounds(seed, header):
    run, _ = _run(seed)
    body = ("Insurance Operations\n\n" if header else "") + "\n\n".join("     " + p for p in run)
    let = _letter(body + "\n")
    t1 = _t1(let)
    assert len(t1) >= 2
    for c in t1:
        assert T1_MIN <= c.metadata.token_count <= T1_MAX, c.chunk_id
        assert c.metadata.section_title == t1[0].metadata.section_title
    assert [c.chunk_id[-3:] for c in t1] == [f"{i:03d}" for i in range(1, len(t1) + 1)]
    spans = [
        (c.metadata.source_span.start_char, c.metadata.source_span.end_char_exclusive) for c in t1
    ]
    for b in detect_blocks(let.text):  # no block that fits the maximum is cut
        if count_tokens(let.text[b.start : b.end]) <= T1_MAX:
            assert any(s <= b.start and b.end <= e for s, e in spans), let.text[
                b.start : b.start + 60
            ]
    if header:
        assert t1[0].content.startswith("Insurance Operations")
        assert t1[0].metadata.section_title == "Insurance Operations"


@pytest.mark.parametrize("seed", range(6))
def test_a_paragraph_over_the_maximum_splits_at_sentence_ends(seed):
    run, _ = _run(100 + seed)
    flat = [" ".join(p.split()) for p in run]
    let = _letter("Insurance Operations\n\n" + " ".join(flat) + "\n")
    t1 = _t1(let)
    assert len(t1) >= 2
    for c in t1:
        assert T1_MIN <= c.metadata.token_count <= T1_MAX, c.chunk_id
        assert c.content.rstrip()[-1] in '.?!”’")', c.content[-60:]
        assert "sentence boundaries" in (c.metadata.boundary_note or "")
    assert t1[0].content.startswith("Insurance Operations")


def test_a_table_over_the_maximum_is_kept_whole_with_a_note():
    rows = "\n".join(
        f"{1965 + i} " + ". " * 40 + f"      {i}.{i % 10}        ({i % 7}.{i})" for i in range(70)
    )
    let = _letter("Performance Record\n\n     Year     Berkshire     S&P\n" + rows + "\n")
    (t1,) = _t1(let)
    assert t1.metadata.token_count > T1_MAX
    assert "a table is never split" in (t1.metadata.boundary_note or "")


def _bridge_letter(seed: int) -> str:
    run, _ = _run(200 + seed)
    half = len(run) // 2 or 1
    first = "\n\n".join("     " + p for p in run[:half])
    second = "\n\n".join("     " + p for p in run[half:])
    bridge = "     Now, let's turn to the operations. We will look first at insurance."
    sep = "                    * * * * * * * * * * * *"
    return f"Introduction\n\n{first}\n\n{sep}\n\n{bridge}\n\nInsurance Operations\n\n{second}\n"


@pytest.mark.parametrize("seed", range(4))
def test_a_bridge_before_a_header_merges_backward_and_the_header_starts_a_chunk(seed):
    let = _letter(_bridge_letter(seed))
    t1 = _t1(let)
    header_at = let.text.index("Insurance Operations\n")
    assert any(c.metadata.source_span.start_char == header_at for c in t1)
    holder = next(c for c in t1 if "Now, let's turn" in c.content)  # a section of its own
    assert holder.metadata.section_title == "Introduction"
    assert "merged backward" in (holder.metadata.boundary_note or "")
    assert "bury the next header" in (holder.metadata.boundary_note or "")
