"""``letterchunk index``: one SQLite file with the chunks, a BM25 index and dense vectors.

Tables::

    meta(key, value)        schema version, embedder name and dimension ("" when no vectors)
    chunks                  one row per chunk: filter columns, summary, content, flat metadata
                            (JSON), the canonical chunk (JSON), and a checksum of what is embedded
    chunks_fts              FTS5 over section title, summary and content (porter stemming);
                            its rowid is the chunk's rowid; ranked with bm25()
    units                   the embedded pieces of each chunk: its summary and the windows of its
                            content (offsets in that text), keyed by the chunk's checksum, with a
                            float32 vector (the blob format sqlite-vec reads)

Re-indexing rewrites ``chunks`` and ``chunks_fts`` (cheap) and embeds only the chunks whose
checksum (embedder, summary, content) has no units yet; units nobody references are deleted.  An
unchanged folder therefore costs no embedding work, and an enriched re-run re-embeds only the
chunks whose summary changed.  With no embedder (``--no-dense``) no model is loaded at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterchunk.errors import ConfigError
from letterchunk.retrieval.chunks import Record, read_records
from letterchunk.retrieval.embed import Embedder, windows
from letterchunk.retrieval.store import connect

__all__ = ["IndexStats", "SCHEMA_VERSION", "build_index", "checksum"]

SCHEMA_VERSION = "1"
BATCH = 32  # units embedded, then committed, at a time: an interrupted run keeps its work

_SCHEMA = """
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
    checksum TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts
    USING fts5(title, summary, content, tokenize = 'porter unicode61');
CREATE TABLE IF NOT EXISTS units (
    id INTEGER PRIMARY KEY,
    checksum TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS units_checksum ON units (checksum);
"""


@dataclass(frozen=True)
class IndexStats:
    chunks: int
    units_embedded: int  # embedded by this run
    units_reused: int  # kept from an earlier run (unchanged chunks)
    embedder: str | None
    sqlite_vec: bool


def checksum(record: Record, embedder: str) -> str:
    """What a chunk's vectors depend on: the embedder, the summary and the content."""
    text = "\0".join([embedder, record.summary, record.content])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _meta(conn: Any) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def _write_chunks(conn: Any, records: list[Record], embedder: str) -> None:
    conn.execute("DELETE FROM chunks")
    conn.execute("DELETE FROM chunks_fts")
    for rowid, r in enumerate(records, 1):
        md, chunk = r.metadata, r.chunk.metadata
        conn.execute(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                checksum(r, embedder),
            ),
        )
        conn.execute(
            "INSERT INTO chunks_fts (rowid, title, summary, content) VALUES (?, ?, ?, ?)",
            (rowid, md["section_title"], r.summary, r.content),
        )


def _units(embedder: Embedder, record: Record) -> list[tuple[str, int, int, str]]:
    """(kind, start, end, text) of each piece of a chunk to embed: summary, content windows."""
    pieces = []
    for kind, text in (("summary", record.summary), ("content", record.content)):
        if text:
            pieces += [
                (kind, w.start, w.end, text[w.start : w.end]) for w in windows(embedder, text)
            ]
    return pieces


def _embed_missing(
    conn: Any,
    records: list[Record],
    embedder: Embedder,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    """Embed the units of chunks whose checksum has none; returns (embedded, reused)."""
    wanted = {checksum(r, embedder.name): r for r in records}
    have = {row[0] for row in conn.execute("SELECT DISTINCT checksum FROM units")}
    stale = have - wanted.keys()
    conn.executemany("DELETE FROM units WHERE checksum = ?", [(c,) for c in stale])
    conn.commit()
    reused = conn.execute("SELECT count(*) FROM units").fetchone()[0]
    todo = [(c, *unit) for c, r in wanted.items() if c not in have for unit in _units(embedder, r)]
    for first in range(0, len(todo), BATCH):
        batch = todo[first : first + BATCH]
        vectors = embedder.embed([text for *_, text in batch])
        conn.executemany(
            "INSERT INTO units (checksum, kind, start_char, end_char, embedding) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                (c, kind, start, end, vector.astype("<f4").tobytes())
                for (c, kind, start, end, _), vector in zip(batch, vectors, strict=True)
            ],
        )
        conn.commit()
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
    """Index ``folder``'s chunks into ``db`` (created or updated); see the module docstring."""
    records = read_records(folder)
    name = embedder.name if embedder else ""
    conn, has_vec = connect(db)
    try:
        conn.executescript(_SCHEMA)
        meta = _meta(conn)
        if meta.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ConfigError(
                f"{db}: index schema {meta['schema']}, this letterchunk writes "
                f"{SCHEMA_VERSION}; delete the file and index again"
            )
        if embedder and meta.get("embedder") not in (None, "", name):
            conn.execute("DELETE FROM units")  # vectors of another model cannot be compared
        # --no-dense on a dense index keeps its vectors usable for the chunks that did not change
        name = name or meta.get("embedder", "")
        with conn:
            _write_chunks(conn, records, name)
            conn.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("schema", SCHEMA_VERSION), ("embedder", name)],
            )
        embedded = reused = 0
        if embedder:
            embedded, reused = _embed_missing(conn, records, embedder, progress)
        return IndexStats(
            len(records), embedded, reused, embedder.name if embedder else None, has_vec
        )
    finally:
        conn.close()
