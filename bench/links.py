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
* ``+written years``: plus, for each year ``link --write`` wrote into the hit chunk's
  ``related_years`` (its section's for a Tier-2 paragraph with no idea of its own, as
  ``--expand-links`` does), the first chunk of that letter in the chunk's link ranking (shared
  idea required, every other letter in the pool): by construction the links' targets, so the
  row equals ``+links``, and the run checks that it does, question by question;
* ``+written/sim``: the written years followed like the model's (each letter ranked alone, no
  shared-idea condition): what a reader of the chunk files, who has years but no chunk ids,
  gets from them, beside ``+model years``;
* ``plain k=10``: ten hits, no links;
* ``plain =ctx``: search alone filling as many context tokens as ``+links`` returned for the
  question (``search(tokens=N)``: bare passages in rank order), the equal-context comparison.

``chunks`` is the mean number of chunks the row added to the five hits; ``ctx tok`` the o200k
tokens of the union of what was returned.

Before the questions, the chunk files are written (``write_related_years``, what ``link --db
FILE --write DIR`` does) and the run prints, over the enriched chunks: the share whose
``related_years`` changed, the share of model-guessed years that were the chunk's own year
before and after, and the chunks whose guess was dropped (no link).
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

from letterchunk.retrieval.chunks import read_chunks  # noqa: E402
from letterchunk.retrieval.embed import MiniLM  # noqa: E402
from letterchunk.retrieval.index import build_index  # noqa: E402
from letterchunk.retrieval.links import Linker, build_links, opened  # noqa: E402
from letterchunk.retrieval.search import Hit, Mode, search  # noqa: E402
from letterchunk.retrieval.writeback import is_enriched, write_related_years  # noqa: E402
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
ROWS = (
    "plain",
    "+links",
    "+model years",
    "+written years",
    "+written/sim",
    "plain k=10",
    "plain =ctx",
)
Written = dict[str, list[int]]  # chunk id -> the related_years link --write wrote


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


def written_year_pieces(
    conn, linker: Linker, hit: Hit, written: Written, years: set[int], *, grounded: bool
) -> list[Piece]:
    """What following the hit chunk's written related_years returns: ``grounded``, each year's
    first chunk in the chunk's link ranking (the links' targets); else as for the model's years.
    """
    row = _chunk(conn, hit.chunk_id)
    if not linker.by_id[row[0]].ideas and row[2]:  # as --expand-links: its section's links
        row = _chunk(conn, row[2])
    wanted = [y for y in written.get(row[0], []) if y in years and y != hit.letter_year]
    if grounded:
        firsts: dict[int, str] = {}
        for target in linker.targets(row[0]):
            firsts.setdefault(target.year, target.chunk_id)
        chosen = [firsts[y] for y in wanted if y in firsts]
    else:
        ranked = (linker.targets(row[0], years=[y], require_shared=False) for y in wanted)
        chosen = [best[0].chunk_id for best in ranked if best]
    return [(t[3], t[4], t[5], t[6]) for t in (_chunk(conn, c) for c in chosen)]


def found(evidence: list[dict], pieces: list[Piece]) -> int:
    texts = [squash(text) for *_, text in pieces]
    return sum(any(squash(e["text"]) in t for t in texts) for e in evidence)


# long function: one question's rows, each built where it is scored
def evaluate(
    db: Path, modes: list[Mode], model, texts: dict[str, str], written: Written
) -> tuple[dict, list[str]]:
    """(mode, row) -> lists of recall, complete, added chunks and context tokens; and the
    questions where ``+written years`` returned other text than ``+links``."""
    questions = load_questions()
    results: dict = {}
    unequal: list[str] = []
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
                for name, grounded in (("+written years", True), ("+written/sim", False)):
                    extra = [
                        p
                        for h in hits
                        for p in written_year_pieces(
                            conn, linker, h, written, years, grounded=grounded
                        )
                    ]
                    rows[name] = (base + extra, len(extra))
                if sorted(rows["+written years"][0]) != sorted(rows["+links"][0]):
                    unequal.append(f"{mode} {q.id}")
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
    return results, unequal


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


def print_written(guessed: dict, written: Written, dropped: int) -> None:
    """How link --write changed the enriched chunks' related_years."""
    n = len(guessed)
    changed = sum(
        c.metadata.cross_references.related_years != written[i] for i, c in guessed.items()
    )
    years = [
        (c.metadata.letter_year, y)
        for c in guessed.values()
        for y in c.metadata.cross_references.related_years
    ]
    own = sum(year == y for year, y in years)
    after = [(c.metadata.letter_year, y) for i, c in guessed.items() for y in written[i]]
    own_after = sum(year == y for year, y in after)
    print(
        f"link --write: related_years changed in {changed} of {n} enriched chunks "
        f"({changed / max(n, 1):.1%}); own-year years {own} of {len(years)} guessed "
        f"({own / max(len(years), 1):.1%}) before, {own_after} of {len(after)} written after; "
        f"{dropped} chunks' guess dropped (no link); chunks with years "
        f"{sum(bool(c.metadata.cross_references.related_years) for c in guessed.values())} "
        f"before, {sum(bool(y) for y in written.values())} after"
    )


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
        guessed = {c.chunk_id: c for c in read_chunks(tmp) if is_enriched(c)}
        done = write_related_years(db, tmp)
        written = {
            c.chunk_id: c.metadata.cross_references.related_years
            for c in read_chunks(tmp)
            if c.chunk_id in guessed
        }
    print(
        f"{stats.links} links for {stats.linked} of {stats.sources} chunks with ideas "
        f"({stats.chunks} chunks, letters {', '.join(map(str, ENRICHED))}); signals "
        f"{' + '.join(stats.signals)}; index {db}"
    )
    print_written(guessed, written, done.dropped)
    texts = {f"{ltr.year}_cleaned.txt": ltr.text for ltr in letters}
    modes: list[Mode] = ["bm25"] if args.no_dense else ["bm25", "hybrid"]
    results, unequal = evaluate(db, modes, model, texts, written)
    report(results, modes, len(load_questions()))
    print(
        "+written years returns what +links returns for every question"
        if not unequal
        else f"+written years differs from +links for {len(unequal)}: {', '.join(unequal)}"
    )
    if args.show:
        show(db, args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
