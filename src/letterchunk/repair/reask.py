"""The re-ask loop: make an enriched chunk valid, or fail loudly (spec §3.2 "repair or halt").

This module is the only owner of apply -> check -> re-ask.  Two kinds of fixes, chosen by the
``kind`` of each violated rule in :data:`letterchunk.contract.rules.RULES`:

* **mechanical** — :func:`check` lets :func:`~letterchunk.repair.fixers.mechanical_fixes`
  recompute them by code (pure functions, no LLM) and keeps every change it made.
* **semantic** — ungrounded evidence or entity, concept outside the vocabulary, wrong enum,
  summary too long, …, and a failed answer (malformed JSON, truncated output, refusal,
  schema-invalid): :func:`repair_enriched` re-asks the model with a *deep copy* of the original
  conversation, the previous answer, and one message (``prompts/reask.md``) that names only the
  failing fields; the response model holds only those fields, and only they are taken from the
  answer.  Attempts are bounded; token usage is summed over every attempt, failed ones included.

A rule that rejects one value the model chose for a list (an entity, a concept, a year, a
section, a quote: ``contract.rules.DROPPABLE``) takes that value out of the field's enums in
every later re-ask (:func:`partial_model`'s ``exclude``), so the grammar cannot offer it again;
when the re-asks are spent and only such rules still fail, code drops the rejected items
(:func:`drop_rejected`) and records the change: losing one company name beats halting a corpus
run.  Otherwise the chunk is never
returned half-fixed: ``on_failure="halt"`` raises :class:`~letterchunk.errors.RepairExhausted`
(after the report records are written), ``"skip"`` returns a result whose ``chunk`` is ``None``
so the caller writes nothing for it.

Transport faults (429, 5xx, timeouts, resets) are retried inside ``LLMClient.complete`` and never
count as repair attempts; when they are exhausted its ``BackendError`` propagates unchanged,
carrying the records of the attempts made so far (``LetterchunkError.records``).

Every attempt produces one :class:`~letterchunk.report.records.AttemptRecord`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from letterchunk.contract.jsontypes import JSONObject
from letterchunk.contract.rules import COUPLED, DROPPABLE, RULES, rule_kind
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import LetterContext, Violation, validate_chunk
from letterchunk.contract.violations import EvidenceRecord
from letterchunk.enrich import (
    EVIDENCE_FIELDS,
    FIELDS,
    Enrichment,
    TableEnrichment,
    apply_enrichment,
    evidence_record,
    without_choices,
)
from letterchunk.enrich.messages import neutralise_fences
from letterchunk.errors import LetterchunkError, RepairExhausted
from letterchunk.llm.client import Completion, Usage
from letterchunk.llm.prompts import render
from letterchunk.repair.fixers import Change, mechanical_fixes
from letterchunk.report.records import AttemptKind, AttemptRecord, RepairReport, ViolationNote

__all__ = [
    "Completer",
    "OnFailure",
    "RepairResult",
    "check",
    "drop_rejected",
    "fields_for",
    "partial_model",
    "reask_messages",
    "repair_enriched",
    "response_violation",
    "violation_notes",
]

log = logging.getLogger(__name__)

OnFailure = Literal["halt", "skip"]
Outcome = Literal["valid", "repaired", "failed", "needs-llm"]


class Completer(Protocol):
    """What the loop asks: ``LLMClient`` or anything with its ``complete``."""

    def complete(
        self, messages: list[dict[str, str]], response_model: type[BaseModel], *, chunk_id: str
    ) -> Completion: ...


@dataclass
class RepairResult:
    """What became of one chunk.  ``chunk`` is None exactly when ``outcome`` is not
    valid/repaired."""

    chunk_id: str
    outcome: Outcome
    chunk: Chunk | None
    evidence: EvidenceRecord | None
    attempts: int  # model calls for this chunk, the first enrichment included
    usage: Usage  # summed over every call, failed ones included
    records: list[AttemptRecord] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)  # what is still wrong when failed

    @property
    def ok(self) -> bool:
        return self.chunk is not None


def _errors(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.severity == "error"]


def violation_notes(found: list[Violation], remaining: list[Violation]) -> list[ViolationNote]:
    """Every violation seen in one attempt; ``fixed`` tells whether code fixed it there."""

    def key(v: Violation) -> tuple[str, str | None, str]:
        return (v.code, v.field, v.message)

    left = {key(v) for v in remaining}
    out, seen = [], set()
    for v in list(found) + list(remaining):
        if key(v) in seen:
            continue
        seen.add(key(v))
        out.append(
            ViolationNote(
                code=v.code,
                field=v.field,
                message=v.message,
                severity=v.severity,
                rule_kind=rule_kind(v.code),
                fixed=key(v) not in left,
            )
        )
    return out


# --------------------------------------------------------------------------- check


def with_evidence(
    context: LetterContext | None, chunk_id: str, record: EvidenceRecord | None
) -> LetterContext:
    """``context`` whose evidence for ``chunk_id`` is ``record`` (none when it is None)."""
    context = context or LetterContext()
    evidence = dict(context.evidence or {})
    if record is None:
        evidence.pop(chunk_id, None)
    else:
        evidence[chunk_id] = record
    return dataclasses.replace(context, evidence=evidence)


def check(
    chunk: Chunk, evidence: EvidenceRecord | None, context: LetterContext | None
) -> tuple[Chunk, list[Change], list[Violation], list[Violation]]:
    """Validate, apply mechanical fixes when a mechanical rule fails, validate again.

    Returns the (possibly fixed) chunk, the code's changes, the error-level violations left, and
    the error-level violations found before the fixes (what the report counts).
    """
    ctx = with_evidence(context, chunk.chunk_id, evidence)
    found = errors = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
    changes: list[Change] = []
    if any(rule_kind(v.code) == "mechanical" for v in errors):
        chunk, changes = mechanical_fixes(chunk, ctx)
        if changes:
            errors = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
    return chunk, changes, errors, found


# --------------------------------------------------------------------------- dropping


def _rejected_value(
    violation: Violation, data: JSONObject, evidence: EvidenceRecord | None
) -> str | int | None:
    """The value a DROPPABLE violation rejected (``data`` is the chunk as JSON), or None."""
    parts = (violation.field or "").split(".")
    node: object = (
        data.get("metadata")
        if parts[0] == "metadata"
        else (evidence if parts[0] == "evidence" else None)
    )
    for part in parts[1:]:
        if part.isdigit() and isinstance(node, list | str) and int(part) < len(node):
            node = node[int(part)]
        elif not part.isdigit() and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node if isinstance(node, str | int) else None


def drop_rejected(
    chunk: Chunk,
    evidence: EvidenceRecord | None,
    violations: list[Violation],
    context: LetterContext | None,
) -> tuple[Chunk, EvidenceRecord | None, list[Change]] | None:
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
        node: object = data["metadata"] if where[0] == "metadata" else ev
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


# --------------------------------------------------------------------------- re-ask pieces


def _field_map() -> dict[str | tuple[str, ...], list[str]]:
    """metadata / sidecar path -> response fields that fill it (``enrich.FIELDS``,
    ``EVIDENCE_FIELDS``)."""
    out: dict[str | tuple[str, ...], list[str]] = {}
    for name, target in FIELDS.items():
        if target:
            out.setdefault(target, []).append(name)
    for key, name in EVIDENCE_FIELDS.items():
        out.setdefault(key, []).append(name)
    return out


def fields_for(violation: Violation, model: type[BaseModel] | None = None) -> list[str]:
    """The Enrichment fields a violation points at; [] when the model cannot fix it."""
    model = model or Enrichment
    path = violation.field or ""
    for prefix in ("metadata.", "evidence."):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    path = ".".join(
        p for p in re.sub(r"\[(\d+)\]", r".\1", path).split(".") if p and not p.isdigit()
    )  # metadata.principles.0.statement -> principles.statement
    coupled = [f for f in COUPLED.get(violation.code, ()) if f in model.model_fields]
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
    fields: list[str],
    model: type[BaseModel] | None = None,
    exclude: dict[str, set[str | int]] | None = None,
) -> type[BaseModel]:
    """A response model with only ``fields`` of the Enrichment model, all required.

    ``exclude`` maps a field to values the validator rejected: they leave that field's enums
    (``enrich.without_choices``), so a grammar cannot offer the same rejected answer again.
    """
    model = model or Enrichment
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
    messages: list[dict[str, str]],
    previous_answer: str,
    fields: list[str],
    violations: list[Violation],
) -> list[dict[str, str]]:
    """A deep copy of ``messages`` + the previous answer + one message naming only ``fields``.

    Pure: the caller's list and dicts are never touched.
    """
    lines = []
    for v in violations:
        where = v.field or ", ".join(fields)
        lines.append(f"- {where}: {v.message} [{v.code}]")
    out = copy.deepcopy(messages)
    out.append({"role": "assistant", "content": previous_answer or ""})
    out.append(
        {
            "role": "user",
            # the messages quote answer values, which can quote letter text: fences neutralised
            "content": render(
                "reask", fields=", ".join(fields), violations=neutralise_fences("\n".join(lines))
            ),
        }
    )
    return out


def response_violation(completion: Completion, chunk_id: str) -> Violation:
    """A pseudo-violation for an answer that came back without a usable value."""
    error = (completion.error or "").strip()
    low = error.lower()
    if completion.finish_reason == "length" or "truncat" in low or "length" in low:
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
    description = RULES[code].description
    message = f"{description}: {error}" if error else description
    return Violation(code=code, severity="error", message=message[:500], chunk_id=chunk_id)


def _field_violation(code: str, fld: str | None, message: str, chunk_id: str) -> Violation:
    rule = RULES.get(code)
    text = f"{rule.description}: {message}" if rule and rule.origin == "response" else message
    return Violation(code=code, severity="error", message=text[:500], chunk_id=chunk_id, field=fld)


def _bad_fields(exc: ValidationError, model: type[BaseModel]) -> dict[str, str]:
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc") or ()
        if loc and loc[0] in model.model_fields:
            out.setdefault(str(loc[0]), str(err.get("msg")))
    return out


def _answer_fields(
    completion: Completion, asked: list[str], model: type[BaseModel], chunk_id: str
) -> tuple[dict[str, object], list[Violation], JSONObject]:
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
    error = (completion.error or "").lower()
    usable = not (completion.finish_reason == "length" or "truncat" in error or "refus" in error)
    parsed = None
    if usable:
        try:
            parsed = json.loads(completion.raw_text or "")
        except (json.JSONDecodeError, TypeError):
            parsed = None
    if not isinstance(parsed, dict):
        return {}, [response_violation(completion, chunk_id)], {}
    raw = {f: parsed[f] for f in asked if f in parsed}
    good: dict[str, object] = {}
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


def _default_model(chunk: Chunk, first: Completion) -> type[BaseModel]:
    if first.value is not None:
        return type(first.value)
    return TableEnrichment if chunk.metadata.chunk_tier == 3 else Enrichment


# --------------------------------------------------------------------------- the loop


@dataclass
class _Step:
    """What one answer gave: changes made, violations left (and found before code's fixes),
    the fields to ask again, and the applied chunk with its evidence once it got that far."""

    changes: list[Change] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    found: list[Violation] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    checked: tuple[Chunk, EvidenceRecord] | None = None
    valid: bool = False


class _Loop:
    """The state of one chunk's repair: the accepted field values, the latest raw answer per
    field, the values the validator rejected, and the records so far."""

    def __init__(
        self,
        chunk: Chunk,
        model: type[BaseModel],
        context: LetterContext | None,
        source: str | None,
        first_kind: AttemptKind,
    ) -> None:
        self.chunk, self.model, self.context = chunk, model, context
        self.source, self.first_kind = source, first_kind
        self.data: dict[str, object] = {}  # field values accepted so far (python objects)
        self.seen: JSONObject = {}  # the model's latest answer per field, as JSON
        # response field -> values the validator rejected so far (names, quotes, years)
        self.rejected: dict[str, set[str | int]] = {}
        self.records: list[AttemptRecord] = []

    def take(self, completion: Completion, asked: list[str], attempt: int) -> _Step:
        """Step 1: what this answer contributes, field by field; then assemble and check."""
        chunk_id = self.chunk.chunk_id
        step = _Step()
        new, step.violations, raw_values = _answer_fields(completion, asked, self.model, chunk_id)
        self.data.update(new)
        if attempt > 1:  # what the model changed in the fields it was asked again
            step.changes += [
                Change(f"answer.{f}", self.seen.get(f), raw_values[f], "llm")
                for f in asked
                if f in raw_values and raw_values[f] != self.seen.get(f)
            ]
        self.seen.update(raw_values)
        missing = [f for f in self.model.model_fields if f not in self.data]
        if step.violations:  # unusable answer, or fields that failed the schema: ask again
            named = [v.field for v in step.violations if v.field in self.model.model_fields]
            step.targets = list(dict.fromkeys(named)) or list(asked)
        elif missing:
            step.targets = missing
            step.violations = [
                _field_violation("response.schema", f, "no value given", chunk_id) for f in missing
            ]
        else:
            self._apply(step, asked)
        return step

    def _apply(self, step: _Step, asked: list[str]) -> None:
        """Step 2: apply the whole answer to the segmented chunk, let code fix what is
        mechanical, validate."""
        chunk_id = self.chunk.chunk_id
        try:
            merged = self.model.model_validate(self.data)
        except ValidationError as exc:  # a cross-field rule of the model
            bad = _bad_fields(exc, self.model)
            step.violations = [
                _field_violation("response.schema", f, m, chunk_id) for f, m in bad.items()
            ]
            step.targets = list(bad) or list(self.model.model_fields)
            for f in step.targets:
                self.data.pop(f, None)
            return
        try:
            raw = apply_enrichment(self.chunk, merged)
        except ValidationError as exc:  # the answer cannot live in a canonical chunk
            bad = _bad_fields(exc, self.model)
            step.violations = [
                _field_violation("response.schema", f, m, chunk_id) for f, m in bad.items()
            ] or [
                _field_violation("response.schema", None, str(exc.errors()[0].get("msg")), chunk_id)
            ]
            step.targets = list(bad) or list(asked)
            return
        ev = evidence_record(chunk_id, merged)
        fixed, fixes, step.violations, step.found = check(raw, ev, self.context)
        step.checked = (fixed, ev)
        step.changes += fixes
        step.valid = not step.violations

    def plan(self, step: _Step) -> list[Violation]:
        """Step 3: which fields the model must answer again (into ``step.targets``); returns the
        violations neither code nor the model can fix."""
        unfixable = [v for v in step.violations if rule_kind(v.code) != "semantic"]
        if not step.targets and not unfixable:
            for v in step.violations:
                names = fields_for(v, self.model)
                if not names:
                    unfixable.append(v)
                step.targets += [n for n in names if n not in step.targets]
        if unfixable:
            log.warning(
                "%s: %d violation(s) the model cannot fix: %s",
                self.chunk.chunk_id,
                len(unfixable),
                ", ".join(sorted({v.code for v in unfixable})),
            )
        if step.checked is not None:  # values the validator rejected leave the re-ask's enums
            data_now = step.checked[0].model_dump(mode="json")
            for v in step.violations:
                value = (
                    _rejected_value(v, data_now, step.checked[1]) if v.code in DROPPABLE else None
                )
                if value is not None:
                    for name in fields_for(v, self.model):
                        self.rejected.setdefault(name, set()).add(value)
        return unfixable

    def record(
        self,
        completion: Completion,
        attempt: int,
        asked: list[str],
        outcome: Literal["valid", "repaired", "retry", "failed"],
        notes: list[ViolationNote],
        changes: list[Change],
        content: str | None = None,
    ) -> None:
        ss = self.chunk.metadata.source_span
        self.records.append(
            AttemptRecord(
                chunk_id=self.chunk.chunk_id,
                letter_year=self.chunk.metadata.letter_year,
                attempt=attempt,
                kind=self.first_kind if attempt == 1 else "reask",
                outcome=outcome,
                asked_fields=tuple(asked) if attempt > 1 else (),
                violations=tuple(notes),
                changes=tuple(c.to_dict() for c in changes),
                prompt_tokens=int(completion.usage.prompt_tokens or 0),
                completion_tokens=int(completion.usage.completion_tokens or 0),
                latency_s=round(float(completion.latency_s or 0.0), 4),
                source=_source(completion, self.source),
                error=completion.error,
                span=(ss.start_char, ss.end_char_exclusive),
                content=content,
            )
        )


def _source(completion: Completion, override: str | None) -> str:
    src = completion.source or "live"
    return override if (override and src == "live") else src


def _emit(report: RepairReport | None, records: list[AttemptRecord]) -> None:
    if report is not None:
        report.add([r.redacted() for r in records])  # error texts can echo the API key


def repair_enriched(
    chunk: Chunk,
    *,
    messages: list[dict[str, str]],
    first: Completion,
    context: LetterContext | None,
    client: Completer,
    model: type[BaseModel] | None = None,
    max_attempts: int = 2,
    on_failure: OnFailure = "halt",
    source: str | None = None,
    report: RepairReport | None = None,
    first_kind: AttemptKind = "enrich",
) -> RepairResult:
    """Turn the first enrichment answer for ``chunk`` into a valid chunk, re-asking if needed.

    ``chunk`` is the segmented chunk ``messages`` were built for; ``first`` the ``Completion``
    those messages produced with ``model`` (``enrich.response_model_for(chunk, ctx)``;
    default: the type of ``first.value``, else Enrichment/TableEnrichment by tier);
    ``context`` the letter's ``validate.LetterContext``; ``client`` anything with
    ``complete(messages, response_model, *, chunk_id) -> Completion``.
    ``max_attempts`` bounds the *re-asks* (model calls after the first).  ``source`` overrides
    the "live" label of answers (e.g. "cassette" under vcrpy replay).  Records go to
    ``report.add(records)`` before anything is raised, and travel on the result (and on
    ``RepairExhausted.records``).

    An answer that fails the response schema is salvaged field by field: fields that validate
    are kept, and only the others are asked again.
    """
    if max_attempts < 0:
        raise ValueError("max_attempts must be >= 0")
    model = model or _default_model(chunk, first)
    loop = _Loop(chunk, model, context, source, first_kind)
    original = copy.deepcopy(messages)  # the caller's list is never touched
    usage = first.usage
    completion = first
    asked = list(model.model_fields)
    attempt = 1
    while True:
        step = loop.take(completion, asked, attempt)
        if step.valid and step.checked is not None:
            outcome: Literal["valid", "repaired"] = (
                "valid" if attempt == 1 and not step.changes else "repaired"
            )
            notes = violation_notes(step.found, [])
            loop.record(completion, attempt, asked, outcome, notes, step.changes)
            _emit(report, loop.records)
            fixed, ev = step.checked
            return RepairResult(chunk.chunk_id, outcome, fixed, ev, attempt, usage, loop.records)
        unfixable = loop.plan(step)
        if unfixable or attempt > max_attempts:
            return _give_up(
                loop, step, completion, asked, attempt, usage, unfixable, on_failure, report
            )
        notes = violation_notes(step.found, step.violations)
        loop.record(completion, attempt, asked, "retry", notes, step.changes)

        # re-ask: deep copy of the conversation + previous answer + only the failing fields
        convo = reask_messages(original, completion.raw_text or "", step.targets, step.violations)
        asked = step.targets
        attempt += 1
        try:
            completion = client.complete(
                convo, partial_model(asked, model, loop.rejected), chunk_id=chunk.chunk_id
            )
        except LetterchunkError as exc:  # backend gone, budget cap: let the caller report it
            exc.records = loop.records
            raise
        usage = usage + completion.usage


def _give_up(
    loop: _Loop,
    step: _Step,
    completion: Completion,
    asked: list[str],
    attempt: int,
    usage: Usage,
    unfixable: list[Violation],
    on_failure: OnFailure,
    report: RepairReport | None,
) -> RepairResult:
    """The attempts are spent (or cannot help): drop the rejected items if that makes the chunk
    valid, else fail it — halt or skip."""
    chunk_id = loop.chunk.chunk_id
    violations = step.violations
    dropped = (
        None
        if unfixable or step.checked is None
        else drop_rejected(step.checked[0], step.checked[1], violations, loop.context)
    )
    if dropped is not None:
        fixed, dropped_ev, drop_changes = dropped
        log.info(
            "%s: dropped what the model could not ground after %d attempt(s): %s",
            chunk_id,
            attempt,
            ", ".join(sorted({v.code for v in violations})),
        )
        notes = violation_notes(list(step.found) + list(violations), [])
        loop.record(completion, attempt, asked, "repaired", notes, step.changes + drop_changes)
        _emit(report, loop.records)
        return RepairResult(
            chunk_id, "repaired", fixed, dropped_ev, attempt, usage, loop.records, []
        )
    notes = violation_notes(step.found, violations)
    # the content is not in the output: the report shows it from here
    loop.record(completion, attempt, asked, "failed", notes, step.changes, loop.chunk.content)
    _emit(report, loop.records)
    if on_failure == "halt":
        raise RepairExhausted(chunk_id, attempt, violations, usage, records=loop.records)
    return RepairResult(chunk_id, "failed", None, None, attempt, usage, loop.records, violations)
