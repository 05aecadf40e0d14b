"""Mechanical fixes: recompute by code what the chunk itself (or the cleaned letter) determines.

Counts, flags, defaults, ``has_table`` vs ``table_data``, ``row_count``, tier vs id,
``primary_year``, exception priority, concept spelling, spans, notes, links, entity names filed
under the wrong list (by :func:`letterchunk.contract.names.name_kind`) and duplicate list
items: :func:`mechanical_fixes` applies every fixer in :data:`FIXERS` (pure functions, no LLM) and
returns every change it made as a :class:`Change`.  Anything needing judgement is left to the
validator and the model.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

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
    """One field changed by a repair: dotted path (``metadata.char_count``), before, after."""

    field: str
    before: Any
    after: Any
    by: ChangedBy = "code"

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after, "by": self.by}


def _flatten(data: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Field paths one level into nested objects (``metadata.entities.companies``)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and key not in ("source_span",):
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def diff_fields(
    before: dict[str, Any], after: dict[str, Any], prefix: str = "", by: ChangedBy = "code"
) -> list[Change]:
    """Changes between two JSON-like dicts, as dotted field paths, in ``after``'s key order."""
    a, b = _flatten(before, prefix), _flatten(after, prefix)
    keys = list(b) + [k for k in a if k not in b]
    return [Change(k, a.get(k), b.get(k), by) for k in keys if a.get(k) != b.get(k)]


# --------------------------------------------------------------------------- mechanical fixes
#
# Each fixer takes the chunk as a JSON dict (a deep copy it may edit) and the letter context,
# and returns the dict.  They only recompute what the chunk itself (or the cleaned letter)
# determines; anything needing judgement is left to the validator and the model.

Fixer = Callable[[dict[str, Any], LetterContext | None], dict[str, Any]]


def _fix_counts(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    md["char_count"] = len(d["content"])
    md["token_count"] = count_tokens(d["content"])
    return d


CHUNK_ID_RE = re.compile(r"^(\d{4})-S(\d+)-T([123])-(\d{3})$")


def _fix_tier(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    # The id is the identity other chunks link to (parent/child ids), so the tier follows the id.
    m = CHUNK_ID_RE.match(d["chunk_id"])
    if m:
        d["metadata"]["chunk_tier"] = int(m.group(3))
    return d


def _fix_primary_year(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    # primary_year never comes from the model; the segmenter sets it to the letter's year.
    md = d["metadata"]
    md["temporal_references"]["primary_year"] = md["letter_year"]
    return d


def _fix_tables(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    for table in md["table_data"]:
        table["row_count"] = len(table["rows"])
    md["has_table"] = len(md["table_data"]) > 0
    # (financial_table on a Tier-1/2 chunk is left to the model: which type it is needs judgement)
    if md["content_type"] == "financial_table" and md["table_data"]:
        md["has_financial_data"] = (
            True  # a financial table is financial data (table.financial_flag)
        )
    if md["chunk_tier"] == 3 and md["table_data"] and md["content_type"] != "financial_table":
        md["content_type"] = "financial_table"  # §6: Tier-3 chunks with tables
    return d


def _fix_exception(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    if md["standalone_exception"]:
        md["retrieval_priority"] = "high"  # §2.4 allowed exceptions
    return d


def _fix_concepts(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    vocabulary = ctx.vocabulary if ctx is not None else None
    if vocabulary is None:
        vocabulary = load_concepts()
    by_key = {_concept_key(c): c for c in vocabulary}
    out: list[str] = []
    for concept in d["metadata"]["buffett_concepts"]:
        fixed = by_key.get(_concept_key(concept), concept)  # unknown stays: semantic
        if fixed not in out:
            out.append(fixed)
    d["metadata"]["buffett_concepts"] = out
    return d


def _concept_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text).strip().casefold()


def _fix_span(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    text = ctx.cleaned_text if ctx is not None else None
    if not text:
        return d
    span = d["metadata"]["source_span"]
    content = d["content"]
    if text[span["start_char"] : span["end_char_exclusive"]] == content or not content:
        return d
    first = text.find(content)
    if first >= 0 and text.find(content, first + 1) < 0:  # only when the place is unambiguous
        span["start_char"], span["end_char_exclusive"] = first, first + len(content)
    return d


def _fix_notes(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    for key in ("boundary_note", "exception_reason"):
        if isinstance(md[key], str) and not md[key].strip():
            md[key] = None  # "" is not a note (rule note.blank)
    if md["letter_date"] == "0000-00-00" and not md["boundary_note"]:
        md["boundary_note"] = "letter date unknown"  # §0.3: unknown date -> note it
    return d


def _fix_links(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    own = d["chunk_id"]
    if md["chunk_tier"] == 1:
        md["parent_chunk_id"] = None  # a Tier-1 chunk has no parent
    else:
        md["child_chunk_ids"] = []  # Tier-2/3 chunks are leaves
    if md["parent_chunk_id"] == own:
        md["parent_chunk_id"] = None
    md["child_chunk_ids"] = [c for c in dict.fromkeys(md["child_chunk_ids"]) if c != own]
    return d


def _fix_entities(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    # A name typed a person under companies moves to people, an organisation under people to
    # companies (rules entity.person_in_companies / entity.organisation_in_people), when the
    # list has room under the answer's cap; a place, or a name with no room, is dropped.
    entities = d["metadata"]["entities"]
    companies, people = list(entities["companies"]), list(entities["people"])
    kinds = {n: name_kind(n, d["content"]) for n in dict.fromkeys(companies + people)}
    misfiled_people = [n for n in companies if kinds[n] == "person"]
    misfiled_orgs = [n for n in people if kinds[n] in ("organisation", "place")]
    if not (misfiled_people or misfiled_orgs):
        return d
    companies = [n for n in companies if n not in misfiled_people]
    people = [n for n in people if n not in misfiled_orgs]
    for name in misfiled_people:
        if name not in people and len(people) < MAX_PEOPLE:
            people.append(name)
    for name in misfiled_orgs:
        room = len(companies) < MAX_COMPANIES
        if kinds[name] == "organisation" and name not in companies and room:
            companies.append(name)
    entities["companies"], entities["people"] = companies, people
    return d


def _fix_lists(d: dict[str, Any], ctx: LetterContext | None) -> dict[str, Any]:
    md = d["metadata"]
    md["section_hierarchy"] = [h for h in md["section_hierarchy"] if h.strip()] or (
        [md["section_title"]] if md["section_title"].strip() else []
    )
    for holder, key in (
        (md, "themes"),
        (md, "buffett_concepts"),
        (md, "merged_from"),
        (md["entities"], "companies"),
        (md["entities"], "people"),
        (md["entities"], "metrics"),
        (md["temporal_references"], "comparison_years"),
        (md["cross_references"], "related_sections_same_letter"),
        (md["cross_references"], "related_years"),
    ):
        holder[key] = list(dict.fromkeys(holder[key]))  # first occurrence wins
    return d


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
    fixed = copy.deepcopy(data)
    for _name, fixer in FIXERS:
        fixed = fixer(fixed, context)
    if fixed == data:
        return chunk, []
    return Chunk.model_validate(fixed), diff_fields(data, fixed)
