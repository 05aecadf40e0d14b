"""Recall of the concept candidates (``enrich.concept_candidates``) on the hand concept labels.

    python bench/concept_candidates.py          # development labels only
    python bench/concept_candidates.py --test   # also the held-out test labels, once, at the end

The labels are ``bench/gold/concepts.json``: each names a chunk (id and opening words) and the
concepts a reader tagged.  The chunks are the segmenter's (Tier 1-3) of the labelled letters in
``corpus/letters``; a label whose chunk no longer opens with its opening words is counted as
stale and skipped.

Printed, for the ``dev`` labels:

* candidate recall (the share of gold (chunk, concept) pairs among a chunk's candidates) and the
  mean number of candidates per chunk, for k = 3..10, beside the plain cue rule
  (``enrich.candidates.cued_concepts``: every concept whose cue occurs);
* precision, recall and F1 of the top-j candidates taken as the answer (j = 1..4): what the
  ranking alone gives, without a model.

``--test`` prints the same figures for the ``test`` labels, labelled as such: the score and ``k``
are tuned on ``dev`` only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from letterchunk.enrich.candidates import cued_concepts  # noqa: E402
from letterchunk.enrich.concept_candidates import (  # noqa: E402
    MAX_CONCEPT_CANDIDATES,
    concept_candidates,
)
from letterchunk.enrich.context import PromptContext  # noqa: E402
from letterchunk.text.clean import load_letter  # noqa: E402
from letterchunk.text.segment import segment_letter  # noqa: E402

GOLD = ROOT / "bench" / "gold" / "concepts.json"
LETTERS = ROOT / "corpus" / "letters"
KS = range(3, 11)
JS = range(1, 5)


@dataclass(frozen=True)
class Labelled:
    chunk_id: str
    text: str
    concepts: frozenset[str]


def _norm(text: str) -> str:
    return " ".join(text.split())


def labelled_chunks(split: str) -> tuple[list[Labelled], int]:
    """The ``split`` labels with their chunk's text, and the number of stale labels."""
    labels = [x for x in json.loads(GOLD.read_text("utf-8"))["labels"] if x["split"] == split]
    texts: dict[str, str] = {}
    for year in sorted({int(x["chunk_id"][:4]) for x in labels}):
        for chunk in segment_letter(load_letter(LETTERS / f"{year}.txt"), tier2=True):
            texts[chunk.chunk_id] = chunk.content
    found, stale = [], 0
    for label in labels:
        text = texts.get(label["chunk_id"])
        if text is None or not _norm(text).startswith(_norm(label["opening"])):
            stale += 1
            continue
        found.append(Labelled(label["chunk_id"], text, frozenset(label["concepts"])))
    return found, stale


def _tally(chunks: Sequence[Labelled], pick: Callable[[str], list[str]]) -> tuple[int, int, int]:
    """(picks that are gold pairs, picks, gold pairs) over ``chunks``."""
    hit = picked = 0
    for c in chunks:
        got = set(pick(c.text))
        hit += len(got & c.concepts)
        picked += len(got)
    return hit, picked, sum(len(c.concepts) for c in chunks)


def recall(chunks: Sequence[Labelled], pick: Callable[[str], list[str]]) -> tuple[float, float]:
    """(share of gold pairs among the picks, mean picks per chunk)."""
    hit, picked, gold = _tally(chunks, pick)
    return hit / max(1, gold), picked / max(1, len(chunks))


def prf(chunks: Sequence[Labelled], pick: Callable[[str], list[str]]) -> tuple[float, ...]:
    tp, predicted, gold = _tally(chunks, pick)
    p, r = tp / max(1, predicted), tp / max(1, gold)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def report(split: str, ctx: PromptContext) -> None:
    chunks, stale = labelled_chunks(split)
    pairs = sum(len(c.concepts) for c in chunks)
    print(f"== {split}: {len(chunks)} chunks, {pairs} gold pairs, {stale} stale labels")
    cue_r, cue_n = recall(chunks, lambda t: cued_concepts(t, ctx))
    print(f"plain cue rule (cued_concepts): recall {cue_r:.3f}, {cue_n:.2f} candidates/chunk")
    print(" k  recall  cands/chunk" + ("   <- MAX_CONCEPT_CANDIDATES" if split else ""))
    for k in KS:
        r, n = recall(chunks, lambda t, k=k: concept_candidates(t, ctx, k))
        mark = "   <-" if k == MAX_CONCEPT_CANDIDATES else ""
        print(f"{k:2d}  {r:.3f}   {n:5.2f}{mark}")
    print(" j  precision  recall  F1   (top-j candidates as the answer, no model)")
    for j in JS:
        p, r, f = prf(chunks, lambda t, j=j: concept_candidates(t, ctx, j))
        print(f"{j:2d}  {p:.3f}      {r:.3f}   {f:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", action="store_true", help="also the held-out test labels")
    args = parser.parse_args(argv)
    ctx = PromptContext.for_letter(2000, [])
    report("dev", ctx)
    if args.test:
        print()
        print("(held-out: figures only, nothing tuned on them)")
        report("test", ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
