"""Repair: make an enriched chunk valid, or fail loudly (seed 000 §3.2 "repair or halt").

Two kinds of fixes, chosen by the ``kind`` of each violated rule in :data:`validate.RULES`:

* **mechanical** — counts, flags, defaults, ``has_table`` vs ``table_data``, ``row_count``,
  tier vs id, ``primary_year``, exception priority, concept spelling: :func:`mechanical_fixes`
  recomputes them by code (pure functions, no LLM) and returns every change it made.
* **semantic** — ungrounded evidence or entity, concept outside the vocabulary, wrong enum,
  summary too long, …, and a failed answer (malformed JSON, truncated output, refusal,
  schema-invalid): :func:`repair_enriched` re-asks the model with a *deep copy* of the original
  conversation, the previous answer, and one message (``prompts/reask.md``) that names only the
  failing fields; the response model holds only those fields, and only they are taken from the
  answer.  Attempts are bounded; token usage is summed over every attempt, failed ones included.

When the attempts run out the chunk is never returned half-fixed: ``on_failure="halt"`` raises
:class:`~letterchunk.errors.RepairExhausted` (after the report records are written),
``"skip"`` returns a result whose ``chunk`` is ``None`` so the caller writes nothing for it.

Transport faults (429, 5xx, timeouts, resets) are retried inside ``LLMClient.complete`` and never
count as repair attempts; when they are exhausted its ``BackendError`` propagates unchanged.

Every attempt produces one report record (:class:`letterchunk.report.core.RepairReport` appends
them to
``DIR/YYYY.report.jsonl``, each with the ``run_id`` of the run)::

    {"chunk_id", "letter_year", "attempt", "kind": "enrich"|"reask"|"file"|"check",
     "asked_fields", "violations": [{"code", "field", "message", "severity", "rule_kind",
                                     "fixed"}],
     "changes": [{"field", "before", "after", "by": "code"|"llm"}],
     "usage": {"prompt_tokens", "completion_tokens"}, "latency_s", "source", "error",
     "outcome": "valid"|"repaired"|"retry"|"failed"|"needs-llm", "span", "content"?}
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from letterchunk.contract.schema import Chunk
from letterchunk.errors import LetterchunkError, RepairExhausted
from letterchunk.redact import redact_obj
from letterchunk.runner import layout
from letterchunk.text.tokens import count_tokens

__all__ = [
    "Change",
    "RepairResult",
    "OnFailure",
    "mechanical_fixes",
    "normalize_record",
    "repair_enriched",
    "enrich_chunk",
    "repair_file",
    "refuse_unusable",
    "FileRepair",
    "reask_messages",
    "partial_model",
    "fields_for",
    "response_violation",
    "rule_kind",
    "check",
    "diff_fields",
    "FIXERS",
    "COUPLED",
    "RESPONSE_RULES",
    "DROPPABLE",
]

log = logging.getLogger(__name__)

OnFailure = Literal["halt", "skip"]
Outcome = Literal["valid", "repaired", "failed", "needs-llm"]

# Pseudo-rules for an answer that could not be used at all (no value came back).  They are
# semantic: only the model can fix them, by answering again.
RESPONSE_RULES: dict[str, str] = {
    "response.truncated": "the answer was cut off by the token limit (finish_reason=length)",
    "response.refused": "the model refused to answer",
    "response.malformed": "the answer is not valid JSON",
    "response.schema": "the answer does not match the response schema",
}


# --------------------------------------------------------------------------- small records


@dataclass(frozen=True)
class Change:
    """One field changed by a repair: dotted path (``metadata.char_count``), before, after."""

    field: str
    before: Any
    after: Any
    by: Literal["code", "llm"] = "code"

    def to_dict(self) -> dict:
        return {"field": self.field, "before": self.before, "after": self.after, "by": self.by}


@dataclass
class RepairResult:
    """What became of one chunk.  ``chunk`` is None exactly when ``outcome`` is not
    valid/repaired."""

    chunk_id: str
    outcome: Outcome
    chunk: Chunk | None
    evidence: dict | None
    attempts: int  # model calls for this chunk, the first enrichment included
    usage: Any  # llm.Usage summed over every call, failed ones included
    records: list[dict] = field(default_factory=list)
    violations: list[Any] = field(default_factory=list)  # what is still wrong when failed

    @property
    def ok(self) -> bool:
        return self.chunk is not None


def rule_kind(code: str) -> str:
    """``kind`` of a rule code: mechanical / semantic / corpus / input (response.* are semantic)."""
    if code in RESPONSE_RULES:
        return "semantic"
    from letterchunk.contract.validate import RULES

    entry = RULES.get(code)
    return entry[2] if entry else "semantic"


def _violation_dict(v: Any) -> dict:
    code = getattr(v, "code", "?")
    return {
        "code": code,
        "field": getattr(v, "field", None),
        "message": getattr(v, "message", str(v)),
        "severity": getattr(v, "severity", "error"),
        "rule_kind": rule_kind(code),
    }


def _errors(violations: Iterable[Any]) -> list[Any]:
    return [v for v in violations if getattr(v, "severity", "error") == "error"]


# --------------------------------------------------------------------------- diffs


def _flatten(data: dict, prefix: str) -> dict[str, Any]:
    """Field paths one level into nested objects (``metadata.entities.companies``)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and key not in ("source_span",):
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def diff_fields(before: dict, after: dict, prefix: str = "", by: str = "code") -> list[Change]:
    """Changes between two JSON-like dicts, as dotted field paths, in ``after``'s key order."""
    a, b = _flatten(before, prefix), _flatten(after, prefix)
    keys = list(b) + [k for k in a if k not in b]
    return [Change(k, a.get(k), b.get(k), by) for k in keys if a.get(k) != b.get(k)]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- mechanical fixes
#
# Each fixer takes the chunk as a JSON dict (a deep copy it may edit) and the letter context,
# and returns the dict.  They only recompute what the chunk itself (or the cleaned letter)
# determines; anything needing judgement is left to the validator and the model.

Fixer = Callable[[dict, Any], dict]


def _fix_counts(d: dict, ctx: Any) -> dict:
    md = d["metadata"]
    md["char_count"] = len(d["content"])
    md["token_count"] = count_tokens(d["content"])
    return d


_ID_RE = re.compile(r"^(\d{4})-S(\d+)-T([123])-(\d{3})$")


def _fix_tier(d: dict, ctx: Any) -> dict:
    # The id is the identity other chunks link to (parent/child ids), so the tier follows the id.
    m = _ID_RE.match(d["chunk_id"])
    if m:
        d["metadata"]["chunk_tier"] = int(m.group(3))
    return d


def _fix_primary_year(d: dict, ctx: Any) -> dict:
    # primary_year never comes from the model; the segmenter sets it to the letter's year.
    md = d["metadata"]
    md["temporal_references"]["primary_year"] = md["letter_year"]
    return d


def _fix_tables(d: dict, ctx: Any) -> dict:
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


def _fix_exception(d: dict, ctx: Any) -> dict:
    md = d["metadata"]
    if md["standalone_exception"]:
        md["retrieval_priority"] = "high"  # §2.4 allowed exceptions
    return d


def _fix_concepts(d: dict, ctx: Any) -> dict:
    vocabulary = getattr(ctx, "vocabulary", None)
    if vocabulary is None:
        from letterchunk.contract.vocabulary import load_concepts

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


def _fix_span(d: dict, ctx: Any) -> dict:
    text = getattr(ctx, "cleaned_text", None)
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


def _fix_notes(d: dict, ctx: Any) -> dict:
    md = d["metadata"]
    for key in ("boundary_note", "exception_reason"):
        if isinstance(md[key], str) and not md[key].strip():
            md[key] = None  # "" is not a note (rule note.blank)
    if md["letter_date"] == "0000-00-00" and not md["boundary_note"]:
        md["boundary_note"] = "letter date unknown"  # §0.3: unknown date -> note it
    return d


def _fix_links(d: dict, ctx: Any) -> dict:
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


def _fix_lists(d: dict, ctx: Any) -> dict:
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
    ("lists", _fix_lists),
]


def mechanical_fixes(chunk: Chunk, context: Any = None) -> tuple[Chunk, list[Change]]:
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


# --------------------------------------------------------------------------- raw records
# `letterchunk repair` reads other tools' files: fix the shape before the strict model sees it.


def normalize_record(raw: Any) -> tuple[dict, list[Change]]:
    """Fix the shape of one raw JSON chunk so the strict schema can load it (§0: "use defaults").

    Fills missing keys with the §0.2 defaults, turns ``null``/dict where a list belongs into a
    list, numeric strings into ints, "true"/"false" into bools, and removes unknown keys — each
    recorded as a Change, so nothing is dropped silently.  Fields that cannot be derived stay
    missing and the schema error names them.
    """
    from letterchunk.contract.schema import Metadata

    if not isinstance(raw, dict):
        return raw, []
    before = copy.deepcopy(raw)
    d = copy.deepcopy(raw)
    for key in list(d):
        if key not in ("chunk_id", "content", "metadata"):
            del d[key]
    md = d.get("metadata")
    if not isinstance(md, dict):
        return d, diff_fields(before, d)
    m = _ID_RE.match(str(d.get("chunk_id", "")))
    year = int(m.group(1)) if m else md.get("letter_year")
    tier = int(m.group(3)) if m else md.get("chunk_tier")
    content = d.get("content") if isinstance(d.get("content"), str) else None

    defaults: dict[str, Any] = {
        "letter_year": year,
        "chunk_tier": tier,
        "source_file": layout.cleaned_name(year) if year else None,
        "content_type": "financial_table" if tier == 3 else "narrative",
        "section_hierarchy": [],
        "temporal_references": {"primary_year": year} if year else None,
        "char_count": len(content) if content is not None else None,
        "token_count": count_tokens(content) if content is not None else None,
    }
    for key, fld in Metadata.model_fields.items():
        if key in md:
            continue
        if not fld.is_required():
            md[key] = fld.get_default(call_default_factory=True)
            if isinstance(md[key], BaseModel):
                md[key] = md[key].model_dump(mode="json")
        elif defaults.get(key) is not None:
            md[key] = defaults[key]
    if "letter_date" not in md:
        md["letter_date"] = "0000-00-00"
        if not md.get("boundary_note"):
            md["boundary_note"] = "letter date unknown"
    for key in (
        "child_chunk_ids",
        "themes",
        "buffett_concepts",
        "principles",
        "merged_from",
        "section_hierarchy",
        "table_data",
    ):
        if md.get(key) is None and key in md:
            md[key] = []
    if isinstance(md.get("table_data"), dict):
        md["table_data"] = [md["table_data"]]
    for key in ("letter_year", "chunk_tier", "token_count", "char_count"):
        if isinstance(md.get(key), str) and md[key].strip().isdigit():
            md[key] = int(md[key])
    for key in ("has_table", "has_financial_data", "standalone_exception"):
        if isinstance(md.get(key), str) and md[key].strip().lower() in ("true", "false"):
            md[key] = md[key].strip().lower() == "true"
    for key, sub in (
        ("entities", ("companies", "people", "metrics")),
        ("cross_references", ("related_sections_same_letter", "related_years")),
    ):
        if isinstance(md.get(key), dict):
            for s in sub:
                if md[key].get(s) is None:
                    md[key][s] = []
    tr = md.get("temporal_references")
    if isinstance(tr, dict):
        tr.setdefault("primary_year", year)
        if tr.get("comparison_years") is None:
            tr["comparison_years"] = []
        tr.setdefault("future_outlook", False)
    for key in list(md):
        if key not in Metadata.model_fields:
            del md[key]
    return d, diff_fields(before, d)


# --------------------------------------------------------------------------- re-ask pieces


def _enrichment_model() -> type[BaseModel]:
    from letterchunk.enrich import Enrichment

    return Enrichment


def _field_map() -> dict[str, list[str]]:
    """metadata / sidecar path -> response fields that fill it (``enrich.FIELDS``,
    ``EVIDENCE_FIELDS``)."""
    from letterchunk import enrich

    out: dict[str, list[str]] = {}
    for name, target in getattr(enrich, "FIELDS", {}).items():
        if target:
            out.setdefault(target, []).append(name)
    for key, name in getattr(enrich, "EVIDENCE_FIELDS", {}).items():
        out.setdefault(key, []).append(name)
    return out


# Rules that reject one value the model chose for a list (an entity, a concept, a year, a
# section, a quote).  The rejected value leaves the field's enums in every later re-ask
# (partial_model's ``exclude``), so the grammar cannot offer it again; and when the re-asks are
# spent and only such rules still fail, code drops the rejected items and records the change
# (the last resort: losing one company name beats halting a corpus run).  rule -> what goes.
DROPPABLE: dict[str, str] = {
    "entity.not_found": "the entity name from entities.companies / entities.people",
    "concept.unknown": "the concept from buffett_concepts",
    "year.comparison_not_found": "the year from temporal_references.comparison_years",
    "xref.year_range": "the year from cross_references.related_years",
    "xref.unknown_section": "the title from cross_references.related_sections_same_letter",
    "xref.self_section": "the title from cross_references.related_sections_same_letter",
    "evidence.not_found": "the quote from the content_type_evidence sidecar list",
    "evidence.too_short": "the quote (a principle's quote takes its principle along)",
    "evidence.principle_not_found": "the principle and its quote",
    "principle.empty": "the principle and its quote",
}


def _rejected_value(violation: Any, data: dict, evidence: dict | None) -> Any:
    """The value a DROPPABLE violation rejected (``data`` is the chunk as JSON), or None."""
    parts = (getattr(violation, "field", None) or "").split(".")
    node: Any = (
        data.get("metadata")
        if parts[0] == "metadata"
        else (evidence if parts[0] == "evidence" else None)
    )
    for part in parts[1:]:
        try:
            node = node[int(part)] if part.isdigit() else node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node if isinstance(node, (str, int)) else None


def _drop_rejected(
    chunk: Chunk, evidence: dict | None, violations: list[Any], context: Any
) -> tuple[Chunk, dict | None, list[Change]] | None:
    """The last resort: ``chunk`` without the list items behind ``violations``, when every one
    is DROPPABLE and the result is valid; None otherwise (the caller fails the chunk)."""
    if not violations or any(v.code not in DROPPABLE for v in violations):
        return None
    data = chunk.model_dump(mode="json")
    ev = copy.deepcopy(evidence) if evidence is not None else None
    drops: dict[tuple[str, ...], set[int]] = {}
    for v in violations:
        parts = (v.field or "").split(".")
        at = next((k for k, p in enumerate(parts) if p.isdigit()), None)
        if at is None:
            return None
        where = tuple(parts[:at])
        if where == ("evidence", "principle_evidence"):  # a principle goes with its quote
            where = ("metadata", "principles")
        drops.setdefault(where, set()).add(int(parts[at]))
        if where == ("metadata", "principles"):
            drops.setdefault(("evidence", "principle_evidence"), set()).add(int(parts[at]))
    changes: list[Change] = []
    for where, indexes in drops.items():
        node: Any = data["metadata"] if where[0] == "metadata" else ev
        for key in where[1:]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, list):
            if where[0] == "evidence":
                continue  # no sidecar list to drop from
            return None
        before = copy.deepcopy(node)
        node[:] = [item for i, item in enumerate(node) if i not in indexes]
        changes.append(Change(".".join(where), before, copy.deepcopy(node), "code"))
    fixed = Chunk.model_validate(data)
    fixed, fixes, errors, _found = check(fixed, ev, context)
    if errors:
        return None
    return fixed, ev, changes + fixes


# Rules whose fix needs two fields answered together (a tag and the quote behind it).
COUPLED: dict[str, tuple[str, ...]] = {
    "evidence.missing": ("content_type", "content_type_evidence"),
    "evidence.principle_missing": ("principles",),
}


def fields_for(violation: Any, model: type[BaseModel] | None = None) -> list[str]:
    """The Enrichment fields a violation points at; [] when the model cannot fix it."""
    model = model or _enrichment_model()
    path = getattr(violation, "field", None) or ""
    for prefix in ("metadata.", "evidence."):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    path = ".".join(
        p for p in re.sub(r"\[(\d+)\]", r".\1", path).split(".") if p and not p.isdigit()
    )  # metadata.principles.0.statement -> principles.statement
    coupled = [
        f for f in COUPLED.get(getattr(violation, "code", ""), ()) if f in model.model_fields
    ]
    if coupled:
        return coupled
    if not path:
        return []
    head = path.split(".")[0]
    if head in model.model_fields:
        return [head]
    mapping = _field_map()
    parts = path.split(".")
    for n in range(len(parts), 0, -1):  # longest metadata path that a field fills
        names = mapping.get(".".join(parts[:n]))
        if names:
            return [x for x in names if x in model.model_fields]
    return []


def partial_model(
    fields: list[str], model: type[BaseModel] | None = None, exclude: dict[str, set] | None = None
) -> type[BaseModel]:
    """A response model with only ``fields`` of the Enrichment model, all required.

    ``exclude`` maps a field to values the validator rejected: they leave that field's enums
    (``enrich.without_choices``), so a grammar cannot offer the same rejected answer again.
    """
    from letterchunk.enrich import without_choices

    model = model or _enrichment_model()
    # (annotation, FieldInfo) keeps the per-chunk narrowing (enums over the vocabulary, the
    # letter's section titles, the chunk's years) and the length caps of the full model.
    definitions = {}
    for name in fields:
        info = model.model_fields[name]
        narrowed = without_choices(info.annotation, info, (exclude or {}).get(name, ()))
        definitions[name] = narrowed or (info.annotation, info)
    return create_model(  # type: ignore[call-overload]
        f"{model.__name__}Fix",
        __config__=ConfigDict(extra="forbid"),
        **definitions,
    )


def reask_messages(
    messages: list[dict], previous_answer: str, fields: list[str], violations: list[Any]
) -> list[dict]:
    """A deep copy of ``messages`` + the previous answer + one message naming only ``fields``.

    Pure: the caller's list and dicts are never touched (instructor once mutated them).
    """
    from letterchunk.llm.prompts import render

    lines = []
    for v in violations:
        where = getattr(v, "field", None) or ", ".join(fields)
        lines.append(f"- {where}: {getattr(v, 'message', str(v))} [{getattr(v, 'code', '?')}]")
    out = copy.deepcopy(messages)
    out.append({"role": "assistant", "content": previous_answer or ""})
    out.append(
        {
            "role": "user",
            "content": render("reask", fields=", ".join(fields), violations="\n".join(lines)),
        }
    )
    return out


def response_violation(completion: Any, chunk_id: str) -> Any:
    """A pseudo-violation for an answer that came back without a usable value."""
    from letterchunk.contract.validate import Violation

    error = (getattr(completion, "error", None) or "").strip()
    low = error.lower()
    if (
        getattr(completion, "finish_reason", None) == "length"
        or "truncat" in low
        or "length" in low
    ):
        code = "response.truncated"
    elif "refus" in low:
        code = "response.refused"
    elif "json" in low and (
        "decode" in low
        or "malformed" in low
        or "invalid json" in low
        or "expecting" in low
        or "parse" in low
    ):
        code = "response.malformed"
    else:
        code = "response.schema"
    message = f"{RESPONSE_RULES[code]}: {error}" if error else RESPONSE_RULES[code]
    return Violation(code=code, severity="error", message=message[:500], chunk_id=chunk_id)


# --------------------------------------------------------------------------- the loop


def _with_evidence(context: Any, chunk_id: str, record: dict | None) -> Any:
    if context is None:
        from letterchunk.contract.validate import LetterContext

        context = LetterContext()
    evidence = dict(getattr(context, "evidence", None) or {})
    if record is None:
        evidence.pop(chunk_id, None)
    else:
        evidence[chunk_id] = record
    return dataclasses.replace(context, evidence=evidence)


def check(
    chunk: Chunk, evidence: dict | None, context: Any
) -> tuple[Chunk, list[Change], list[Any], list[Any]]:
    """Validate, apply mechanical fixes when a mechanical rule fails, validate again.

    Returns the (possibly fixed) chunk, the code's changes, the error-level violations left, and
    the error-level violations found before the fixes (what the report counts).
    """
    from letterchunk.contract.validate import validate_chunk

    ctx = _with_evidence(context, chunk.chunk_id, evidence)
    found = errors = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
    changes: list[Change] = []
    if any(rule_kind(v.code) == "mechanical" for v in errors):
        chunk, changes = mechanical_fixes(chunk, ctx)
        if changes:
            errors = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
    return chunk, changes, errors, found


def _violation_dicts(found: list[Any], remaining: list[Any]) -> list[dict]:
    """Every violation seen in one attempt; ``fixed`` tells whether code fixed it there."""
    key = lambda v: (v.code, getattr(v, "field", None), v.message)  # noqa: E731
    left = {key(v) for v in remaining}
    out, seen = [], set()
    for v in list(found) + list(remaining):
        if key(v) in seen:
            continue
        seen.add(key(v))
        out.append({**_violation_dict(v), "fixed": key(v) not in left})
    return out


def repair_enriched(
    chunk: Chunk,
    *,
    messages: list[dict],
    first: Any,
    context: Any,
    client: Any,
    model: type[BaseModel] | None = None,
    max_attempts: int = 2,
    on_failure: OnFailure = "halt",
    source: str | None = None,
    report: Any = None,
    first_kind: str = "enrich",
) -> RepairResult:
    """Turn the first enrichment answer for ``chunk`` into a valid chunk, re-asking if needed.

    ``chunk`` is the segmented chunk ``messages`` were built for; ``first`` the ``Completion``
    those messages produced with ``model`` (``enrich.response_model_for(chunk, ctx)``;
    default: the type of ``first.value``, else Enrichment/TableEnrichment by tier);
    ``context`` the letter's ``validate.LetterContext``; ``client`` anything with
    ``complete(messages, response_model, *, chunk_id) -> Completion``.
    ``max_attempts`` bounds the *re-asks* (model calls after the first).  ``source`` overrides
    the "live" label of answers (e.g. "cassette" under vcrpy replay).  Records go to
    ``report.add(records)`` (a :class:`letterchunk.report.core.RepairReport`) before anything is
    raised, and travel on the result (and on ``RepairExhausted.records``).

    An answer that fails the response schema is salvaged field by field: fields that validate
    are kept, and only the others are asked again.
    """
    from letterchunk.enrich import apply_enrichment, evidence_record

    if max_attempts < 0:
        raise ValueError("max_attempts must be >= 0")
    model = model or _default_model(chunk, first)
    chunk_id = chunk.chunk_id
    year = chunk.metadata.letter_year
    span = [chunk.metadata.source_span.start_char, chunk.metadata.source_span.end_char_exclusive]
    original = copy.deepcopy(messages)  # the caller's list is never touched
    usage = first.usage
    records: list[dict] = []

    data: dict[str, Any] = {}  # field values accepted so far (python objects of the model)
    seen: dict[str, Any] = {}  # the model's latest answer per field, as JSON (for the report)
    completion = first
    asked = list(model.model_fields)
    attempt = 1
    rejected: dict[str, set] = {}  # response field -> values the validator rejected so far

    while True:
        rec: dict[str, Any] = {
            "chunk_id": chunk_id,
            "letter_year": year,
            "attempt": attempt,
            "kind": first_kind if attempt == 1 else "reask",
            "asked_fields": asked if attempt > 1 else [],
            "violations": [],
            "changes": [],
            "usage": _usage_dict(completion.usage),
            "latency_s": round(float(getattr(completion, "latency_s", 0.0) or 0.0), 4),
            "source": _source(completion, source),
            "error": getattr(completion, "error", None),
            "outcome": "retry",
            "span": span,
        }
        records.append(rec)
        changes: list[Change] = []
        targets: list[str] = []
        found: list[Any] = []
        checked: tuple[Chunk, dict] | None = None  # the validated chunk and its evidence

        # 1. what this answer contributes, field by field
        new, violations, raw_values = _answer_fields(completion, asked, model, chunk_id)
        data.update(new)
        if attempt > 1:  # what the model changed in the fields it was asked again
            changes += [
                Change(f"answer.{f}", seen.get(f), raw_values[f], "llm")
                for f in asked
                if f in raw_values and raw_values[f] != seen.get(f)
            ]
        seen.update(raw_values)
        missing = [f for f in model.model_fields if f not in data]
        if violations:  # unusable answer, or fields that failed the schema: ask them again
            named = [v.field for v in violations if v.field in model.model_fields]
            targets = list(dict.fromkeys(named)) or list(asked)
        elif missing:
            targets = missing
            violations = [
                _field_violation("response.schema", f, "no value given", chunk_id) for f in targets
            ]
        else:
            merged = None
            try:
                merged = model.model_validate(data)
            except ValidationError as exc:  # a cross-field rule of the model
                bad = _bad_fields(exc, model)
                violations = [
                    _field_violation("response.schema", f, m, chunk_id) for f, m in bad.items()
                ]
                targets = list(bad) or list(model.model_fields)
                for f in targets:
                    data.pop(f, None)
            raw = None
            if merged is not None:
                try:
                    raw = apply_enrichment(chunk, merged)
                except ValidationError as exc:  # the answer cannot live in a canonical chunk
                    bad = _bad_fields(exc, model)
                    violations = [
                        _field_violation("response.schema", f, m, chunk_id) for f, m in bad.items()
                    ] or [
                        _field_violation(
                            "response.schema", None, str(exc.errors()[0].get("msg")), chunk_id
                        )
                    ]
                    targets = list(bad) or list(asked)
            if raw is not None and merged is not None:
                # 2. apply to the segmented chunk, let code fix what is mechanical, validate
                ev = evidence_record(chunk_id, merged)
                fixed, fixes, violations, found = check(raw, ev, context)
                checked = (fixed, ev)
                changes += fixes
                if not violations:
                    rec["violations"] = _violation_dicts(found, [])
                    rec["changes"] = [c.to_dict() for c in changes]
                    outcome: Outcome = "valid" if attempt == 1 and not changes else "repaired"
                    rec["outcome"] = outcome
                    _emit(report, records)
                    return RepairResult(chunk_id, outcome, fixed, ev, attempt, usage, records, [])
        rec["violations"] = _violation_dicts(found, violations)
        rec["changes"] = [c.to_dict() for c in changes]

        # 3. which fields the model must answer again (none when code or nobody can fix it)
        unfixable = [v for v in violations if rule_kind(v.code) != "semantic"]
        if not targets and not unfixable:
            for v in violations:
                names = fields_for(v, model)
                if not names:
                    unfixable.append(v)
                targets += [n for n in names if n not in targets]
        if unfixable:
            log.warning(
                "%s: %d violation(s) the model cannot fix: %s",
                chunk_id,
                len(unfixable),
                ", ".join(sorted({v.code for v in unfixable})),
            )
        if checked is not None:  # values the validator rejected leave the re-ask's enums
            data_now = checked[0].model_dump(mode="json")
            for v in violations:
                value = _rejected_value(v, data_now, checked[1]) if v.code in DROPPABLE else None
                if value is not None:
                    for name in fields_for(v, model):
                        rejected.setdefault(name, set()).add(value)
        if unfixable or attempt > max_attempts:
            dropped = (
                None
                if unfixable or checked is None
                else _drop_rejected(checked[0], checked[1], violations, context)
            )
            if dropped is not None:
                fixed, dropped_ev, drop_changes = dropped
                log.info(
                    "%s: dropped what the model could not ground after %d attempt(s): %s",
                    chunk_id,
                    attempt,
                    ", ".join(sorted({v.code for v in violations})),
                )
                rec["violations"] = _violation_dicts(list(found) + list(violations), [])
                rec["changes"] += [c.to_dict() for c in drop_changes]
                rec["outcome"] = "repaired"
                _emit(report, records)
                return RepairResult(
                    chunk_id, "repaired", fixed, dropped_ev, attempt, usage, records, []
                )
            rec["outcome"] = "failed"
            rec["content"] = chunk.content  # not in the output: the report shows it from here
            _emit(report, records)
            if on_failure == "halt":
                exhausted = RepairExhausted(chunk_id, attempt, violations, usage)
                exhausted.records = records  # for the report writer
                raise exhausted
            return RepairResult(chunk_id, "failed", None, None, attempt, usage, records, violations)

        # 4. re-ask: deep copy of the conversation + previous answer + only the failing fields
        convo = reask_messages(original, completion.raw_text or "", targets, violations)
        asked = targets
        attempt += 1
        try:
            completion = client.complete(
                convo, partial_model(targets, model, rejected), chunk_id=chunk_id
            )
        except LetterchunkError as exc:  # backend gone, budget cap: let the caller report it
            exc.records = records  # type: ignore[attr-defined]
            exc.usage = usage  # type: ignore[attr-defined]
            raise
        usage = usage + completion.usage


def _answer_fields(
    completion: Any, asked: list[str], model: type[BaseModel], chunk_id: str
) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """(valid field values, violations, raw JSON values) of one answer to ``asked`` fields.

    A valid answer gives all its fields.  An answer that failed the schema is parsed again and
    every field that validates on its own is kept; truncated, refused or non-JSON answers give
    nothing.
    """
    if completion.value is not None:
        value = completion.value
        names = [f for f in type(value).model_fields if f in model.model_fields]
        dumped = value.model_dump(mode="json")
        return {f: getattr(value, f) for f in names}, [], {f: dumped[f] for f in names}
    error = (getattr(completion, "error", None) or "").lower()
    usable = not (
        getattr(completion, "finish_reason", None) == "length"
        or "truncat" in error
        or "refus" in error
    )
    parsed = None
    if usable:
        try:
            parsed = json.loads(completion.raw_text or "")
        except (json.JSONDecodeError, TypeError):
            parsed = None
    if not isinstance(parsed, dict):
        return {}, [response_violation(completion, chunk_id)], {}
    raw = {f: parsed[f] for f in asked if f in parsed}
    good: dict[str, Any] = {}
    bad: dict[str, str] = {}
    for name in asked:
        if name not in parsed:
            bad[name] = "missing from the answer"
            continue
        one = partial_model([name], model)
        try:
            good[name] = getattr(one.model_validate({name: parsed[name]}), name)
        except ValidationError as exc:
            errs = exc.errors()
            bad[name] = str(errs[0]["msg"]) if errs else str(exc)
    if not bad:  # every asked field is valid alone: extra keys are simply not taken
        return good, [], raw
    return good, [_field_violation("response.schema", f, m, chunk_id) for f, m in bad.items()], raw


def _bad_fields(exc: ValidationError, model: type[BaseModel]) -> dict[str, str]:
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc") or ()
        if loc and loc[0] in model.model_fields:
            out.setdefault(str(loc[0]), str(err.get("msg")))
    return out


def _field_violation(code: str, fld: str | None, message: str, chunk_id: str) -> Any:
    from letterchunk.contract.validate import Violation

    text = f"{RESPONSE_RULES[code]}: {message}" if code in RESPONSE_RULES else message
    return Violation(code=code, severity="error", message=text[:500], chunk_id=chunk_id, field=fld)


def _default_model(chunk: Chunk, first: Any) -> type[BaseModel]:
    if getattr(first, "value", None) is not None:
        return type(first.value)
    from letterchunk.enrich import Enrichment, TableEnrichment

    return TableEnrichment if chunk.metadata.chunk_tier == 3 else Enrichment


def _usage_dict(usage: Any) -> dict:
    return {
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
    }


def _source(completion: Any, override: str | None) -> str:
    src = getattr(completion, "source", None) or "live"
    return override if (override and src == "live") else src


def _emit(report: Any, records: list[dict]) -> None:
    if report is not None:
        report.add(redact_obj(records))  # error texts can echo the API key


def enrich_chunk(
    chunk: Chunk,
    prompt_ctx: Any,
    context: Any,
    client: Any,
    *,
    max_attempts: int = 2,
    on_failure: OnFailure = "halt",
    source: str | None = None,
    report: Any = None,
) -> RepairResult:
    """The one enrichment call for ``chunk`` followed by :func:`repair_enriched`.

    ``prompt_ctx`` is an ``enrich.PromptContext``, ``context`` a ``validate.LetterContext``.
    """
    from letterchunk.enrich import build_messages, response_model_for

    model = response_model_for(chunk, prompt_ctx)
    messages = build_messages(chunk, prompt_ctx)
    first = client.complete(messages, model, chunk_id=chunk.chunk_id)
    return repair_enriched(
        chunk,
        messages=messages,
        first=first,
        context=context,
        client=client,
        model=model,
        max_attempts=max_attempts,
        on_failure=on_failure,
        source=source,
        report=report,
    )


# --------------------------------------------------------------------------- existing files


@dataclass
class FileRepair:
    """What ``letterchunk repair FILE`` did: per-chunk outcomes and where it wrote."""

    path: Path
    report_path: Path
    outcomes: dict[str, str] = field(default_factory=dict)  # chunk id (or "line N") -> outcome
    usage: Any = None
    rewritten: bool = False
    needs_llm: dict[str, list[str]] = field(default_factory=dict)  # chunk id -> fields to ask
    # error-level violations `letterchunk validate --stage enriched` finds in the file as
    # written (letter- and file-level rules included: duplicate ids, a missing cleaned text...)
    remaining: list[Any] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [k for k, v in self.outcomes.items() if v in ("failed", "needs-llm")]

    @property
    def valid(self) -> bool:
        """What ``letterchunk validate --stage enriched FILE`` would say: no error left."""
        return not self.failed and not self.remaining


def refuse_unusable(path: str | Path) -> None:
    """Raise InputError when ``validate`` would call ``path`` unusable (missing, empty, binary,
    not a chunk JSONL file): the same verdict, from the same checks, before anything is done."""
    from letterchunk.contract.validate import validate_paths
    from letterchunk.errors import InputError

    fatal = validate_paths([path], stage="segmented").fatal
    if fatal:
        message = fatal[0].message
        raise InputError(path, message.removeprefix(f"{path} ").removeprefix(f"{path}: "))


def _answer_from_chunk(chunk: Chunk, evidence: dict | None, model: type[BaseModel]) -> dict:
    """The chunk's current semantic values, shaped as an answer of ``model`` (for re-asks)."""
    md = chunk.metadata
    ev = evidence or {}
    p_ev = list(ev.get("principle_evidence") or [])
    values = {
        "contextual_summary": md.contextual_summary,
        "themes": list(md.themes),
        "buffett_concepts": list(md.buffett_concepts),
        "entities": md.entities.model_dump(mode="json"),
        "principles": [
            {
                "statement": p.statement,
                "category": p.category,
                "evidence": p_ev[i] if i < len(p_ev) else "",
            }
            for i, p in enumerate(md.principles)
        ],
        "content_type": md.content_type,
        "content_type_evidence": list(ev.get("content_type_evidence") or []),
        "has_financial_data": md.has_financial_data,
        "retrieval_priority": md.retrieval_priority,
        "abstraction_level": md.abstraction_level,
        "comparison_years": list(md.temporal_references.comparison_years),
        "future_outlook": md.temporal_references.future_outlook,
        "related_sections_same_letter": list(md.cross_references.related_sections_same_letter),
        "related_years": list(md.cross_references.related_years),
        "section_title": md.section_title,
        "tables": [{"table_name": t.table_name, "summary": t.summary} for t in md.table_data],
    }
    return {k: v for k, v in values.items() if k in model.model_fields}


def _existing_answer(chunk: Chunk, evidence: dict | None, model: type[BaseModel]) -> Any:
    """A Completion standing for "what the file already says" (no request, no tokens)."""
    from letterchunk.llm.client import Completion, Usage

    return Completion(
        value=None,
        raw_text=json.dumps(_answer_from_chunk(chunk, evidence, model), ensure_ascii=False),
        usage=Usage(),
        source="file",
        latency_s=0.0,
        finish_reason="stop",
        error="values already in the file",
    )


def repair_file(
    path: str | Path,
    client: Any = None,
    *,
    max_attempts: int = 2,
    on_failure: OnFailure = "halt",
) -> FileRepair:
    """Apply the repair loop to an existing chunk file, ours or another tool's.

    Mechanical fixes always; re-asks of the failing fields through ``client`` when one is given,
    otherwise each chunk that still needs the model is reported (outcome ``needs-llm``, with the
    fields a re-ask would name).  ``FILE`` (and its evidence sidecar) is rewritten atomically with
    every chunk in its best state — a chunk the loop cannot fix keeps its mechanical fixes and
    is reported, never dropped; lines that are not JSON are kept verbatim.  Records go to
    ``X.report.jsonl`` beside ``X.jsonl``.  With ``on_failure="halt"`` an exhausted chunk raises
    RepairExhausted before anything is rewritten (the report is still written).
    """
    from letterchunk.contract.validate import (
        LetterContext,
        read_evidence,
        validate_chunk,
        validate_paths,
    )
    from letterchunk.contract.vocabulary import load_concepts
    from letterchunk.enrich import (
        Enrichment,
        PromptContext,
        TableEnrichment,
        build_messages,
        response_model_for,
    )
    from letterchunk.errors import InputError
    from letterchunk.io import atomic_write_lines
    from letterchunk.llm.client import Usage
    from letterchunk.report.core import RepairReport

    path = Path(path)
    refuse_unusable(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            path, f"cannot read it as UTF-8 text ({exc}); pass a chunk JSONL file"
        ) from exc
    evidence_path = layout.evidence_path(path)
    evidence: dict[str, dict] = read_evidence(evidence_path)[0] if evidence_path.is_file() else {}
    result = FileRepair(path=path, report_path=layout.report_path(path), usage=Usage())
    report = RepairReport(result.report_path)

    parsed: list[tuple[int, str, Chunk | None, list[Change]]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            fixed_raw, shape_changes = normalize_record(raw)
            parsed.append((n, line, Chunk.model_validate(fixed_raw), shape_changes))
        except (json.JSONDecodeError, ValidationError) as exc:
            parsed.append((n, line, None, []))
            key = f"line {n}"
            result.outcomes[key] = "failed"
            report.records.append(
                {
                    "chunk_id": key,
                    "letter_year": None,
                    "attempt": 1,
                    "kind": "check",
                    "asked_fields": [],
                    "changes": [],
                    "violations": [
                        {
                            "code": "schema.type",
                            "field": None,
                            "message": _short_error(exc),
                            "severity": "error",
                            "rule_kind": "input",
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                    "latency_s": None,
                    "source": "file",
                    "error": None,
                    "outcome": "failed",
                    "span": None,
                    "content": line[:2000],
                }
            )
    chunks = [c for _, _, c, _ in parsed if c is not None]
    if not chunks and not parsed:
        raise InputError(path, "holds no chunk lines; pass a chunk JSONL file")
    source_file = chunks[0].metadata.source_file if chunks else None
    cleaned_path = path.with_name(source_file) if source_file and "/" not in source_file else None
    cleaned = (
        cleaned_path.read_text(encoding="utf-8")
        if cleaned_path and cleaned_path.is_file()
        else None
    )
    vocabulary = load_concepts()
    titles = list(
        dict.fromkeys(c.metadata.section_title for c in chunks if c.metadata.chunk_tier == 1)
    )
    context = LetterContext(cleaned_text=cleaned, section_titles=titles, vocabulary=vocabulary)
    year = chunks[0].metadata.letter_year if chunks else 0
    # names and quotes as enums only for a grammar-constrained backend (as the pipeline does)
    grammar = getattr(getattr(client, "settings", None), "mode", "JSON_SCHEMA") == "JSON_SCHEMA"
    prompt_ctx = PromptContext.for_letter(year, titles, vocabulary, grounded_choices=grammar)

    out_lines: list[str] = []
    new_evidence = dict(evidence)
    from letterchunk.contract.schema import dump_chunk

    try:
        for _n, line, chunk, shape_changes in parsed:
            if chunk is None:
                out_lines.append(line)
                continue
            cid = chunk.chunk_id
            ev = evidence.get(cid)
            ctx = _with_evidence(context, cid, ev)
            found = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
            fixed, changes = mechanical_fixes(chunk, ctx)  # always: a file may be far off
            changes = shape_changes + changes
            errors = _errors(validate_chunk(fixed, stage="enriched", context=ctx))
            seen_here = _violation_dicts(found, errors)
            semantic = [v for v in errors if rule_kind(v.code) == "semantic"]
            if semantic and len(semantic) == len(errors) and client is not None:
                model = response_model_for(fixed, prompt_ctx)
                rr = repair_enriched(
                    fixed,
                    messages=build_messages(fixed, prompt_ctx),
                    first=_existing_answer(fixed, ev, model),
                    context=context,
                    client=client,
                    model=model,
                    max_attempts=max_attempts,
                    on_failure=on_failure,
                    report=None,
                    first_kind="file",
                )
                if rr.records:
                    first_rec = rr.records[0]
                    first_rec["changes"] = [c.to_dict() for c in changes] + first_rec["changes"]
                    known = {(v["code"], v["field"], v["message"]) for v in first_rec["violations"]}
                    first_rec["violations"] = [
                        v for v in seen_here if (v["code"], v["field"], v["message"]) not in known
                    ] + first_rec["violations"]
                report.add(rr.records)  # appended per chunk: an interrupted repair keeps them
                result.usage = result.usage + rr.usage
                result.outcomes[cid] = rr.outcome
                if rr.chunk is not None:
                    fixed = rr.chunk
                    if rr.evidence and (
                        rr.evidence.get("content_type_evidence")
                        or rr.evidence.get("principle_evidence")
                        or cid in evidence
                    ):
                        new_evidence[cid] = rr.evidence
                out_lines.append(dump_chunk(fixed))
                continue
            if not errors:
                outcome = "repaired" if changes else "valid"
            elif semantic and len(semantic) == len(errors):
                outcome = "needs-llm"
                model = TableEnrichment if fixed.metadata.chunk_tier == 3 else Enrichment
                asked: list[str] = []
                for v in semantic:
                    asked += [f for f in fields_for(v, model) if f not in asked]
                result.needs_llm[cid] = asked
            else:
                outcome = "failed"
            result.outcomes[cid] = outcome
            rec = {
                "chunk_id": cid,
                "letter_year": fixed.metadata.letter_year,
                "attempt": 1,
                "kind": "check",
                "asked_fields": result.needs_llm.get(cid, []),
                "violations": seen_here,
                "changes": [c.to_dict() for c in changes],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                "latency_s": None,
                "source": "file",
                "error": None,
                "outcome": outcome,
                "span": [
                    fixed.metadata.source_span.start_char,
                    fixed.metadata.source_span.end_char_exclusive,
                ],
            }
            report.add([rec])
            out_lines.append(dump_chunk(fixed) if changes else line)
    except RepairExhausted as exc:
        report.records.extend(exc.records)
        report.flush()
        # the loop's first "attempt" is the file's own values (no request): count model calls
        calls = RepairExhausted(exc.chunk_id, max(0, exc.attempts - 1), exc.violations, exc.usage)
        calls.records = exc.records
        raise calls from None
    report.flush()
    if out_lines != [line for _, line, _, _ in parsed]:
        atomic_write_lines(path, out_lines)
        result.rewritten = True
    if new_evidence != evidence:
        order = [c.chunk_id for c in chunks]
        atomic_write_lines(
            evidence_path,
            [
                json.dumps(new_evidence[k], ensure_ascii=False)
                for k in sorted(
                    new_evidence, key=lambda k: (order.index(k) if k in order else len(order), k)
                )
            ],
        )
    # the verdict `letterchunk validate --stage enriched` gives the file as it now stands
    result.remaining = [
        v
        for v in validate_paths([path], stage="enriched").errors
        if v.chunk_id not in result.failed
    ]
    return result


def _short_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first: Mapping[str, Any] = errs[0] if errs else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return f"not a canonical chunk: {loc or '<root>'}: {first.get('msg', exc)}" + (
            f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        )
    return f"not JSON: {exc}"
