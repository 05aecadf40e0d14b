"""Recall of the principle candidates (``enrich.principle_candidates``) on the dev principles.

    python bench/principle_candidates.py          # dev letters (bench/gold/principles_dev.json)
    python bench/principle_candidates.py --test   # also the test gold, once, for the report

Each letter (``corpus/letters/YYYY.txt``) is segmented as ``letterchunk segment`` does with
Tier-2 chunks, and its Tier-1 and Tier-2 chunks (the ones enrichment extracts principles from)
are kept.  A gold sentence is **recalled** when it is among the candidates of a chunk that
holds it (``T1/2``: any Tier-1 or Tier-2 holder; ``T1``: its Tier-1 chunk, ~30 sentences),
whitespace-normalised, the candidate containing the quote or the quote the candidate (so a gold
fragment of a sentence counts).  Rows:

* ``k=2`` .. ``k=8``: ``principle_candidates(text, k)``: recall, and mean candidates per chunk;
* ``first 5``: the first five sentences (text order: what the score adds);
* ``cues``: ``candidates.principle_sentences`` (every sentence holding a principle cue);
* ``all sentences``: every ``sentence_choices`` sentence (the ceiling: a gold sentence under
  five words is no choice at all).

Then, per letter, a ranking without a model: the letter's candidates at the default k
(deduplicated: a Tier-2 sentence is also its Tier-1 chunk's), ordered by ``principle_score``;
the top 12 taken as the letter's principles give **P@12** (share of the 12 that are gold) and
**recall@12** (share of the gold among them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from letterchunk.contract.validate import normalise_ws
from letterchunk.enrich.candidates import principle_sentences, sentence_choices
from letterchunk.enrich.principle_candidates import (
    MAX_PRINCIPLE_CANDIDATES,
    principle_candidates,
    principle_score,
)
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter

ROOT = Path(__file__).resolve().parents[1]
DEV_GOLD = ROOT / "bench" / "gold" / "principles_dev.json"
TEST_GOLD = ROOT.parent / "shared" / "gold"
TEST_YEARS = (1977, 1995, 2016)
KS = range(2, 9)
TOP = 12


def body_texts(year: int) -> list[tuple[int, str]]:
    """(tier, text) of the Tier-1 and Tier-2 chunks of the letter of ``year``."""
    chunks = segment_letter(load_letter(ROOT / "corpus" / "letters" / f"{year}.txt"), tier2=True)
    return [(c.metadata.chunk_tier, c.content) for c in chunks if c.metadata.chunk_tier in (1, 2)]


Letters = dict[int, tuple[list[tuple[int, str]], list[str]]]


def matches(candidate: str, quote: str) -> bool:
    a, b = normalise_ws(candidate), normalise_ws(quote)
    return bool(a and b) and (a in b or b in a)


def recall(letters: Letters, pick: Callable[[str], list[str]]) -> tuple[int, int, int, float]:
    """(gold recalled by any Tier-1/2 holder, by the Tier-1 holder, gold total, candidates per
    chunk) over ``letters`` with ``pick``."""
    hit = hit1 = total = cands = chunks = 0
    for texts, gold in letters.values():
        picked = [pick(t) for _, t in texts]
        cands += sum(len(p) for p in picked)
        chunks += len(texts)
        for quote in gold:
            total += 1
            q = normalise_ws(quote)
            holders = [i for i, (_, t) in enumerate(texts) if q in normalise_ws(t)]
            hit += any(any(matches(c, quote) for c in picked[i]) for i in holders)
            hit1 += any(
                any(matches(c, quote) for c in picked[i]) for i in holders if texts[i][0] == 1
            )
    return hit, hit1, total, cands / max(chunks, 1)


def top_of_letter(texts: Sequence[tuple[int, str]], k: int = MAX_PRINCIPLE_CANDIDATES) -> list[str]:
    """The letter's candidates (deduplicated, text order kept on ties) by score, best first."""
    seen: dict[str, int] = {}
    for _, t in texts:
        for c in principle_candidates(t, k):
            seen.setdefault(normalise_ws(c), len(seen))
    return sorted(seen, key=lambda s: (-principle_score(s), seen[s]))


def report(name: str, letters: Letters) -> list[str]:
    lines = [f"{name}: {len(letters)} letters, {sum(len(g) for _, g in letters.values())} gold"]
    lines.append(f"  {'candidates':<16}{'recall T1/2':>16}{'recall T1':>16}{'per chunk':>11}")
    rows: list[tuple[str, Callable[[str], list[str]]]] = [
        (f"k={k}", lambda t, k=k: principle_candidates(t, k)) for k in KS
    ]
    rows += [
        ("first 5", lambda t: sentence_choices(t)[:5]),
        ("cues", principle_sentences),
        ("all sentences", sentence_choices),
    ]
    for label, pick in rows:
        hit, hit1, total, per_chunk = recall(letters, pick)
        lines.append(
            f"  {label:<16}{hit:>5}/{total:<3} {hit / total:6.1%}"
            f"{hit1:>5}/{total:<3} {hit1 / total:6.1%}{per_chunk:>11.2f}"
        )
    lines.append(f"  no-model ranking, top {TOP} of the letter (k={MAX_PRINCIPLE_CANDIDATES}):")
    hits = golds = 0
    for year, (texts, gold) in letters.items():
        top = top_of_letter(texts)[:TOP]
        good = sum(any(matches(t, g) for g in gold) for t in top)
        found = sum(any(matches(t, g) for t in top) for g in gold)
        hits, golds = hits + found, golds + len(gold)
        lines.append(
            f"    {year}: P@{TOP} {good / max(len(top), 1):5.1%}  "
            f"recall {found}/{len(gold)} {found / max(len(gold), 1):5.1%}"
        )
    lines.append(f"    pooled recall@{TOP}: {hits}/{golds} {hits / max(golds, 1):.1%}")
    return lines


def dev_letters() -> Letters:
    gold = json.loads(DEV_GOLD.read_text(encoding="utf-8"))["letters"]
    return {
        int(y): (body_texts(int(y)), [p["quote"] for p in g["principles"]])
        for y, g in sorted(gold.items())
    }


def test_letters() -> Letters:
    out: Letters = {}
    for year in TEST_YEARS:
        gold = json.loads((TEST_GOLD / f"{year}.json").read_text(encoding="utf-8"))
        out[year] = (body_texts(year), [p["quote"] for p in gold["principles"]])
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--test", action="store_true", help="also the test gold (report only)")
    args = p.parse_args(argv)
    print("\n".join(report("dev", dev_letters())))
    if args.test:
        print("\n".join(report("TEST (held out, not tuned on)", test_letters())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
