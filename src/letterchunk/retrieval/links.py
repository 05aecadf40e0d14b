"""Cross-year links: for each enriched chunk, the chunks of other letters that explain its idea.

Buffett comes back to the same principles across decades.  A link joins a chunk to a chunk of
another letter that shares one of its ideas and ranks high by the index's similarity, so a
reader (or an agent) who found one explanation can follow it to the others.

**Where links live.**  In the index, table ``links`` (index schema 3), never in the chunk files.
The canonical chunk has no key for a target chunk id (spec §0: no new key without a schema
version), and a link depends on which letters were indexed together: it is a fact about the
index, not about the chunk.  The index serves the linked years and chunk ids (:func:`read_links`,
``search --expand-links``); ``link --write DIR`` copies the years alone into the chunk files'
``cross_references.related_years`` (:mod:`letterchunk.retrieval.writeback`), which otherwise
stay what the model wrote.  ``letterchunk index`` drops the links whenever it rewrites the
chunks, so a link never outlives the chunks it joins; ``letterchunk link --db FILE`` computes
them again from the index alone (no folder, no model), which is what makes them reproducible.

**What a chunk shares with another** (its *ideas*): each ``buffett_concepts`` value and each
principle statement, normalised (lower case, every run of non-alphanumerics one space).  Only
chunks with at least one idea get links, and only to chunks of another ``letter_year`` sharing
at least one; a segment-only index (no concepts, no principles) gets none, and
:class:`LinkStats` says so.

**How candidates rank.**  Each candidate is ranked by up to three signals, fused by reciprocal
rank (score = sum of 1 / (60 + rank), the constant the links were measured with):

* ``bm25``: the FTS5 BM25 rank of the candidate for a query made of the source chunk's section
  title, contextual summary and principle statements (its content words, see
  :func:`~letterchunk.retrieval.query.fts_query`); the summary states the chunk's point, its
  content would rank chunks that name the same companies;
* ``dense`` (only when the index holds vectors): the candidate's best unit cosine to the mean of
  the source's unit vectors (the summary and content windows ``index`` embedded; a parent its
  children cover counts their units, as search does);
* ``shared``: how many ideas the two chunks share (candidates sharing as many share a rank).

A candidate must be matched by BM25 or be among the dense pool: sharing a label alone is no
link.  Walking the fused ranking (ties by chunk id), the first candidate of each letter is
taken, up to ``k`` (default :data:`LINKS_K`): the links point to ``k`` different letters, each
through its best chunk.  Everything is read from the index and ordered with explicit ties, so
the same index gives the same links.

**Checks** (:func:`check_links`): every link's chunk and target exist in the index, the target
is of another letter, its year is the target chunk's and in the letter years of
:data:`~letterchunk.contract.rules.RELATED_YEAR_RANGE`, and every idea it names is held by both
chunks.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterchunk.contract.rules import RELATED_YEAR_RANGE
from letterchunk.errors import ConfigError
from letterchunk.retrieval.query import fts_query
from letterchunk.retrieval.store import check_index, connect, index_errors
from letterchunk.retrieval.vectors import UnitVectors

__all__ = [
    "LINKS_K",
    "LINKS_SQL",
    "LinkStats",
    "Link",
    "LinkedChunk",
    "build_links",
    "check_links",
    "has_links",
    "ideas",
    "Linker",
    "Target",
    "linked_chunks",
    "opened",
    "read_links",
    "require_links",
]

LINKS_K = 3  # links per chunk: one to each of this many other letters
RRF_K = 60  # the reciprocal-rank constant the links were measured with (bench/links.py)
POOL = 50  # candidates each similarity signal ranks
MAX_K = 100  # far past the letters one idea recurs in; only a typo meets it
PRINCIPLE = "principle: "  # how a shared principle is named beside the concepts
# the links table; created by `index` (empty) and filled by build_links
LINKS_SQL = """
CREATE TABLE IF NOT EXISTS links (
    chunk_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    target_id TEXT NOT NULL,
    target_year INTEGER NOT NULL,
    score REAL NOT NULL,
    shared TEXT NOT NULL,
    PRIMARY KEY (chunk_id, rank)
);
"""
_NON_WORD = re.compile(r"[^0-9a-z]+")
_LINK_COMMAND = "letterchunk link --db {db}"


@dataclass(frozen=True)
class Link:
    """One link: ``chunk_id`` -> ``target_id`` (of letter ``target_year``), its place among the
    chunk's links (1 = best), fused score and the ideas the two chunks share."""

    chunk_id: str
    rank: int
    target_id: str
    target_year: int
    score: float
    shared: tuple[str, ...]


@dataclass(frozen=True)
class LinkedChunk:
    """A link's target as search returns it: where it is, what it says, why it is linked."""

    chunk_id: str
    letter_year: int
    section_title: str
    score: float
    shared: tuple[str, ...]
    source_file: str
    start_char: int  # source_file[start_char:end_char] == content
    end_char: int
    summary: str
    content: str
    via: str  # the chunk whose link this is: the hit's own, or its section's


@dataclass(frozen=True)
class LinkStats:
    chunks: int  # chunks in the index
    sources: int  # chunks with at least one idea (concept or principle)
    linked: int  # chunks given at least one link
    links: int
    signals: tuple[str, ...]  # the similarity signals used: bm25, and dense with vectors

    @property
    def reason(self) -> str | None:
        """Why no chunk got a link, or None when some did."""
        if self.links:
            return None
        if not self.sources:
            return (
                "no chunk holds a Buffett concept or a principle (a segment-only index): "
                "enrich the letters (`letterchunk enrich DIR`), index again, then link"
            )
        return "no chunk shares a concept or principle with a chunk of another letter"


@dataclass(frozen=True)
class _Chunk:
    rowid: int
    chunk_id: str
    year: int
    ideas: frozenset[str]
    query: str  # what BM25 is asked for this chunk


def normalise(text: str) -> str:
    """Lower case, each run of characters other than letters and digits one space."""
    return _NON_WORD.sub(" ", text.lower()).strip()


def ideas(concepts: Iterable[str], principles: Iterable[dict[str, Any]]) -> frozenset[str]:
    """A chunk's ideas: its normalised concepts and ``"principle: "`` + each normalised
    principle statement."""
    found = {normalise(c) for c in concepts}
    found |= {PRINCIPLE + normalise(str(p.get("statement", ""))) for p in principles}
    return frozenset(i for i in found if i and i != PRINCIPLE.strip())


def _load(conn: Any) -> list[_Chunk]:
    rows = conn.execute(
        "SELECT rowid, chunk_id, letter_year, section_title, summary, concepts, "
        "json_extract(chunk, '$.metadata.principles') FROM chunks ORDER BY chunk_id"
    ).fetchall()
    out = []
    for rowid, chunk_id, year, title, summary, concepts, principles in rows:
        principles = json.loads(principles or "[]")
        statements = " ".join(str(p.get("statement", "")) for p in principles)
        query = " ".join(t for t in (title, summary, statements) if t)
        out.append(_Chunk(rowid, chunk_id, year, ideas(json.loads(concepts), principles), query))
    return out


def _vector_ranking(vectors: UnitVectors, source: int, candidates: Sequence[int]) -> list[int]:
    """Candidate rowids by their best unit's cosine to the source's mean vector."""
    units = vectors.of.get(source)
    if not units:
        return []
    np = vectors.np
    mean = vectors.matrix[units].mean(axis=0)
    best = vectors.best(mean / max(float(np.linalg.norm(mean)), 1e-12))
    found = [rowid for rowid in set(candidates) if rowid in best]
    return sorted(found, key=lambda r: (-best[r], r))[:POOL]


def _bm25(conn: Any, source: _Chunk, candidates: Sequence[int]) -> list[int]:
    match = fts_query(source.query)
    if not match or not candidates:
        return []
    rows = conn.execute(
        "SELECT c.rowid FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
        "WHERE chunks_fts MATCH ? AND c.rowid IN (SELECT value FROM json_each(?)) "
        "ORDER BY bm25(chunks_fts), c.chunk_id LIMIT ?",
        (match, json.dumps(list(candidates)), POOL),
    ).fetchall()
    return [r[0] for r in rows]


def _shared_ranks(shared: dict[int, frozenset[str]]) -> dict[int, int]:
    """Each candidate's rank by how many ideas it shares; equal counts share a rank."""
    return {r: 1 + sum(len(s) > len(shared[r]) for s in shared.values()) for r in shared}


@dataclass(frozen=True)
class Target:
    """A chunk of another letter as a candidate link target, with its fused score."""

    chunk_id: str
    year: int
    score: float
    shared: frozenset[str]


class Linker:
    """The chunks, ideas and vectors of one open index, ranking link targets for any of them."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.chunks = _load(conn)
        self.by_id = {c.chunk_id: c for c in self.chunks}
        has_vectors = conn.execute("SELECT 1 FROM units LIMIT 1").fetchone() is not None
        self.vectors = UnitVectors(conn) if has_vectors else None
        self.signals = ("bm25", "dense") if self.vectors is not None else ("bm25",)

    def targets(
        self, chunk_id: str, *, years: Iterable[int] | None = None, require_shared: bool = True
    ) -> list[Target]:
        """Chunks of other letters by fused score, best first (ties by chunk id).  ``years``
        keeps only those letters; ``require_shared=False`` ranks every chunk of another letter
        by similarity alone (the benchmark's baseline that follows the model's guessed
        years)."""
        source = self.by_id[chunk_id]
        allowed = set(years) if years is not None else None
        pool = {
            c.rowid: c
            for c in self.chunks
            if c.year != source.year and (allowed is None or c.year in allowed)
        }
        shared = {r: c.ideas & source.ideas for r, c in pool.items()}
        if require_shared:
            pool = {r: c for r, c in pool.items() if shared[r]}
        order = sorted(pool)
        similar = [_bm25(self.conn, source, order)]
        if self.vectors is not None:
            similar.append(_vector_ranking(self.vectors, source.rowid, order))
        scores: dict[int, float] = {}
        for ranking in similar:
            for rank, rowid in enumerate(ranking, 1):
                scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (RRF_K + rank)
        for rowid, rank in _shared_ranks({r: shared[r] for r in scores if shared[r]}).items():
            scores[rowid] += 1.0 / (RRF_K + rank)
        ranked = sorted(scores, key=lambda r: (-scores[r], pool[r].chunk_id))
        return [Target(pool[r].chunk_id, pool[r].year, scores[r], shared[r]) for r in ranked]

    def links(self, chunk_id: str, k: int = LINKS_K) -> list[Link]:
        """The chunk's best target in each of up to ``k`` other letters, best first."""
        links: list[Link] = []
        years: set[int] = set()
        for target in self.targets(chunk_id):
            if target.year in years:
                continue
            years.add(target.year)
            links.append(
                Link(
                    chunk_id,
                    len(links) + 1,
                    target.chunk_id,
                    target.year,
                    round(target.score, 6),
                    tuple(sorted(target.shared)),
                )
            )
            if len(links) == k:
                break
        return links


@contextlib.contextmanager
def opened(db: str | Path) -> Iterator[Any]:
    check_index(db, write=False)
    with index_errors(db):
        conn, _ = connect(db, vectors=False)  # dense scores are numpy's (retrieval.vectors)
    try:
        with index_errors(db):
            yield conn
    finally:
        conn.close()


def build_links(db: str | Path, *, k: int = LINKS_K) -> LinkStats:
    """Compute every chunk's links in the index ``db`` and store them (replacing any before).

    Raises :class:`~letterchunk.errors.InputError` for a path that is no usable index and
    :class:`~letterchunk.errors.ConfigError` for an index of another schema version, a bad
    ``k``, or vectors without numpy to read them.
    """
    if not 1 <= k <= MAX_K:
        raise ConfigError(f"links per chunk must be from 1 to {MAX_K}, got {k}")
    with opened(db) as conn:
        linker = Linker(conn)
        sources = [c.chunk_id for c in linker.chunks if c.ideas]
        links = [link for chunk_id in sources for link in linker.links(chunk_id, k)]
        conn.isolation_level = None  # one explicit transaction: all the links or none
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM links")
            conn.executemany(
                "INSERT INTO links VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        link.chunk_id,
                        link.rank,
                        link.target_id,
                        link.target_year,
                        link.score,
                        json.dumps(list(link.shared), ensure_ascii=False),
                    )
                    for link in links
                ],
            )
            conn.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("links_k", str(k)), ("links_signals", "+".join(linker.signals))],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    stats = LinkStats(
        len(linker.chunks),
        len(sources),
        len({link.chunk_id for link in links}),
        len(links),
        linker.signals,
    )
    return stats


def has_links(conn: Any) -> bool:
    """Whether ``letterchunk link`` ran on this index since its chunks were last written."""
    return conn.execute("SELECT 1 FROM meta WHERE key = 'links_k'").fetchone() is not None


def require_links(conn: Any, db: str | Path) -> None:
    """A :class:`ConfigError` naming the command to run when the index has no links yet."""
    if not has_links(conn):
        raise ConfigError(
            f"{db} has no links yet (`letterchunk index` drops them when it writes the "
            f"chunks); compute them: `{_LINK_COMMAND.format(db=db)}`"
        )


def _link(row: Sequence[Any]) -> Link:
    chunk_id, rank, target_id, year, score, shared = row
    return Link(chunk_id, rank, target_id, year, score, tuple(json.loads(shared)))


def read_links(db: str | Path, chunk_ids: Iterable[str] | None = None) -> dict[str, list[Link]]:
    """The stored links of ``chunk_ids`` (every chunk's when None), best first."""
    with opened(db) as conn:
        require_links(conn, db)
        rows = conn.execute(
            "SELECT chunk_id, rank, target_id, target_year, score, shared FROM links "
            "ORDER BY chunk_id, rank"
        ).fetchall()
    wanted = set(chunk_ids) if chunk_ids is not None else None
    out: dict[str, list[Link]] = {}
    for row in rows:
        if wanted is None or row[0] in wanted:
            out.setdefault(row[0], []).append(_link(row))
    return out


def linked_chunks(conn: Any, chunk_id: str) -> list[LinkedChunk]:
    """The targets of ``chunk_id``'s links, best first; a chunk with no ideas of its own (a
    Tier-2 paragraph the segmenter cut) shows its Tier-1 section's links."""
    via = chunk_id
    row = conn.execute(
        "SELECT parent_chunk_id, concepts, json_extract(chunk, '$.metadata.principles') "
        "FROM chunks WHERE chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row and not ideas(json.loads(row[1]), json.loads(row[2] or "[]")) and row[0]:
        via = row[0]
    rows = conn.execute(
        "SELECT c.chunk_id, c.letter_year, c.section_title, l.score, l.shared, c.source_file, "
        "c.start_char, c.end_char, c.summary, c.content FROM links l "
        "JOIN chunks c ON c.chunk_id = l.target_id WHERE l.chunk_id = ? ORDER BY l.rank",
        (via,),
    ).fetchall()
    return [
        LinkedChunk(
            chunk_id=cid,
            letter_year=year,
            section_title=title,
            score=score,
            shared=tuple(json.loads(shared)),
            source_file=source,
            start_char=start,
            end_char=end,
            summary=summary,
            content=content,
            via=via,
        )
        for cid, year, title, score, shared, source, start, end, summary, content in rows
    ]


def check_links(db: str | Path) -> list[str]:
    """Every fault of the stored links, one line each (empty when they all hold)."""
    with opened(db) as conn:
        require_links(conn, db)
        chunks = {c.chunk_id: c for c in _load(conn)}
        rows = conn.execute(
            "SELECT chunk_id, rank, target_id, target_year, score, shared FROM links "
            "ORDER BY chunk_id, rank"
        ).fetchall()
    low, high = RELATED_YEAR_RANGE
    problems = []
    for link in map(_link, rows):
        where = f"link {link.chunk_id} #{link.rank} -> {link.target_id}"
        source, target = chunks.get(link.chunk_id), chunks.get(link.target_id)
        if source is None or target is None:
            missing = link.chunk_id if source is None else link.target_id
            problems.append(f"{where}: chunk {missing} is not in the index")
            continue
        if not low <= link.target_year <= high:
            problems.append(f"{where}: year {link.target_year} is outside {low}-{high}")
        if link.target_year != target.year:
            problems.append(f"{where}: year {link.target_year}, the target is of {target.year}")
        if target.year == source.year:
            problems.append(f"{where}: the target is of the chunk's own letter ({source.year})")
        unheld = [i for i in link.shared if i not in source.ideas or i not in target.ideas]
        if not link.shared or unheld:
            problems.append(f"{where}: shares no idea of both chunks ({', '.join(unheld)})")
    return problems
