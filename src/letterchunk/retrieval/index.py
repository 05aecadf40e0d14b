"""``letterchunk index``: one SQLite file with the chunks, a BM25 index and dense vectors.

Tables::

    meta(key, value)        schema version, embedder name and dimension ("" when no vectors)
    chunks                  one row per chunk: filter columns, summary, content, flat metadata
                            (JSON), the canonical chunk (JSON), its context header, whether it
                            is a ranked unit (``leaf``), and a checksum of what is embedded
    chunks_fts              FTS5 over context header, summary and content (porter stemming);
                            its rowid is the chunk's rowid; ranked with bm25()
    units                   the embedded pieces of each chunk: its summary and the windows of its
                            content (offsets in that text), keyed by the chunk's checksum, with a
                            float32 vector (the blob format sqlite-vec reads)
    links                   cross-year links between chunks (:mod:`letterchunk.retrieval.links`);
                            emptied whenever the chunks are written, filled by `letterchunk link`

**Ranked units (leaves).**  Search ranks the most specific chunks: Tier-2 and Tier-3 chunks and
every Tier-1 chunk without children.  A Tier-1 chunk with children is ranked too when its
children leave a sentence of it out (its prose around a table, when it was segmented without
``--tier2``; a short bridge between two tables, which the segmenter makes no Tier-2 chunk): every
sentence of a letter is then in some ranked unit.  A left-out header line does not count: the
children's context header carries the section title.

**Contextual retrieval.**  A chunk's text says "we" and "this year"; which letter and which
section it belongs to is in its metadata.  Each chunk gets a context header, ``"<year> letter.
<section title>."`` (plus its tables' names for a table chunk), which is put before every embedded
piece and indexed by BM25 beside the content.  A child without a summary of its own is indexed
by BM25 with its parent's summary.  Units stay exact: their offsets are in the content (or
summary), the header is added only to what the model sees.

**No text embedded twice.**  A parent its children cover (one that is not ranked) embeds its
summary only; search scores its content by its children's vectors (``--tier 1 --dense``).

**Writing safely.**  Index writes only a new file or an index it wrote (it identifies itself:
:mod:`letterchunk.retrieval.store`); anything else at ``--db`` is refused before a byte is
written.  The chunks, their BM25 rows and the meta table are replaced in one transaction, after
the chunk ids are checked to be unique: a failed or interrupted run leaves an existing index as
it was (and removes a file it had just created).  The vectors are then added a batch per
transaction, so an interrupted run keeps what it embedded; search warns about chunks still
without vectors, and indexing again embeds only those.

An index written by another schema version is rebuilt whole (its vectors too).  Re-indexing
rewrites ``chunks`` and ``chunks_fts`` (cheap) and embeds only the chunks whose checksum
(embedder, header, summary, content, covered or not) has no units yet; units nobody references
are deleted.  An unchanged folder therefore costs no embedding work, and an enriched re-run
re-embeds only the chunks whose summary changed.  With no embedder (``--no-dense``) no model
is loaded at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterchunk.contract.schema import UNTITLED
from letterchunk.errors import InputError
from letterchunk.io import read_jsonl
from letterchunk.retrieval.chunks import Record, chunk_files, read_records
from letterchunk.retrieval.embed import Embedder, windows
from letterchunk.retrieval.links import LINKS_SQL
from letterchunk.retrieval.marks import MARKS_SQL, focus_pieces, section_points, write_marks
from letterchunk.retrieval.store import (
    APPLICATION_ID,
    FTS_TOKENIZE,
    SCHEMA_VERSION,
    check_index,
    connect,
    index_errors,
)
from letterchunk.retrieval.vectors import GENERATION_KEY

__all__ = [
    "IndexStats",
    "FTS_TOKENIZE",
    "SCHEMA_VERSION",
    "build_index",
    "checksum",
    "context_header",
    "ranked_ids",
]

HEADER_SHARE = 4  # a context header takes at most 1/4 of an embedding window
# the end of a sentence: a header line, a separator or a table's rule has none
_SENTENCE_END = re.compile(r"\w[.!?:][\"'’”)]?(?:\s|$)")
BATCH = 32  # units embedded, then committed, at a time: an interrupted run keeps its work

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    letter_year INTEGER NOT NULL,
    section_title TEXT NOT NULL,
    chunk_tier INTEGER NOT NULL,
    parent_chunk_id TEXT NOT NULL,
    content_type TEXT NOT NULL,
    source_file TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    companies TEXT NOT NULL,
    concepts TEXT NOT NULL,
    summary TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    chunk TEXT NOT NULL,
    header TEXT NOT NULL,
    leaf INTEGER NOT NULL,
    checksum TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts
    USING fts5(header, summary, content, tokenize = '{FTS_TOKENIZE}');
CREATE TABLE IF NOT EXISTS units (
    id INTEGER PRIMARY KEY,
    checksum TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS units_checksum ON units (checksum);
{LINKS_SQL};
{MARKS_SQL};"""


@dataclass(frozen=True)
class IndexStats:
    chunks: int
    units_embedded: int  # embedded by this run
    units_reused: int  # kept from an earlier run (unchanged chunks)
    embedder: str | None


def checksum(record: Record, embedder: str, covered: bool = False) -> str:
    """What a chunk's vectors depend on: the embedder, the header, the summary, the content, and
    whether its children cover it (then its content is embedded as theirs)."""
    parts = [embedder, context_header(record), record.summary, record.content]
    text = "\0".join(parts + (["covered"] if covered else []))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def context_header(record: Record) -> str:
    """``"1987 letter. Insurance Operations."``: where the chunk stands, for the retrievers."""
    md = record.chunk.metadata
    parts = [f"{md.letter_year} letter."]
    if md.section_title and md.section_title != UNTITLED:
        parts.append(md.section_title.rstrip(".") + ".")
    names = [t.table_name for t in md.table_data if t.table_name]
    if names:
        parts.append("Table: " + "; ".join(names) + ".")
    return " ".join(parts)


def ranked_ids(records: list[Record]) -> set[str]:
    """The chunk ids search ranks: the leaves, and parents whose children leave a sentence out."""
    spans = {r.chunk_id: r.chunk.metadata.source_span for r in records}
    ranked = set()
    for r in records:
        kids = [spans[c] for c in r.chunk.metadata.child_chunk_ids if c in spans]
        start = r.chunk.metadata.source_span.start_char
        covered = [False] * len(r.content)
        for span in kids:
            for i in range(max(0, span.start_char - start), span.end_char_exclusive - start):
                if i < len(covered):
                    covered[i] = True
        left_out = "".join(" " if cov else ch for ch, cov in zip(r.content, covered, strict=True))
        if not kids or _SENTENCE_END.search(left_out):
            ranked.add(r.chunk_id)
    return ranked


def _meta(conn: Any) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


@contextlib.contextmanager
def _transaction(conn: Any) -> Iterator[None]:
    """One write transaction (the connection is in autocommit mode): all of it or nothing."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _places(folder: str | Path, chunk_id: str) -> list[str]:
    """``"FILE line N"`` of every line of the folder's chunk files whose chunk has ``chunk_id``."""
    return [
        f"{path} line {line.number}"
        for path in chunk_files(folder)
        for line in read_jsonl(path)  # numbered as the chunk reader numbers them
        if isinstance(line.value, dict) and line.value.get("chunk_id") == chunk_id
    ]


def _check_unique(folder: str | Path, records: list[Record], db: str | Path) -> None:
    """An :class:`InputError` naming the first chunk id two chunks share, and where each is."""
    seen: set[str] = set()
    for r in records:
        if r.chunk_id in seen:
            places = _places(folder, r.chunk_id)
            where = " and ".join(places) if len(places) < 3 else "; ".join(places)
            raise InputError(
                folder,
                f"chunk id {r.chunk_id} is used by {len(places) or 2} chunks ({where}); an index "
                f"holds one chunk per id: remove or rename the copy; nothing was written to {db}",
            )
        seen.add(r.chunk_id)


def _is_index(conn: Any) -> bool:
    """Whether the file already holds an index's meta table (of any schema version)."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    return conn.execute(found).fetchone() is not None


def _write_chunks(conn: Any, records: list[Record], ranked: set[str], embedder: str) -> None:
    conn.execute("DELETE FROM chunks")
    conn.execute("DELETE FROM chunks_fts")
    summaries = {r.chunk_id: r.summary for r in records}
    for rowid, r in enumerate(records, 1):
        md, chunk = r.metadata, r.chunk.metadata
        header = context_header(r)
        conn.execute(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rowid,
                r.chunk_id,
                md["letter_year"],
                md["section_title"],
                md["chunk_tier"],
                md["parent_chunk_id"],
                md["content_type"],
                md["source_file"],
                md["start_char"],
                md["end_char_exclusive"],
                json.dumps(chunk.entities.companies, ensure_ascii=False),
                json.dumps(chunk.buffett_concepts, ensure_ascii=False),
                r.summary,
                r.content,
                json.dumps(md, ensure_ascii=False),
                json.dumps(r.chunk.model_dump(mode="json"), ensure_ascii=False),
                header,
                int(r.chunk_id in ranked),
                checksum(r, embedder, covered=r.chunk_id not in ranked),
            ),
        )
        # a child without a summary of its own is situated by its parent's
        summary = r.summary or summaries.get(chunk.parent_chunk_id or "", "")
        conn.execute(
            "INSERT INTO chunks_fts (rowid, header, summary, content) VALUES (?, ?, ?, ?)",
            (rowid, header, summary, r.content),
        )


def _mark_points(records: list[Record]) -> dict[str, set[int]]:
    """Each chunk text and the points a hit's window asks counts at (see retrieval.marks):
    the pieces any chunk is focused by when longer than the window, and for a Tier-1 chunk
    with children the points its window grows to."""
    children: dict[str, list[tuple[int, int]]] = {}
    for r in records:
        md = r.chunk.metadata
        if md.chunk_tier in (2, 3) and md.parent_chunk_id:
            span = (md.source_span.start_char, md.source_span.end_char_exclusive)
            children.setdefault(md.parent_chunk_id, []).append(span)
    points: dict[str, set[int]] = {}
    for r in records:
        md = r.chunk.metadata
        kept = points.setdefault(r.content, set())
        kept.update(p for span in focus_pieces(r.content, md.chunk_tier == 3) for p in span)
        if md.chunk_tier == 1 and r.chunk_id in children:
            origin = md.source_span.start_char
            spans = [(a - origin, b - origin) for a, b in children[r.chunk_id]]
            kept.update(section_points(r.content, spans))
    return points


def _header_prefix(embedder: Embedder, header: str) -> str:
    """The header and a line break, cut to a quarter of the model's window if longer."""
    starts = embedder.token_starts(header)
    limit = embedder.window // HEADER_SHARE
    if len(starts) > limit:
        header = header[: starts[limit]].rstrip()
    return header + "\n"


def _units(embedder: Embedder, record: Record, covered: bool) -> list[tuple[str, int, int, str]]:
    """(kind, start, end, text to embed) of each piece of a chunk: summary, content windows.

    Every piece is embedded behind the chunk's context header; the windows are shortened by the
    header's tokens (and a margin of 2 for the join) so that header and window fit the model.
    A parent its children cover embeds its summary only: search scores its content by the
    children's vectors, so no text is embedded twice.
    """
    prefix = _header_prefix(embedder, context_header(record))
    size = embedder.window - len(embedder.token_starts(prefix)) - 2
    pieces = []
    texts = [("summary", record.summary)] + ([] if covered else [("content", record.content)])
    for kind, text in texts:
        if text:
            pieces += [
                (kind, w.start, w.end, prefix + text[w.start : w.end])
                for w in windows(embedder, text, size=size)
            ]
    return pieces


def _embed_missing(
    conn: Any,
    records: list[Record],
    ranked: set[str],
    embedder: Embedder,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    """Embed the units of chunks whose checksum has none; returns (embedded, reused)."""
    wanted = {
        checksum(r, embedder.name, covered=r.chunk_id not in ranked): (r, r.chunk_id not in ranked)
        for r in records
    }
    have = {row[0] for row in conn.execute("SELECT DISTINCT checksum FROM units")}
    stale = have - wanted.keys()
    with _transaction(conn):
        conn.executemany("DELETE FROM units WHERE checksum = ?", [(c,) for c in stale])
    reused = conn.execute("SELECT count(*) FROM units").fetchone()[0]
    todo = [
        (c, *unit)
        for c, (r, covered) in wanted.items()
        if c not in have
        for unit in _units(embedder, r, covered)
    ]
    for first in range(0, len(todo), BATCH):
        batch = todo[first : first + BATCH]
        vectors = embedder.embed([text for *_, text in batch])
        with _transaction(conn):
            conn.executemany(
                "INSERT INTO units (checksum, kind, start_char, end_char, embedding) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (c, kind, start, end, vector.astype("<f4").tobytes())
                    for (c, kind, start, end, _), vector in zip(batch, vectors, strict=True)
                ],
            )
        if progress:
            progress(first + len(batch), len(todo))
    return len(todo), reused


def build_index(
    folder: str | Path,
    db: str | Path,
    embedder: Embedder | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> IndexStats:
    """Index ``folder``'s chunks into ``db`` (created or updated); see the module docstring.

    Raises :class:`InputError` for a ``db`` that is not a letterchunk index (nothing written),
    for chunk ids used twice, and for a SQLite fault met while writing (the chunks' transaction
    rolled back).
    """
    records = read_records(folder)
    _check_unique(folder, records, db)
    ranked = ranked_ids(records)
    name = embedder.name if embedder else ""
    found = check_index(db, write=True)
    with index_errors(db):
        conn, _ = connect(db, vectors=False)  # writes vectors; search scores them (numpy)
    committed = False
    try:
        with index_errors(db):
            conn.isolation_level = None  # transactions are explicit: _transaction
            with _transaction(conn):
                meta = _meta(conn) if _is_index(conn) else {}
                if meta.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
                    # an index another letterchunk wrote: its tables and vectors cannot be reused
                    for table in ("chunks_fts", "chunks", "units", "links", "token_marks", "meta"):
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                    meta = {}
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                if embedder and meta.get("embedder") not in (None, "", name):
                    conn.execute("DELETE FROM units")  # vectors of another model cannot compare
                # --no-dense on a dense index keeps its vectors usable for unchanged chunks
                name = name or meta.get("embedder", "")
                _write_chunks(conn, records, ranked, name)
                write_marks(conn, _mark_points(records))
                # links join chunks as they were: `letterchunk link` computes them anew
                conn.execute("DELETE FROM links")
                conn.execute("DELETE FROM meta WHERE key LIKE 'links%'")
                # a fresh token each run: a process that keeps this index's vectors in memory
                # never takes a rebuilt file for the one it read (retrieval.vectors)
                conn.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [
                        ("schema", SCHEMA_VERSION),
                        ("embedder", name),
                        (GENERATION_KEY, secrets.token_hex(8)),
                    ],
                )
            committed = True
            embedded = reused = 0
            if embedder:
                embedded, reused = _embed_missing(conn, records, ranked, embedder, progress)
        return IndexStats(len(records), embedded, reused, embedder.name if embedder else None)
    finally:
        conn.close()
        if not found.exists and not committed:
            Path(db).unlink(missing_ok=True)  # a file this run created and never filled
