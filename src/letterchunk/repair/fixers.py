"""Mechanical fixes: recompute by code what the chunk itself (or the cleaned letter) determines.

Counts, flags, defaults, ``has_table`` vs ``table_data``, ``row_count``, tier vs id,
``primary_year``, exception priority, concept spelling, spans, notes, links, entity names filed
under the wrong list (by :func:`letterchunk.contract.names.name_kind`) and duplicate list
items: :func:`mechanical_fixes` applies every fixer in :data:`FIXERS` (pure functions, no LLM) and
returns every change it made as a :class:`Change`.  What needs judgement is left to the
validator and the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.names import name_kind
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import LetterContext
from letterchunk.contract.vocabulary import load_concepts
from letterchunk.enrich.answers import MAX_COMPANIES, MAX_PEOPLE
from letterchunk.tokens import count_tokens

__all__ = [
    "CHUNK_ID_RE",
    "FIXERS",
    "Change",
    "Fixer",
    "diff_fields",
    "mechanical_fixes",
]

ChangedBy = Literal["code", "llm"]


@dataclass(frozen=True)
class Change:
    """One field changed by a repair: dotted path (``metadata.char_count``), before, after.

    ``before`` and ``after`` are the field's values in the chunk's JSON form (any of the
    schema's types, or a raw value of another tool's file; None where the field was absent)."""

    field: str
    before: JSONValue
    after: JSONValue
    by: ChangedBy = "code"

    def to_dict(self) -> JSONObject:
        return {"field": self.field, "before": self.before, "after": self.after, "by": self.by}


def _flatten(data: JSONObject, prefix: str) -> JSONObject:
    """Field paths one level into nested objects (``metadata.entities.companies``)."""
    out: JSONObject = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and key not in ("source_span",):
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def diff_fields(
    before: JSONObject, after: JSONObject, prefix: str = "", by: ChangedBy = "code"
) -> list[Change]:
    """Changes between two JSON objects, as dotted field paths, in ``after``'s key order."""
    a, b = _flatten(before, prefix), _flatten(after, prefix)
    keys = list(b) + [k for k in a if k not in b]
    return [Change(k, a.get(k), b.get(k), by) for k in keys if a.get(k) != b.get(k)]


# --------------------------------------------------------------------------- mechanical fixes
#
# Each fixer takes a chunk (a deep copy it may edit in place) and the letter context, and
# returns the chunk.  They only recompute what the chunk itself (or the cleaned letter)
# determines; anything needing judgement is left to the validator and the model.

Fixer = Callable[[Chunk, LetterContext | None], Chunk]


def _fix_counts(c: Chunk, ctx: LetterContext | None) -> Chunk:
    c.metadata.char_count = len(c.content)
    c.metadata.token_count = count_tokens(c.content)
    return c


CHUNK_ID_RE = re.compile(r"^(\d{4})-S(\d+)-T([123])-(\d{3})$")


def _fix_tier(c: Chunk, ctx: LetterContext | None) -> Chunk:
    # The id is the identity other chunks link to (parent/child ids), so the tier follows the id.
    m = CHUNK_ID_RE.match(c.chunk_id)
    if m:
        c.metadata.chunk_tier = cast(Literal[1, 2, 3], int(m.group(3)))  # the pattern's [123]
    return c


def _fix_primary_year(c: Chunk, ctx: LetterContext | None) -> Chunk:
    # primary_year never comes from the model; the segmenter sets it to the letter's year.
    md = c.metadata
    md.temporal_references.primary_year = md.letter_year
    return c


def _fix_tables(c: Chunk, ctx: LetterContext | None) -> Chunk:
    md = c.metadata
    for table in md.table_data:
        table.row_count = len(table.rows)
    md.has_table = len(md.table_data) > 0
    # (financial_table on a Tier-1/2 chunk is left to the model: which type it is needs judgement)
    if md.content_type == "financial_table" and md.table_data:
        md.has_financial_data = True  # a financial table is financial data (table.financial_flag)
    if md.chunk_tier == 3 and md.table_data and md.content_type != "financial_table":
        md.content_type = "financial_table"  # §6: Tier-3 chunks with tables
    return c


def _fix_exception(c: Chunk, ctx: LetterContext | None) -> Chunk:
    md = c.metadata
    if md.standalone_exception:
        md.retrieval_priority = "high"  # §2.4 allowed exceptions
    return c


def _fix_concepts(c: Chunk, ctx: LetterContext | None) -> Chunk:
    vocabulary = ctx.vocabulary if ctx is not None else None
    if vocabulary is None:
        vocabulary = load_concepts()
    by_key = {_concept_key(v): v for v in vocabulary}
    out: list[str] = []
    for concept in c.metadata.buffett_concepts:
        fixed = by_key.get(_concept_key(concept), concept)  # unknown stays: semantic
        if fixed not in out:
            out.append(fixed)
    c.metadata.buffett_concepts = out
    return c


def _concept_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text).strip().casefold()


def _fix_span(c: Chunk, ctx: LetterContext | None) -> Chunk:
    text = ctx.cleaned_text if ctx is not None else None
    if not text:
        return c
    span = c.metadata.source_span
    content = c.content
    if text[span.start_char : span.end_char_exclusive] == content or not content:
        return c
    first = text.find(content)
    if first >= 0 and text.find(content, first + 1) < 0:  # only when the place is unambiguous
        span.start_char, span.end_char_exclusive = first, first + len(content)
    return c


def _blank_is_none(note: str | None) -> str | None:
    return None if isinstance(note, str) and not note.strip() else note


def _fix_notes(c: Chunk, ctx: LetterContext | None) -> Chunk:
    md = c.metadata
    md.boundary_note = _blank_is_none(md.boundary_note)  # "" is not a note (rule note.blank)
    md.exception_reason = _blank_is_none(md.exception_reason)
    if md.letter_date == "0000-00-00" and not md.boundary_note:
        md.boundary_note = "letter date unknown"  # §0.3: unknown date -> note it
    return c


def _fix_links(c: Chunk, ctx: LetterContext | None) -> Chunk:
    md = c.metadata
    own = c.chunk_id
    if md.chunk_tier == 1:
        md.parent_chunk_id = None  # a Tier-1 chunk has no parent
    else:
        md.child_chunk_ids = []  # Tier-2/3 chunks are leaves
    if md.parent_chunk_id == own:
        md.parent_chunk_id = None
    md.child_chunk_ids = [i for i in dict.fromkeys(md.child_chunk_ids) if i != own]
    return c


def _fix_entities(c: Chunk, ctx: LetterContext | None) -> Chunk:
    # A name typed a person under companies moves to people, an organisation under people to
    # companies (rules entity.person_in_companies / entity.organisation_in_people), when the
    # list has room under the answer's cap; a place, or a name with no room, is dropped.
    entities = c.metadata.entities
    companies, people = list(entities.companies), list(entities.people)
    kinds = {n: name_kind(n, c.content) for n in dict.fromkeys(companies + people)}
    misfiled_people = [n for n in companies if kinds[n] == "person"]
    misfiled_orgs = [n for n in people if kinds[n] in ("organisation", "place")]
    if not (misfiled_people or misfiled_orgs):
        return c
    companies = [n for n in companies if n not in misfiled_people]
    people = [n for n in people if n not in misfiled_orgs]
    for name in misfiled_people:
        if name not in people and len(people) < MAX_PEOPLE:
            people.append(name)
    for name in misfiled_orgs:
        room = len(companies) < MAX_COMPANIES
        if kinds[name] == "organisation" and name not in companies and room:
            companies.append(name)
    entities.companies, entities.people = companies, people
    return c


def _fix_lists(c: Chunk, ctx: LetterContext | None) -> Chunk:
    md = c.metadata
    md.section_hierarchy = [h for h in md.section_hierarchy if h.strip()] or (
        [md.section_title] if md.section_title.strip() else []
    )
    # first occurrence wins
    md.themes = list(dict.fromkeys(md.themes))
    md.buffett_concepts = list(dict.fromkeys(md.buffett_concepts))
    md.merged_from = list(dict.fromkeys(md.merged_from))
    ent, tr, xr = md.entities, md.temporal_references, md.cross_references
    ent.companies = list(dict.fromkeys(ent.companies))
    ent.people = list(dict.fromkeys(ent.people))
    ent.metrics = list(dict.fromkeys(ent.metrics))
    tr.comparison_years = list(dict.fromkeys(tr.comparison_years))
    xr.related_sections_same_letter = list(dict.fromkeys(xr.related_sections_same_letter))
    xr.related_years = list(dict.fromkeys(xr.related_years))
    return c


# (name, fixer) in the order they run; the names are the ``fixer`` column of the rule table
# (letterchunk.contract.rules.RULES), which says which rules each one repairs.
FIXERS: list[tuple[str, Fixer]] = [
    ("counts", _fix_counts),
    ("tier", _fix_tier),
    ("primary_year", _fix_primary_year),
    ("tables", _fix_tables),
    ("exception", _fix_exception),
    ("concepts", _fix_concepts),
    ("span", _fix_span),
    ("notes", _fix_notes),
    ("links", _fix_links),
    ("entities", _fix_entities),
    ("lists", _fix_lists),
]


def mechanical_fixes(
    chunk: Chunk, context: LetterContext | None = None
) -> tuple[Chunk, list[Change]]:
    """Recompute every mechanically derivable field; return the fixed chunk and the changes.

    Pure: ``chunk`` is not modified.  Idempotent: fixing a fixed chunk changes nothing.
    """
    data = chunk.model_dump(mode="json")
    fixed = chunk.model_copy(deep=True)
    for _name, fixer in FIXERS:
        fixed = fixer(fixed, context)
    after = fixed.model_dump(mode="json")
    if after == data:
        return chunk, []
    # loaded again from JSON: what a fixer set must pass the strict schema like any chunk
    return Chunk.model_validate(after), diff_fields(data, after)
