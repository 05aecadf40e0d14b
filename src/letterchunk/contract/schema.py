"""Canonical chunk schema (spec §0, docs/spec.md), as strict pydantic models.

Every chunk letterchunk writes is a :class:`Chunk`.  The models are the single source of truth
for ``schemas/chunk.schema.json`` (see :func:`json_schema`); a test fails when the committed file
drifts from them.

Strictness: ``extra="forbid"`` everywhere, ``strict=True`` (no silent coercion of ``"1"`` to ``1``),
enums as ``Literal``.  Key order follows §0.2 so serialised output reads like the spec.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CHUNK_ID_PATTERN",
    "UNTITLED",
    "ContentType",
    "Level",
    "PrincipleCategory",
    "TableData",
    "Entities",
    "Principle",
    "TemporalReferences",
    "CrossReferences",
    "SourceSpan",
    "Metadata",
    "Chunk",
    "json_schema",
    "dump_chunk",
]

CHUNK_ID_PATTERN = r"^\d{4}-S\d+-T[123]-\d{3}$"

#: ``section_title`` of a section the segmenter found no header for; enrichment asks the model
#: for a title, and at stage ``enriched`` the validator rejects it (rule ``title.untitled``).
UNTITLED = "Untitled section"

ContentType = Literal["narrative", "financial_table", "mistake_confession", "principle_statement"]
Level = Literal["low", "medium", "high"]
PrincipleCategory = Literal[
    "capital_allocation",
    "valuation",
    "risk",
    "management",
    "insurance",
    "accounting",
    "behavior",
    "governance",
    "general",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TableData(_Strict):
    table_name: str
    summary: str
    columns: list[str]
    rows: list[list[str]]
    row_count: int


class Entities(_Strict):
    companies: list[str] = Field(default_factory=list)
    people: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list)


class Principle(_Strict):
    statement: str
    category: PrincipleCategory


class TemporalReferences(_Strict):
    primary_year: int
    comparison_years: list[int] = Field(default_factory=list)
    future_outlook: bool = False


class CrossReferences(_Strict):
    related_sections_same_letter: list[str] = Field(default_factory=list)
    related_years: list[int] = Field(default_factory=list)


class SourceSpan(_Strict):
    start_char: int
    end_char_exclusive: int


class Metadata(_Strict):
    letter_year: int
    letter_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    source_file: str

    section_title: str
    section_hierarchy: list[str]

    chunk_tier: Literal[1, 2, 3]
    parent_chunk_id: str | None = None
    child_chunk_ids: list[str] = Field(default_factory=list)

    content_type: ContentType
    contextual_summary: str = ""

    has_table: bool = False
    table_data: list[TableData] = Field(default_factory=list)
    has_financial_data: bool = False

    entities: Entities = Field(default_factory=Entities)
    themes: list[str] = Field(default_factory=list)
    buffett_concepts: list[str] = Field(default_factory=list)
    principles: list[Principle] = Field(default_factory=list)

    temporal_references: TemporalReferences
    cross_references: CrossReferences = Field(default_factory=CrossReferences)

    retrieval_priority: Level = "medium"
    abstraction_level: Level = "medium"

    token_count: int
    char_count: int

    source_span: SourceSpan

    standalone_exception: bool = False
    exception_reason: str | None = None

    boundary_note: str | None = None
    merged_from: list[str] = Field(default_factory=list)


class Chunk(_Strict):
    chunk_id: str = Field(pattern=CHUNK_ID_PATTERN)
    content: str
    metadata: Metadata


def json_schema() -> dict[str, Any]:
    """JSON Schema of one canonical chunk, as committed in ``schemas/chunk.schema.json``."""
    schema = Chunk.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://letterchunk.invalid/schemas/chunk.schema.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dump_chunk(chunk: Chunk) -> str:
    """One JSONL line for ``chunk``: canonical key order, UTF-8, no trailing whitespace."""
    return json.dumps(chunk.model_dump(mode="json"), ensure_ascii=False, separators=(", ", ": "))
