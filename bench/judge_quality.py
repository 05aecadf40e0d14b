"""Are the judged concepts and principles right?  Replayed from the cassettes, dev and test apart.

    python bench/judge_quality.py [--json]

The structured answer chooses a chunk's concepts among the candidates that
``enrich.concept_candidates`` ranks; the follow-up questions of ``enrich.judges`` give a
yes-probability to each candidate rule sentence of a chunk, and code then decides
(``PRINCIPLE_THRESHOLD``).  This bench replays every letter that has both a recording and
hand-made gold and prints, per split:

* **dev** letters (1978 1982 1987 1991 1996 2009 2019): the concept labels of
  ``bench/gold/concepts.json`` marked ``dev``, the principles of
  ``bench/gold/principles_dev.json`` and the confession candidates of
  ``bench/gold/confessions_dev.json`` (each where the letter has them); thresholds are chosen
  here, and the sweeps over them are printed (what each threshold would give, from the
  recorded probabilities: the requests do not depend on a threshold);
* **test** letters (1977 1995 2016): the concept labels marked ``test`` and the principles of
  ``../shared/gold/YYYY.json``; reported, never tuned on.

Figures:

* concepts, over (chunk, concept) pairs of the labelled chunks whose text is unchanged:
  precision, recall, F1 of the written ``buffett_concepts``; beside them the keyword rule (every
  concept a cue of ``schemas/buffett_concepts.json`` matches) and the candidate ranker alone
  (its best j concepts, ``enrich.concept_candidates``), on the same chunks;
* principles, per letter: extracted principles, P@12 (of the letter's 12 principles with the
  highest rule probability, those whose evidence sentence overlaps a gold principle quote, one
  holding the other, whitespace-normalised), and cited recall (gold principles whose quote some
  extracted principle's evidence overlaps);
* confessions (dev only): chunk-level precision, recall, F1 of the written tag on the dev chunks
  whose candidate paragraphs are hand-labelled (``bench/gold/confessions_dev.json``), and the
  sweep of the paragraph threshold from the recorded probabilities;
* the question calls per chunk.

Needs ``../shared`` beside the checkout for the test principles.  Exit 1 when a replay leaves
recorded answers unplayed or fails a chunk.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from enrichment_quality import (  # noqa: E402
    CASSETTES,
    Replay,
    load_concept_labels,
    norm,
    replay,
)
from letterchunk.enrich.concept_candidates import concept_candidates  # noqa: E402
from letterchunk.enrich.context import PromptContext  # noqa: E402
from letterchunk.enrich.judges import PARAGRAPH_THRESHOLD, PRINCIPLE_THRESHOLD  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEV, TEST = (1978, 1982, 1987, 1991, 1996, 2009, 2019), (1977, 1995, 2016)
SHARED_GOLD = ROOT.parent / "shared" / "gold"
TOP = 12
GRID = (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
# paragraph thresholds the confession sweep prints
CONFESSION_GRID = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85)


def gold_principles(year: int) -> list[str]:
    """The year's gold principle quotes: dev from bench/gold, test from ../shared/gold."""
    if year in DEV:
        data = json.loads((ROOT / "bench" / "gold" / "principles_dev.json").read_text())
        return [p["quote"] for p in data["letters"].get(str(year), {}).get("principles", [])]
    path = SHARED_GOLD / f"{year}.json"
    if not path.is_file():
        return []
    return [p["quote"] for p in json.loads(path.read_text())["principles"]]


def overlaps(a: str, b: str) -> bool:
    a, b = norm(a), norm(b)
    return bool(a and b) and (a in b or b in a)


@dataclass
class PR:
    tp: int = 0
    predicted: int = 0
    gold: int = 0

    def add(self, got: Iterable[str], want: Iterable[str]) -> None:
        got, want = set(got), set(want)
        self.tp += len(got & want)
        self.predicted += len(got)
        self.gold += len(want)

    def figures(self) -> tuple[float, float, float]:
        p = self.tp / self.predicted if self.predicted else 0.0
        r = self.tp / self.gold if self.gold else 0.0
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _labelled(rep: Replay, labels: dict[str, dict]) -> list[tuple[dict, set[str]]]:
    out = []
    for record in rep.records:
        label = labels.get(record["chunk_id"])
        if label and norm(record["content"]).startswith(norm(label["opening"])):
            out.append((record, set(label["concepts"])))
    return out


def concept_rows(reps: Sequence[Replay], split: str) -> dict[str, object]:
    labels = load_concept_labels(split)
    ours, keyword = PR(), PR()
    ranker = {j: PR() for j in (1, 2, 3)}
    chunks = 0
    from enrichment_quality import keyword_concepts

    ctx = PromptContext.for_letter(0, [])
    for rep in reps:
        for record, want in _labelled(rep, labels):
            chunks += 1
            ours.add(record["metadata"]["buffett_concepts"], want)
            keyword.add(keyword_concepts(record["content"], ctx), want)
            ranked = concept_candidates(record["content"], ctx)
            for j, tally in ranker.items():
                tally.add(ranked[:j], want)
    return {
        "chunks": chunks,
        "ours": ours.figures(),
        "keyword rule": keyword.figures(),
        **{f"ranker top {j}": t.figures() for j, t in ranker.items()},
    }


def _principles(rep: Replay) -> list[tuple[float, str]]:
    """(rule probability, evidence) of every extracted principle of the letter."""
    out = []
    for record in rep.records:
        ev = rep.evidence.get(record["chunk_id"], {})
        quotes = ev.get("principle_evidence", [])
        ps = ev.get("judgements", {}).get("principle_p_yes", [])
        for i, quote in enumerate(quotes):
            p = ps[i] if i < len(ps) and ps[i] is not None else 0.0
            out.append((p, quote))
    return out


def _judged_rules(rep: Replay) -> list[tuple[float, str]]:
    out = []
    for ev in rep.evidence.values():
        for item in ev.get("judgements", {}).get("rule_p_yes", []):
            if item["p_yes"] is not None:
                out.append((item["p_yes"], item["sentence"]))
    return out


def confession_labels() -> dict[str, bool]:
    """chunk id -> whether a hand-labelled candidate paragraph of the chunk is an admission
    (``bench/gold/confessions_dev.json``)."""
    data = json.loads((ROOT / "bench" / "gold" / "confessions_dev.json").read_text())
    chunks: dict[str, bool] = {}
    for item in data["paragraphs"]:
        chunks[item["chunk_id"]] = chunks.get(item["chunk_id"], False) or item["confession"]
    return chunks


def _tagged(judged: dict, paragraph_t: float) -> bool:
    """The confession decision of ``enrich.judges`` from a chunk's recorded judgements."""
    ps = [p["p_yes"] for p in judged.get("confession_paragraphs", []) if p["p_yes"] is not None]
    return bool(ps) and max(ps) >= paragraph_t


def confession_rows(reps: Sequence[Replay]) -> dict[str, object]:
    """Chunk-level precision, recall, F1 of the written tag on the labelled dev chunks, and what
    each paragraph threshold would give from the recorded probabilities."""
    labels = confession_labels()
    written, sweep = PR(), {t: PR() for t in CONFESSION_GRID}
    for rep in reps:
        for record in rep.records:
            cid = record["chunk_id"]
            if cid not in labels:
                continue  # no candidate paragraph: never asked, never a confession
            want = [cid] if labels[cid] else []
            got = record["metadata"]["content_type"] == "mistake_confession"
            written.add([cid] if got else [], want)
            judged = rep.evidence.get(cid, {}).get("judgements", {})
            for threshold, tally in sweep.items():
                tally.add([cid] if _tagged(judged, threshold) else [], want)
    return {
        "written": written.figures(),
        "labelled": sum(1 for c in labels if c[:4] in {str(r.year) for r in reps}),
        "sweep": {str(threshold): t.figures() for threshold, t in sweep.items()},
    }


def principle_row(ranked: list[tuple[float, str]], gold: list[str]) -> dict[str, object]:
    ranked = sorted(ranked, key=lambda x: -x[0])
    top = ranked[:TOP]
    on_gold = sum(any(overlaps(q, g) for g in gold) for _, q in top)
    cited = sum(any(overlaps(q, g) for _, q in ranked) for g in gold)
    return {
        "extracted": len(ranked),
        "p_at_12": round(on_gold / TOP, 3),
        "cited_recall": round(cited / len(gold), 3) if gold else None,
        "gold": len(gold),
    }


def principle_rows(reps: Sequence[Replay]) -> dict[str, object]:
    reps = [r for r in reps if gold_principles(r.year)]  # a letter without principle gold: none
    rows = {rep.year: principle_row(_principles(rep), gold_principles(rep.year)) for rep in reps}
    sweep = {}
    for t in GRID:
        sweep[t] = {
            rep.year: principle_row(
                [(p, s) for p, s in _judged_rules(rep) if p >= t], gold_principles(rep.year)
            )
            for rep in reps
        }
    return {"letters": rows, "sweep": sweep}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, object] = {
        "thresholds": {
            "principle": PRINCIPLE_THRESHOLD,
            "confession paragraph": PARAGRAPH_THRESHOLD,
        }
    }
    bad = False
    for split, years in (("dev", DEV), ("test", TEST)):
        reps = [replay(y) for y in years if (CASSETTES / f"{y}.yaml").is_file()]
        bad |= any(r.unplayed or r.failed for r in reps)
        chunks = sum(len(r.records) for r in reps) or 1
        result[split] = {
            "letters": [r.year for r in reps],
            "concepts": concept_rows(reps, split),
            **({"confessions": confession_rows(reps)} if split == "dev" else {}),
            "principles": principle_rows(reps),
            "questions_per_chunk": round(sum(r.questions for r in reps) / chunks, 2),
        }
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print(render(result))
    return 1 if bad else 0


def _prf(f: object) -> str:
    p, r, f1 = f  # type: ignore[misc]
    return f"P {p:.2f}  R {r:.2f}  F1 {f1:.2f}"


def render(result: dict) -> str:
    lines = [f"thresholds: {result['thresholds']}"]
    for split in ("dev", "test"):
        part = result[split]
        lines.append(f"\n== {split}: letters {part['letters']}")
        c = part["concepts"]
        lines.append(f"concepts ({c['chunks']} labelled chunks)")
        for name in ("ours", "keyword rule", "ranker top 1", "ranker top 2", "ranker top 3"):
            lines.append(f"  {name:<14} {_prf(c[name])}")
        if "confessions" in part:
            cf = part["confessions"]
            lines.append(f"confessions ({cf['labelled']} labelled candidate chunks)")
            lines.append(f"  written        {_prf(cf['written'])}")
            lines.append("  sweep of the paragraph threshold:")
            for threshold, f in cf["sweep"].items():
                lines.append(f"    {threshold:<10} {_prf(f)}")
        pr = part["principles"]
        lines.append("principles per letter: extracted, P@12, cited recall (gold)")
        for year, row in pr["letters"].items():
            lines.append(
                f"  {year}  {row['extracted']:>4}  {row['p_at_12']:.2f}  "
                f"{row['cited_recall']} ({row['gold']})"
            )
        if split == "dev":
            lines.append("  sweep of the rule threshold (every judged rule at or above it):")
            for t, rows in pr["sweep"].items():
                cells = "  ".join(
                    f"{y}:{r['extracted']}/{r['p_at_12']:.2f}/{r['cited_recall']}"
                    for y, r in rows.items()
                )
                recalls = [r["cited_recall"] for r in rows.values()]
                kept = sum(r["extracted"] for r in rows.values())
                mean = f"mean recall {sum(recalls) / len(recalls):.3f} kept {kept}"
                lines.append(f"    {t:<5} {mean}  {cells}")
        lines.append(f"questions per chunk: {part['questions_per_chunk']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
