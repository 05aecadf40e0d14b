"""The ``letterchunk repair FILE`` job: the repair loop applied to an existing chunk file.

Each line is normalised (:func:`~letterchunk.repair.normalise.normalize_record`) and loaded,
validated at stage ``enriched`` and fixed by code; what only the model can fix goes through the
re-ask loop (:func:`~letterchunk.repair.reask.repair_enriched`) when a client is given, and is
reported as ``needs-llm`` otherwise.  ``FILE`` and its evidence sidecar are rewritten atomically
with every chunk in its best state, and one record per attempt goes to ``X.report.jsonl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ValidationError

from letterchunk.contract.rules import rule_kind
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.contract.validate import (
    LetterContext,
    Violation,
    read_evidence,
    validate_chunk,
    validate_paths,
)
from letterchunk.contract.violations import EvidenceRecord
from letterchunk.contract.vocabulary import load_concepts
from letterchunk.enrich import (
    Enrichment,
    PromptContext,
    TableEnrichment,
    build_messages,
    response_model_for,
)
from letterchunk.errors import InputError, RepairExhausted
from letterchunk.io import JsonLine, atomic_write_lines, read_jsonl, read_utf8
from letterchunk.layout import chunk_stem, evidence_path, report_path
from letterchunk.llm.client import Completion, Usage, grammar_backed
from letterchunk.repair.fixers import Change, mechanical_fixes
from letterchunk.repair.normalise import normalize_record
from letterchunk.repair.reask import (
    Completer,
    OnFailure,
    RepairResult,
    fields_for,
    repair_enriched,
    violation_notes,
    with_evidence,
)
from letterchunk.report.records import (
    AttemptOutcome,
    AttemptRecord,
    RepairReport,
    UnreadLineRecord,
    ViolationNote,
    review_records,
)
from letterchunk.review.apply import apply_reviews
from letterchunk.review.folder import thresholds_of
from letterchunk.review.records import ReviewRecord, effective_reviews, read_reviews

__all__ = ["FileRepair", "refuse_unusable", "repair_file"]


@dataclass
class FileRepair:
    """What ``letterchunk repair FILE`` did: per-chunk outcomes and where it wrote."""

    path: Path
    report_path: Path
    outcomes: dict[str, str] = field(default_factory=dict)  # chunk id (or "line N") -> outcome
    usage: Usage = field(default_factory=Usage)
    rewritten: bool = False
    needs_llm: dict[str, list[str]] = field(default_factory=dict)  # chunk id -> fields to ask
    # error-level violations `letterchunk validate --stage enriched` finds in the file as
    # written (letter- and file-level rules included: duplicate ids, a missing cleaned text...)
    remaining: list[Violation] = field(default_factory=list)

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
    fatal = validate_paths([path], stage="segmented").fatal
    if fatal:
        message = fatal[0].message
        raise InputError(path, message.removeprefix(f"{path} ").removeprefix(f"{path}: "))


# --------------------------------------------------------------------------- reading the file


@dataclass
class _Line:
    """One non-blank line of the file: its number, its text, and the chunk it loads as (None
    when it is not a chunk) with the shape changes that took."""

    number: int
    text: str
    chunk: Chunk | None
    shape_changes: list[Change]


def _parse(lines: list[JsonLine], result: FileRepair, report: RepairReport) -> list[_Line]:
    """Load every line as a chunk; a line that is not one is kept and reported as failed."""
    parsed: list[_Line] = []
    for json_line in lines:
        n, line = json_line.number, json_line.text
        if json_line.blank:
            continue
        try:
            if json_line.error:
                raise ValueError(json_line.error)
            fixed_raw, shape_changes = normalize_record(json_line.value)
            parsed.append(_Line(n, line, Chunk.model_validate(fixed_raw), shape_changes))
        except (ValueError, RecursionError) as exc:  # ValidationError is a ValueError
            parsed.append(_Line(n, line, None, []))
            key = f"line {n}"
            result.outcomes[key] = "failed"
            report.records.append(
                UnreadLineRecord(
                    chunk_id=key,
                    letter_year=None,
                    attempt=1,
                    kind="check",
                    outcome="failed",
                    violations=(
                        ViolationNote("schema.type", None, _short_error(exc), "error", "input"),
                    ),
                    source="file",
                    content=line[:2000],
                )
            )
    return parsed


def _short_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first = errs[0] if errs else None
        loc = ".".join(str(p) for p in first["loc"]) if first else ""
        msg = first["msg"] if first else exc
        return f"not a canonical chunk: {loc or '<root>'}: {msg}" + (
            f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        )
    if isinstance(exc, RecursionError):
        return "not a canonical chunk: a value nested too deeply"
    return str(exc)


def _letter_context(path: Path, chunks: list[Chunk]) -> LetterContext:
    """The letter the chunks come from: cleaned text beside the file, section titles, concepts."""
    source_file = chunks[0].metadata.source_file if chunks else None
    cleaned_path = path.with_name(source_file) if source_file and "/" not in source_file else None
    try:
        cleaned = read_utf8(cleaned_path, "the cleaned letter") if cleaned_path else None
    except InputError:  # missing or unreadable: `validate` reports it, spans go unchecked
        cleaned = None
    titles = list(
        dict.fromkeys(c.metadata.section_title for c in chunks if c.metadata.chunk_tier == 1)
    )
    return LetterContext(cleaned_text=cleaned, section_titles=titles, vocabulary=load_concepts())


# --------------------------------------------------------------------------- one chunk


def _answer_from_chunk(
    chunk: Chunk, evidence: EvidenceRecord | None, model: type[BaseModel]
) -> dict[str, object]:
    """The chunk's current semantic values, shaped as an answer of ``model`` (for re-asks)."""
    md = chunk.metadata
    ev: EvidenceRecord = evidence or {"chunk_id": chunk.chunk_id}
    p_ev = list(ev.get("principle_evidence") or [])
    values: dict[str, object] = {
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


def _existing_answer(
    chunk: Chunk, evidence: EvidenceRecord | None, model: type[BaseModel]
) -> Completion:
    """A Completion standing for "what the file already says" (no request, no tokens)."""
    return Completion(
        value=None,
        raw_text=json.dumps(_answer_from_chunk(chunk, evidence, model), ensure_ascii=False),
        usage=Usage(),
        source="file",
        latency_s=0.0,
        finish_reason="stop",
        error="values already in the file",
    )


def _with_file_findings(
    records: list[AttemptRecord], changes: list[Change], seen_here: list[ViolationNote]
) -> list[AttemptRecord]:
    """``records`` whose first one also holds the code's changes and the violations the file
    showed before the loop (those the loop did not see again)."""
    if not records:
        return records
    first = records[0]
    known = {(v.code, v.field, v.message) for v in first.violations}
    earlier = [v for v in seen_here if (v.code, v.field, v.message) not in known]
    merged = replace(
        first,
        changes=tuple(c.to_dict() for c in changes) + first.changes,
        violations=tuple(earlier) + first.violations,
    )
    return [merged, *records[1:]]


def _check_record(
    fixed: Chunk,
    outcome: AttemptOutcome,
    asked: list[str],
    notes: list[ViolationNote],
    changes: list[Change],
) -> AttemptRecord:
    """The one record of a chunk the loop did not take (valid, fixed by code, or waiting for
    the model)."""
    ss = fixed.metadata.source_span
    return AttemptRecord(
        chunk_id=fixed.chunk_id,
        letter_year=fixed.metadata.letter_year,
        attempt=1,
        kind="check",
        outcome=outcome,
        asked_fields=tuple(asked),
        violations=tuple(notes),
        changes=tuple(c.to_dict() for c in changes),
        source="file",
        span=(ss.start_char, ss.end_char_exclusive),
    )


@dataclass
class _Job:
    """What every chunk of the file shares: the letter, the prompt, the client and the report."""

    context: LetterContext
    prompt: PromptContext
    client: Completer | None
    max_attempts: int
    on_failure: OnFailure
    evidence: dict[str, EvidenceRecord]
    new_evidence: dict[str, EvidenceRecord]
    result: FileRepair
    report: RepairReport

    def repair(self, line: _Line, chunk: Chunk) -> str:
        """Fix one chunk by code, then by the model where only it can; record it; return the
        line to write."""
        cid = chunk.chunk_id
        ev = self.evidence.get(cid)
        ctx = with_evidence(self.context, cid, ev)
        found = _errors(validate_chunk(chunk, stage="enriched", context=ctx))
        fixed, changes = mechanical_fixes(chunk, ctx)  # always: a file may be far off
        changes = line.shape_changes + changes
        errors = _errors(validate_chunk(fixed, stage="enriched", context=ctx))
        seen_here = violation_notes(found, errors)
        semantic = [v for v in errors if rule_kind(v.code) == "semantic"]
        only_semantic = bool(semantic) and len(semantic) == len(errors)
        if only_semantic and self.client is not None:
            rr = self._reask(fixed, ev, self.client)
            self.report.add(_with_file_findings(rr.records, changes, seen_here))
            self.result.usage = self.result.usage + rr.usage
            self.result.outcomes[cid] = rr.outcome
            if rr.chunk is not None:
                fixed = rr.chunk
                if rr.evidence and (
                    rr.evidence.get("content_type_evidence")
                    or rr.evidence.get("principle_evidence")
                    or cid in self.evidence
                ):
                    self.new_evidence[cid] = rr.evidence
            return dump_chunk(fixed)
        outcome: AttemptOutcome
        if not errors:
            outcome = "repaired" if changes else "valid"
        elif only_semantic:
            outcome = "needs-llm"
            model = TableEnrichment if fixed.metadata.chunk_tier == 3 else Enrichment
            asked: list[str] = []
            for v in semantic:
                asked += [f for f in fields_for(v, model) if f not in asked]
            self.result.needs_llm[cid] = asked
        else:
            outcome = "failed"
        self.result.outcomes[cid] = outcome
        asked_now = self.result.needs_llm.get(cid, [])
        self.report.add([_check_record(fixed, outcome, asked_now, seen_here, changes)])
        return dump_chunk(fixed) if changes else line.text

    def _reask(self, fixed: Chunk, ev: EvidenceRecord | None, client: Completer) -> RepairResult:
        model = response_model_for(fixed, self.prompt)
        return repair_enriched(
            fixed,
            messages=build_messages(fixed, self.prompt),
            first=_existing_answer(fixed, ev, model),
            context=self.context,
            client=client,
            model=model,
            max_attempts=self.max_attempts,
            on_failure=self.on_failure,
            report=None,
            first_kind="file",
        )


def _errors(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.severity == "error"]


# --------------------------------------------------------------------------- the job


def repair_file(
    path: str | Path,
    client: Completer | None = None,
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
    path = Path(path)
    refuse_unusable(path)
    # the analysts' decisions beside the file: a corrupt line stops here, before any request
    reviews = list(effective_reviews(read_reviews(path.parent)).values())
    lines = read_jsonl(path)  # the shared reader: every line parsed or with its reason
    sidecar = evidence_path(path)
    evidence: dict[str, EvidenceRecord] = read_evidence(sidecar)[0] if sidecar.is_file() else {}
    result = FileRepair(path=path, report_path=report_path(path), usage=Usage())
    report = RepairReport(result.report_path)
    parsed = _parse(lines, result, report)
    chunks = [p.chunk for p in parsed if p.chunk is not None]
    if not chunks and not parsed:
        raise InputError(path, "holds no chunk lines; pass a chunk JSONL file")
    context = _letter_context(path, chunks)
    year = chunks[0].metadata.letter_year if chunks else 0
    prompt = PromptContext.for_letter(
        year, context.section_titles, context.vocabulary, grounded_choices=grammar_backed(client)
    )
    job = _Job(
        context, prompt, client, max_attempts, on_failure, evidence, dict(evidence), result, report
    )
    try:
        out_lines = [p.text if p.chunk is None else job.repair(p, p.chunk) for p in parsed]
    except RepairExhausted as exc:
        # the loop's records (the error itself types them loosely: it sits below every stage)
        report.records.extend(r for r in exc.records if isinstance(r, AttemptRecord))
        report.flush()
        # the loop's first "attempt" is the file's own values (no request): count model calls
        raise RepairExhausted(
            exc.chunk_id, max(0, exc.attempts - 1), exc.violations, exc.usage, records=exc.records
        ) from None
    if reviews:
        out_lines = _reviewed(path, parsed, out_lines, job, reviews)
    report.flush()
    _write_back(path, parsed, out_lines, sidecar, evidence, job.new_evidence, chunks)
    result.rewritten = out_lines != [p.text for p in parsed]
    # the verdict `letterchunk validate --stage enriched` gives the file as it now stands
    result.remaining = [
        v
        for v in validate_paths([path], stage="enriched").errors
        if v.chunk_id not in result.failed
    ]
    return result


def _reviewed(
    path: Path, parsed: list[_Line], out_lines: list[str], job: _Job, reviews: list[ReviewRecord]
) -> list[str]:
    """``out_lines`` with the analysts' decisions applied after the repairs (the analyst wins);
    ``job.new_evidence`` marks them, the report gets their ``review`` records."""
    at = [i for i, p in enumerate(parsed) if p.chunk is not None]
    repaired = [Chunk.model_validate_json(out_lines[i]) for i in at]
    done = apply_reviews(
        chunk_stem(path),
        repaired,
        job.new_evidence,
        reviews,
        context=job.context,
        thresholds=thresholds_of(path.parent),
    )
    out = list(out_lines)
    for i, before, after in zip(at, repaired, done.chunks, strict=True):
        if after is not before:
            out[i] = dump_chunk(after)
    job.new_evidence.clear()
    job.new_evidence.update(done.evidence)
    job.report.add(review_records(done, chunk_stem(path)))
    return out


def _write_back(
    path: Path,
    parsed: list[_Line],
    out_lines: list[str],
    evidence_path: Path,
    evidence: dict[str, EvidenceRecord],
    new_evidence: dict[str, EvidenceRecord],
    chunks: list[Chunk],
) -> None:
    """Rewrite the chunk file and its evidence sidecar atomically, each only when it changed."""
    if out_lines != [p.text for p in parsed]:
        atomic_write_lines(path, out_lines)
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
