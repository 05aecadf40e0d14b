"""Applying a validated answer to a chunk, and its evidence record for the sidecar."""

from __future__ import annotations

import re
from typing import cast

from pydantic import BaseModel

from letterchunk.contract.schema import (
    UNTITLED,
    Chunk,
    CrossReferences,
    Entities,
    Metadata,
    Principle,
    TableData,
    TemporalReferences,
)
from letterchunk.contract.violations import EvidenceRecord
from letterchunk.enrich.answers import AnswerFields
from letterchunk.text.sentences import sentence_spans

# --------------------------------------------------------------------------------------------
# Applying an answer


def _unique(items) -> list:
    """Items in first-seen order without repeats."""
    return list(dict.fromkeys(items))


def apply_enrichment(chunk: Chunk, e: BaseModel) -> Chunk:
    """A new chunk with the answer's semantic fields; mechanical fields are left untouched.

    ``e`` may be any response model built by :func:`response_model_for` (or a repair model that
    holds a subset of its fields): only the fields present are applied.
    """
    answer = _fields_of(e)
    meta = chunk.metadata
    # each step adds the fields it owns; the order of the steps is the order the fields are set
    update: dict[str, object] = {}
    update.update(_plain_fields(answer))
    update.update(_entity_fields(answer))
    if "content_type" in answer and meta.chunk_tier != 3:
        update["content_type"] = answer["content_type"]
    update.update(_reference_fields(answer, meta))
    update.update(_title_fields(answer, meta))
    update.update(_table_fields(answer, meta))
    new_meta = meta.model_copy(update=update)
    # re-validate so an answer can never smuggle a wrong type into a canonical chunk
    return Chunk.model_validate(
        {
            "chunk_id": chunk.chunk_id,
            "content": chunk.content,
            "metadata": new_meta.model_dump(mode="python"),
        },
    )


def _fields_of(e: BaseModel) -> AnswerFields:
    """``e``'s fields by name: the answer models of :mod:`letterchunk.enrich.answers` (and the
    repair models holding a subset of their fields) are the only answers, and give these types."""
    return cast(AnswerFields, dict(e))


def _plain_fields(answer: AnswerFields) -> dict[str, object]:
    """The answer's scalar and list fields, copied as they are except that a summary loses an
    unfinished last sentence and the tag lists lose repeats (a grammar cannot forbid them)."""
    update: dict[str, object] = {}
    for name in (
        "contextual_summary",
        "themes",
        "buffett_concepts",
        "has_financial_data",
        "retrieval_priority",
        "abstraction_level",
    ):
        if name in answer:
            value = answer.get(name)
            update[name] = list(value) if isinstance(value, list) else value
    if "contextual_summary" in answer:
        update["contextual_summary"] = complete_sentences(str(answer["contextual_summary"]))
    if "themes" in answer:
        update["themes"] = _unique(answer["themes"])
    if "buffett_concepts" in answer:
        update["buffett_concepts"] = _unique(answer["buffett_concepts"])
    return update


def _entity_fields(answer: AnswerFields) -> dict[str, object]:
    """Entities (each list without repeats) and principles, rebuilt as the canonical models."""
    update: dict[str, object] = {}
    if "entities" in answer:
        ent = answer["entities"]
        update["entities"] = Entities(
            companies=_unique(ent.companies),
            people=_unique(ent.people),
            metrics=_unique(ent.metrics),
        )
    if "principles" in answer:
        update["principles"] = [
            Principle(statement=p.statement, category=p.category) for p in answer["principles"]
        ]
    return update


def _reference_fields(answer: AnswerFields, meta: Metadata) -> dict[str, object]:
    """Temporal and cross references: the answered parts replace the chunk's, the rest (the
    primary year above all, which the segmenter sets) stay as they were."""
    update: dict[str, object] = {}
    if "comparison_years" in answer or "future_outlook" in answer:
        tr = meta.temporal_references
        update["temporal_references"] = TemporalReferences(
            primary_year=tr.primary_year,
            comparison_years=_unique(
                int(y) for y in answer.get("comparison_years", tr.comparison_years)
            ),
            future_outlook=bool(answer.get("future_outlook", tr.future_outlook)),
        )
    if "related_sections_same_letter" in answer or "related_years" in answer:
        cr = meta.cross_references
        update["cross_references"] = CrossReferences(
            related_sections_same_letter=_unique(
                answer.get("related_sections_same_letter", cr.related_sections_same_letter)
            ),
            related_years=_unique(int(y) for y in answer.get("related_years", cr.related_years)),
        )
    return update


def _title_fields(answer: AnswerFields, meta: Metadata) -> dict[str, object]:
    """A section title only for a chunk the segmenter left untitled, and the hierarchy's
    untitled entries renamed with it; an empty answer changes nothing."""
    update: dict[str, object] = {}
    if "section_title" in answer and meta.section_title == UNTITLED:
        title = str(answer["section_title"]).strip()
        if title:
            update["section_title"] = title
            update["section_hierarchy"] = [
                title if h == UNTITLED else h for h in meta.section_hierarchy
            ]
    return update


def _table_fields(answer: AnswerFields, meta: Metadata) -> dict[str, object]:
    """For a table chunk, each table's name and summary from the answer; its columns and rows
    stay the parser's (tables the answer did not cover are kept unchanged)."""
    if "tables" not in answer or meta.chunk_tier != 3:
        return {}
    tables = answer["tables"]
    return {
        "table_data": [
            TableData(
                table_name=t.table_name.strip() or old.table_name,
                summary=t.summary.strip(),
                columns=list(old.columns),
                rows=[list(r) for r in old.rows],
                row_count=old.row_count,
            )
            for old, t in zip(meta.table_data, tables, strict=False)
        ]
        + [old for old in meta.table_data[len(tables) :]]
    }


_ENDS_SENTENCE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*$")


def complete_sentences(text: str) -> str:
    """``text`` without an unfinished last sentence (when an earlier sentence is complete).

    The grammar closes a string at its ``maxLength``: a summary cut there ends mid-sentence
    ("... and its 1977,"), and the fragment counts as one more sentence for the validator, so
    the re-ask (temperature 0) wrote the same cut summary again.
    """
    flat = text.strip()
    if _ENDS_SENTENCE.search(flat):
        return flat
    spans = sentence_spans(flat)
    return flat[: spans[-2][1]] if len(spans) > 1 else flat


def evidence_record(chunk_id: str, e: BaseModel) -> EvidenceRecord:
    """One line of the evidence sidecar for ``chunk_id`` (see module docstring).

    Evidence for a ``narrative`` tag is dropped: only a confession or principle tag needs it
    (the small model tends to quote the whole chunk whatever the tag).
    """
    answer = _fields_of(e)
    tagged = answer.get("content_type", "narrative") in (
        "mistake_confession",
        "principle_statement",
    )
    return {
        "chunk_id": chunk_id,
        "content_type_evidence": [
            str(s) for s in answer.get("content_type_evidence", []) if tagged
        ],
        "principle_evidence": [str(p.evidence) for p in answer.get("principles", [])],
    }
