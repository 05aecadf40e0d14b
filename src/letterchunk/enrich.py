"""Enrichment: the one LLM call per chunk that fills the semantic metadata fields.

The LLM answers a small response model (:class:`Enrichment` for Tier-1/2 narrative chunks,
:class:`TableEnrichment` for Tier-3 table chunks) that holds *only* fields needing judgement plus
verbatim evidence.  Everything mechanical — ids, spans, counts, tiers, parent/child links, table
columns/rows, ``primary_year`` — stays as the segmenter computed it; :func:`apply_enrichment`
copies the answer into a new :class:`~letterchunk.schema.Chunk` and touches nothing else.

Per chunk the model is narrowed by :func:`response_model_for` so that the server's JSON-schema
grammar (llama-server turns ``response_format`` into a grammar) already rules out answers the
validator would reject: ``buffett_concepts`` is an enum over the controlled vocabulary,
``related_sections_same_letter`` an enum over the letter's own section titles,
``comparison_years`` an enum over the years written in the chunk, ``related_years`` an enum over
plausible letter years, list lengths are capped, and
``section_title`` is only asked for when the segmenter could not find one
(:data:`letterchunk.segment.UNTITLED`).

Evidence is not a canonical key; :func:`evidence_record` turns it into one line of the
``YYYY.evidence.jsonl`` sidecar::

    {"chunk_id": ..., "content_type_evidence": [...], "principle_evidence": [...]}

:data:`FIELDS` maps each response field to the canonical metadata path it fills (the repair loop
uses it to re-ask only the fields behind a violation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from . import prompts
from .schema import (
    Chunk,
    CrossReferences,
    Entities,
    Level,
    Principle,
    PrincipleCategory,
    TableData,
    TemporalReferences,
)

__all__ = [
    "UNTITLED",
    "NarrativeType",
    "PromptContext",
    "EnrichedEntities",
    "EnrichedPrinciple",
    "EnrichedTable",
    "Enrichment",
    "TableEnrichment",
    "FIELDS",
    "EVIDENCE_FIELDS",
    "response_model_for",
    "build_messages",
    "apply_enrichment",
    "evidence_record",
    "years_in_text",
    "load_vocabulary",
]

try:  # developer A's segmenter owns the constant; keep a fallback so this module imports alone
    from .segment import UNTITLED
except ImportError:  # pragma: no cover
    UNTITLED = "Untitled section"

NarrativeType = Literal["narrative", "mistake_confession", "principle_statement"]

# Caps that keep the 1.5B model's answer short; the prompt states the same numbers.
MAX_THEMES, MAX_CONCEPTS, MAX_PRINCIPLES, MAX_EVIDENCE = 5, 4, 2, 2
MAX_COMPANIES, MAX_PEOPLE, MAX_METRICS = 6, 5, 5
MAX_RELATED_SECTIONS, MAX_RELATED_YEARS, MAX_COMPARISON_YEARS = 3, 3, 6
# related_years are letter years: Buffett's letters to Berkshire shareholders start with 1965
FIRST_LETTER_YEAR, LAST_LETTER_YEAR = 1965, 2030
# Generous string caps: a guard against run-away generation, not a style rule.
_SHORT, _SENTENCE, _SUMMARY = 80, 400, 600


class _Answer(BaseModel):
    """Response models accept JSON from an LLM: no extra keys, no silent defaults."""

    model_config = ConfigDict(extra="forbid")


class EnrichedEntities(_Answer):
    companies: list[str] = Field(max_length=MAX_COMPANIES)
    people: list[str] = Field(max_length=MAX_PEOPLE)
    metrics: list[str] = Field(max_length=MAX_METRICS)


class EnrichedPrinciple(_Answer):
    statement: str = Field(max_length=_SENTENCE)
    category: PrincipleCategory
    evidence: str = Field(max_length=_SENTENCE * 2, description="one sentence copied verbatim")


class EnrichedTable(_Answer):
    table_name: str = Field(max_length=_SHORT)
    summary: str = Field(max_length=_SENTENCE)


class Enrichment(_Answer):
    """Answer for a Tier-1 or Tier-2 (narrative) chunk; fields in the order the model writes them."""

    contextual_summary: str = Field(max_length=_SUMMARY)
    themes: list[str] = Field(max_length=MAX_THEMES)
    buffett_concepts: list[str] = Field(max_length=MAX_CONCEPTS)
    entities: EnrichedEntities
    principles: list[EnrichedPrinciple] = Field(max_length=MAX_PRINCIPLES)
    content_type: NarrativeType
    content_type_evidence: list[str] = Field(max_length=MAX_EVIDENCE)
    has_financial_data: bool
    retrieval_priority: Level
    abstraction_level: Level
    comparison_years: list[int] = Field(max_length=MAX_COMPARISON_YEARS)
    future_outlook: bool
    related_sections_same_letter: list[str] = Field(max_length=MAX_RELATED_SECTIONS)
    related_years: list[int] = Field(max_length=MAX_RELATED_YEARS)


class TableEnrichment(_Answer):
    """Answer for a Tier-3 (table) chunk; content_type is always financial_table (set by code)."""

    tables: list[EnrichedTable]
    contextual_summary: str = Field(max_length=_SUMMARY)
    themes: list[str] = Field(max_length=MAX_THEMES)
    buffett_concepts: list[str] = Field(max_length=MAX_CONCEPTS)
    entities: EnrichedEntities
    has_financial_data: bool
    retrieval_priority: Level
    abstraction_level: Level
    comparison_years: list[int] = Field(max_length=MAX_COMPARISON_YEARS)
    future_outlook: bool
    related_sections_same_letter: list[str] = Field(max_length=MAX_RELATED_SECTIONS)
    related_years: list[int] = Field(max_length=MAX_RELATED_YEARS)


# response field -> the validator field path(s) it fills: a metadata path, or a key of the
# evidence sidecar (``content_type_evidence``, ``principle_evidence``)
FIELDS: dict[str, str | tuple[str, ...]] = {
    "section_title": ("section_title", "section_hierarchy"),
    "tables": "table_data",
    "contextual_summary": "contextual_summary",
    "themes": "themes",
    "buffett_concepts": "buffett_concepts",
    "entities": "entities",
    "principles": ("principles", "principle_evidence"),
    "content_type": "content_type",
    "content_type_evidence": "content_type_evidence",
    "has_financial_data": "has_financial_data",
    "retrieval_priority": "retrieval_priority",
    "abstraction_level": "abstraction_level",
    "comparison_years": "temporal_references.comparison_years",
    "future_outlook": "temporal_references.future_outlook",
    "related_sections_same_letter": "cross_references.related_sections_same_letter",
    "related_years": "cross_references.related_years",
}
# sidecar key -> response field that carries it
EVIDENCE_FIELDS: dict[str, str] = {
    "content_type_evidence": "content_type_evidence",
    "principle_evidence": "principles",
}


# --------------------------------------------------------------------------------------------
# Prompt context


@dataclass(frozen=True)
class PromptContext:
    """What the prompt needs about the whole letter; build one per letter."""

    year: int
    section_titles: tuple[str, ...]
    vocabulary: tuple[str, ...]

    @classmethod
    def for_letter(
        cls, year: int, section_titles: list[str], vocabulary: frozenset[str] | None = None
    ) -> PromptContext:
        vocab = load_vocabulary() if vocabulary is None else vocabulary
        titles = tuple(dict.fromkeys(t for t in section_titles if t and t != UNTITLED))
        # sorted: a frozenset's iteration order changes with PYTHONHASHSEED, and the prompt
        # bytes must not (cache keys, cassettes)
        return cls(year=year, section_titles=titles, vocabulary=tuple(sorted(vocab)))


def load_vocabulary() -> frozenset[str]:
    """The controlled ``buffett_concepts`` vocabulary (developer B's loader)."""
    from .vocabulary import load_concepts

    return load_concepts()


_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")


def years_in_text(text: str) -> list[int]:
    """Distinct four-digit years (1800-2099) written in ``text``, ascending."""
    return sorted({int(y) for y in _YEAR.findall(text)})


def _is_table(chunk: Chunk) -> bool:
    return chunk.metadata.chunk_tier == 3


def response_model_for(chunk: Chunk, ctx: PromptContext) -> type[_Answer]:
    """The response model for ``chunk``, narrowed so the grammar only allows valid values.

    Named ``Enrichment`` / ``TableEnrichment`` (the name is part of the request).
    """
    base: type[_Answer] = TableEnrichment if _is_table(chunk) else Enrichment
    narrowed: dict[str, tuple[object, object]] = {}
    if ctx.vocabulary:
        concept = Literal[ctx.vocabulary]  # type: ignore[valid-type]
        narrowed["buffett_concepts"] = (list[concept], Field(max_length=MAX_CONCEPTS))
    titles = tuple(t for t in ctx.section_titles if t != chunk.metadata.section_title)
    if titles:
        section = Literal[titles]  # type: ignore[valid-type]
        narrowed["related_sections_same_letter"] = (
            list[section],
            Field(max_length=MAX_RELATED_SECTIONS),
        )
    else:
        narrowed["related_sections_same_letter"] = (list[str], Field(max_length=0))
    years = tuple(y for y in years_in_text(chunk.content) if y != ctx.year)
    if years:
        year = Literal[years]  # type: ignore[valid-type]
        narrowed["comparison_years"] = (list[year], Field(max_length=MAX_COMPARISON_YEARS))
    else:
        narrowed["comparison_years"] = (list[int], Field(max_length=0))
    others = tuple(y for y in range(FIRST_LETTER_YEAR, LAST_LETTER_YEAR + 1) if y != ctx.year)
    narrowed["related_years"] = (list[Literal[others]], Field(max_length=MAX_RELATED_YEARS))
    if _is_table(chunk):
        n = len(chunk.metadata.table_data)
        narrowed["tables"] = (list[EnrichedTable], Field(min_length=n, max_length=n))

    fields: dict[str, tuple[object, object]] = {}
    if chunk.metadata.section_title == UNTITLED:
        fields["section_title"] = (str, Field(max_length=_SHORT))
    for name, info in base.model_fields.items():  # keep the base model's order
        fields[name] = narrowed.get(name, (info.annotation, info))
    # a subclass of the base (isinstance holds), but every field redefined in the wanted order
    return create_model(base.__name__, __base__=base, **fields)  # type: ignore[call-overload]


# --------------------------------------------------------------------------------------------
# Messages


def _kind(chunk: Chunk) -> str:
    tier = chunk.metadata.chunk_tier
    if tier == 3:
        n = len(chunk.metadata.table_data)
        return f"table chunk with {n} table(s) (answer tables; no content_type, no principles)"
    what = "section" if tier == 1 else "paragraph"
    ask = "; also give section_title" if chunk.metadata.section_title == UNTITLED else ""
    return f"narrative {what} chunk{ask}"


def build_messages(chunk: Chunk, ctx: PromptContext) -> list[dict]:
    """The chat messages for one chunk: fixed instructions first, the chunk text last."""
    system = prompts.render(
        "enrich_system",
        concepts="\n".join(f"  {c}" for c in ctx.vocabulary),
        categories=", ".join(get_args(PrincipleCategory)),
    )
    titles = "\n".join(f"- {t}" for t in ctx.section_titles) or "- (none)"
    user = prompts.render(
        "enrich_user",
        year=ctx.year,
        section_titles=titles,
        kind=_kind(chunk),
        section_title=chunk.metadata.section_title,
        content=chunk.content,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------------------------
# Applying an answer


def apply_enrichment(chunk: Chunk, e: BaseModel) -> Chunk:
    """A new chunk with the answer's semantic fields; mechanical fields are left untouched.

    ``e`` may be any response model built by :func:`response_model_for` (or a repair model that
    holds a subset of its fields): only the fields present are applied.
    """
    answer = dict(e)
    meta = chunk.metadata
    update: dict[str, object] = {}
    for name in ("contextual_summary", "themes", "buffett_concepts", "has_financial_data",
                 "retrieval_priority", "abstraction_level"):
        if name in answer:
            value = answer[name]
            update[name] = list(value) if isinstance(value, list) else value
    if "entities" in answer:
        ent = answer["entities"]
        update["entities"] = Entities(
            companies=list(ent.companies), people=list(ent.people), metrics=list(ent.metrics)
        )
    if "principles" in answer:
        update["principles"] = [
            Principle(statement=p.statement, category=p.category) for p in answer["principles"]
        ]
    if "content_type" in answer and meta.chunk_tier != 3:
        update["content_type"] = answer["content_type"]
    if "comparison_years" in answer or "future_outlook" in answer:
        tr = meta.temporal_references
        update["temporal_references"] = TemporalReferences(
            primary_year=tr.primary_year,
            comparison_years=[int(y) for y in answer.get("comparison_years", tr.comparison_years)],
            future_outlook=bool(answer.get("future_outlook", tr.future_outlook)),
        )
    if "related_sections_same_letter" in answer or "related_years" in answer:
        cr = meta.cross_references
        update["cross_references"] = CrossReferences(
            related_sections_same_letter=list(
                answer.get("related_sections_same_letter", cr.related_sections_same_letter)
            ),
            related_years=[int(y) for y in answer.get("related_years", cr.related_years)],
        )
    if "section_title" in answer and meta.section_title == UNTITLED:
        title = str(answer["section_title"]).strip()
        if title:
            update["section_title"] = title
            update["section_hierarchy"] = [
                title if h == UNTITLED else h for h in meta.section_hierarchy
            ]
    if "tables" in answer and meta.chunk_tier == 3:
        tables = answer["tables"]
        update["table_data"] = [
            TableData(
                table_name=t.table_name.strip() or old.table_name,
                summary=t.summary.strip(),
                columns=list(old.columns),
                rows=[list(r) for r in old.rows],
                row_count=old.row_count,
            )
            for old, t in zip(meta.table_data, tables)
        ] + [old for old in meta.table_data[len(tables):]]
    new_meta = meta.model_copy(update=update)
    # re-validate so an answer can never smuggle a wrong type into a canonical chunk
    return Chunk.model_validate(
        {"chunk_id": chunk.chunk_id, "content": chunk.content,
         "metadata": new_meta.model_dump(mode="python")},
    )


def evidence_record(chunk_id: str, e: BaseModel) -> dict:
    """One line of the evidence sidecar for ``chunk_id`` (see module docstring)."""
    answer = dict(e)
    return {
        "chunk_id": chunk_id,
        "content_type_evidence": [str(s) for s in answer.get("content_type_evidence", [])],
        "principle_evidence": [str(p.evidence) for p in answer.get("principles", [])],
    }
