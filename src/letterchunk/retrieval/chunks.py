"""An output folder's chunks as records with flat metadata, the shape RAG stores can filter.

Vector stores accept metadata values that are scalars (Chroma, most LangChain stores) or, in some,
lists of scalars (LlamaIndex's filters, Qdrant, pgvector JSON).  A canonical chunk's metadata is
nested (``entities``, ``temporal_references``, ``source_span``) and holds lists of objects
(``table_data``, ``principles``), which those stores reject or drop.  :func:`flat_metadata` maps
it to one level: nested objects become their own keys, lists of objects become lists of their
names, ``null`` becomes ``""`` (stores reject ``None``), and, in ``join`` mode, every list becomes
one ``"; "``-joined string so that the record is scalar-only.

Chunks are read through :class:`~letterchunk.contract.schema.Chunk` only, so a record exists only
for a chunk that parses as canonical; segment-only output (empty summary and entities) reads the
same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from letterchunk.contract.files import load_chunks
from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError
from letterchunk.layout import LETTER_CHUNKS

__all__ = [
    "FlatValue",
    "ListMode",
    "Record",
    "chunk_files",
    "flat_metadata",
    "read_chunks",
    "read_records",
    "LIST_SEPARATOR",
]

FlatValue = str | int | float | bool | list[str] | list[int]
ListMode = Literal["join", "keep"]
LIST_SEPARATOR = "; "

# YYYY.jsonl holds a letter's chunks; YYYY.evidence.jsonl and YYYY.report.jsonl are sidecars
_CHUNK_FILE = LETTER_CHUNKS  # YYYY.jsonl, or YYYY-Lk.jsonl for a compilation letter


@dataclass(frozen=True)
class Record:
    """One chunk as a retrieval unit: its id, exact text, summary and flat metadata."""

    chunk_id: str
    content: str
    summary: str
    metadata: dict[str, FlatValue]
    chunk: Chunk


def chunk_files(folder: str | Path) -> list[Path]:
    """The ``YYYY.jsonl`` chunk files of an output folder, oldest letter first."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(
            root, "not a folder; pass the output folder of `letterchunk run` or `segment`"
        )
    files = sorted(p for p in root.iterdir() if _CHUNK_FILE.match(p.name))
    if not files:
        raise InputError(
            root, "no YYYY.jsonl chunk files here; run `letterchunk segment` or `run` first"
        )
    return files


def read_chunks(folder: str | Path) -> Iterator[Chunk]:
    """Every chunk of the folder, file by file in file order; a file or line that is unusable
    is an InputError naming it (:func:`~letterchunk.contract.files.load_chunks`)."""
    for path in chunk_files(folder):
        yield from load_chunks(path)


def read_records(folder: str | Path, *, lists: ListMode = "keep") -> list[Record]:
    return [to_record(c, lists=lists) for c in read_chunks(folder)]


def to_record(chunk: Chunk, *, lists: ListMode = "keep") -> Record:
    return Record(
        chunk_id=chunk.chunk_id,
        content=chunk.content,
        summary=chunk.metadata.contextual_summary.strip(),
        metadata=flat_metadata(chunk, lists=lists),
        chunk=chunk,
    )


def _list(values: Iterable[str] | Iterable[int], mode: ListMode) -> FlatValue:
    items = list(values)
    if mode == "join":
        return LIST_SEPARATOR.join(str(v) for v in items)
    return items  # type: ignore[return-value]


def flat_metadata(chunk: Chunk, *, lists: ListMode = "keep") -> dict[str, FlatValue]:
    """One level of filterable metadata, keys in a fixed order (the §0.2 order, flattened)."""
    md = chunk.metadata
    return {
        "chunk_id": chunk.chunk_id,
        "letter_year": md.letter_year,
        "letter_date": md.letter_date,
        "source_file": md.source_file,
        "section_title": md.section_title,
        "section_path": " > ".join(md.section_hierarchy),
        "chunk_tier": md.chunk_tier,
        "parent_chunk_id": md.parent_chunk_id or "",
        "child_chunk_ids": _list(md.child_chunk_ids, lists),
        "content_type": md.content_type,
        "summary": md.contextual_summary.strip(),
        "has_table": md.has_table,
        "table_names": _list([t.table_name for t in md.table_data], lists),
        "has_financial_data": md.has_financial_data,
        "companies": _list(md.entities.companies, lists),
        "people": _list(md.entities.people, lists),
        "metrics": _list(md.entities.metrics, lists),
        "themes": _list(md.themes, lists),
        "buffett_concepts": _list(md.buffett_concepts, lists),
        "principles": _list([p.statement for p in md.principles], lists),
        "principle_categories": _list(sorted({p.category for p in md.principles}), lists),
        "primary_year": md.temporal_references.primary_year,
        "comparison_years": _list(md.temporal_references.comparison_years, lists),
        "future_outlook": md.temporal_references.future_outlook,
        "related_years": _list(md.cross_references.related_years, lists),
        "retrieval_priority": md.retrieval_priority,
        "abstraction_level": md.abstraction_level,
        "token_count": md.token_count,
        "char_count": md.char_count,
        "start_char": md.source_span.start_char,
        "end_char_exclusive": md.source_span.end_char_exclusive,
    }
