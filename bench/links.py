"""Cross-year links (``letterchunk link``) against the model's guessed ``related_years``.

    python bench/links.py               # BM25 and hybrid (MiniLM vectors; links use them too)
    python bench/links.py --no-dense    # BM25 only: no embedding model; links from BM25 alone
    python bench/links.py --show 12     # also print 12 links of each gold letter (hand check)

The chunks are ``ours`` of ``bench/retrieval.py`` (the ten cassette letters segmented with
Tier-2 chunks, their Tier-1 and Tier-3 chunks enriched by replaying the cassettes), indexed
into ``links-ours.sqlite`` in the retrieval bench's cache (its vector cache is shared), then
linked with the library's defaults (3 links per chunk, one per other letter).

The questions (``bench/evolution_questions.jsonl``) ask how a view or a fact changed across
letters; each names two or three verbatim evidence passages, each from its own letter.  They
live beside ``retrieval_questions.jsonl``, not in it: that file's questions have one letter and
one passage each (its test pins the shape), and its figures are the README's.

Each question is searched with k = 5 (``search``'s windows) and scored by **evidence recall**:
the share of its passages that lie (whitespace-normalised) inside the returned text, and
**complete**: the share of questions whose every passage was returned.  Rows:

* ``plain``: the five hits' windows and passages;
* ``+links``: plus each hit's linked chunks (``search(expand_links=True)``: the leaf's links, or
  its section's for a Tier-2 paragraph with no concept of its own);
* ``+model years``: plus, for each year in the hit chunk's model-written
  ``cross_references.related_years`` (its section's for a Tier-2 paragraph; the hit's own year
  and years with no letter in the index left out), the best chunk of that letter by the same
  similarity ranking the links use, without the shared-idea condition (the guessed years have
  no chunk ids, so this is the best the index can do with them);
* ``plain k=10``: ten hits, no links;
* ``plain =ctx``: search alone filling as many context tokens as ``+links`` returned for the
  question (``search(tokens=N)``: bare passages in rank order), the equal-context comparison.

``chunks`` is the mean number of chunks the row added to the five hits; ``ctx tok`` the o200k
tokens of the union of what was returned.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from letterchunk.retrieval.embed import MiniLM  # noqa: E402
from letterchunk.retrieval.index import build_index  # noqa: E402
from letterchunk.retrieval.links import Linker, build_links, opened  # noqa: E402
from letterchunk.retrieval.search import Hit, Mode, search  # noqa: E402
from letterchunk.text.clean import load_letter  # noqa: E402
from retrieval import (  # noqa: E402 - the retrieval bench's chunks, vectors and counting
    ENRICHED,
    LETTERS,
    CachedVectors,
    context_tokens,
    returned,
    squash,
    write_ours,
)

QUESTIONS = Path(__file__).with_name("evolution_questions.jsonl")
GOLD = (1977, 1995, 2016)
K = 5
ROWS = ("plain", "+links", "+model years", "plain k=10", "plain =ctx")


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    evidence: list[dict]


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    return [Question(**json.loads(line)) for line in path.read_text("utf-8").splitlines() if line]


Piece = tuple[str, int, int, str]


def _chunk(conn, chunk_id: str) -> tuple:
    return conn.execute(
        "SELECT chunk_id, letter_year, parent_chunk_id, source_file, start_char, end_char, "
        "content, json_extract(chunk, '$.metadata.cross_references.related_years') "
        "FROM chunks WHERE chunk_id = ?",
        (chunk_id,),
    ).fetchone()


def model_year_pieces(conn, linker: Linker, hit: Hit, years: set[int]) -> list[Piece]:
    """What following the hit chunk's guessed related_years returns (see the docstring)."""
    row = _chunk(conn, hit.chunk_id)
    guessed = json.loads(row[7] or "[]")
    if not guessed and row[2]:  # a Tier-2 paragraph: its section's guess
        row = _chunk(conn, row[2])
        guessed = json.loads(row[7] or "[]")
    pieces = []
    for year in dict.fromkeys(guessed):
        if year == hit.letter_year or year not in years:
            continue
        best = linker.targets(row[0], years=[year], require_shared=False)
        if best:
            target = _chunk(conn, best[0].chunk_id)
            pieces.append((target[3], target[4], target[5], target[6]))
    return pieces


def found(evidence: list[dict], pieces: list[Piece]) -> int:
    texts = [squash(text) for *_, text in pieces]
    return sum(any(squash(e["text"]) in t for t in texts) for e in evidence)


def evaluate(db: Path, modes: list[Mode], model, texts: dict[str, str]) -> dict:
    """(mode, row) -> lists of recall, complete, added chunks and context tokens."""
    questions = load_questions()
    results: dict = {}
    with opened(db) as conn:
        linker = Linker(conn)
        years = {c.year for c in linker.chunks}
        for mode in modes:
            for q in questions:
                ask = dict(mode=mode, embedder=(lambda _n: model) if model else None)
                hits = search(db, q.question, k=K, expand_links=True, **ask)
                wide = search(db, q.question, k=2 * K, **ask)
                base = [p for h in hits for p in returned(h, False)]
                rows = {
                    "plain": (base, 0),
                    "+links": (
                        base
                        + [
                            (x.source_file, x.start_char, x.end_char, x.content)
                            for h in hits
                            for x in h.links
                        ],
                        sum(len(h.links) for h in hits),
                    ),
                    "plain k=10": (
                        [p for h in wide for p in returned(h, False)],
                        max(0, len(wide) - len(hits)),
                    ),
                }
                extra = [p for h in hits for p in model_year_pieces(conn, linker, h, years)]
                rows["+model years"] = (base + extra, len(extra))
                # as many context tokens as +links returned, filled by search alone
                budget = context_tokens(rows["+links"][0], texts)
                fitted = search(db, q.question, k=None, tokens=budget, **ask)
                rows["plain =ctx"] = (
                    [p for h in fitted for p in returned(h, False)],
                    len({h.chunk_id for h in fitted}) - len(hits),
                )
                for name, (pieces, added) in rows.items():
                    n = found(q.evidence, pieces)
                    r = results.setdefault((mode, name), ([], [], [], []))
                    r[0].append(n / len(q.evidence))
                    r[1].append(1.0 if n == len(q.evidence) else 0.0)
                    r[2].append(added)
                    r[3].append(context_tokens(pieces, texts))
    return results


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def report(results: dict, modes: list[Mode], n: int) -> None:
    print(f"\n{n} evolution questions, k={K}")
    print(
        f"{'retriever':<9} {'row':<14} {'recall':>7} {'complete':>9} {'chunks':>7} {'ctx tok':>8}"
    )
    for mode in modes:
        for name in ROWS:
            recall, complete, added, tokens = results[(mode, name)]
            print(
                f"{mode:<9} {name:<14} {mean(recall):>7.3f} {mean(complete):>9.3f} "
                f"{mean(added):>7.1f} {mean(tokens):>8.0f}"
            )
        print()


def _key_sentences(conn, chunk_id: str) -> str:
    title, summary, principles = conn.execute(
        "SELECT section_title, summary, json_extract(chunk, '$.metadata.principles') "
        "FROM chunks WHERE chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    first = [p["statement"] for p in json.loads(principles or "[]")][:1]
    return f"[{title}] {summary} " + (f"PRINCIPLE: {first[0]}" if first else "")


def show(db: Path, per_letter: int) -> None:
    """The rank-1 link of the first ``per_letter`` linked chunks of each gold letter."""
    with opened(db) as conn:
        for year in GOLD:
            rows = conn.execute(
                "SELECT l.chunk_id, l.target_id, l.score, l.shared FROM links l "
                "JOIN chunks c ON c.chunk_id = l.chunk_id "
                "WHERE l.rank = 1 AND c.letter_year = ? ORDER BY l.chunk_id LIMIT ?",
                (year, per_letter),
            ).fetchall()
            for source, target, score, shared in rows:
                print(f"\n{source} -> {target}  score {score:.4f}  shares {json.loads(shared)}")
                for cid in (source, target):
                    text = textwrap.shorten(_key_sentences(conn, cid), 700)
                    print(textwrap.indent(textwrap.fill(text, 100), "    "))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--no-dense", action="store_true", help="BM25 only; loads no embedding model")
    p.add_argument("--show", type=int, metavar="N", help="print N links of each gold letter")
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    p.add_argument("--cache", type=Path, default=default_cache / "letterchunk" / "bench-retrieval")
    args = p.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    model = None if args.no_dense else CachedVectors(MiniLM(), args.cache)
    letters = [load_letter(LETTERS / f"{y}.txt") for y in ENRICHED]
    db = args.cache / ("links-ours-bm25.sqlite" if args.no_dense else "links-ours.sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        write_ours(letters, Path(tmp))
        build_index(tmp, db, model)
    stats = build_links(db)
    print(
        f"{stats.links} links for {stats.linked} of {stats.sources} chunks with ideas "
        f"({stats.chunks} chunks, letters {', '.join(map(str, ENRICHED))}); signals "
        f"{' + '.join(stats.signals)}; index {db}"
    )
    texts = {f"{ltr.year}_cleaned.txt": ltr.text for ltr in letters}
    modes: list[Mode] = ["bm25"] if args.no_dense else ["bm25", "hybrid"]
    report(evaluate(db, modes, model, texts), modes, len(load_questions()))
    if args.show:
        show(db, args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
