"""Reading chunk JSONL files for the validator: the bytes, the lines, the exact keys and types
of each object, the evidence sidecar and the cleaned text beside it.

Nothing in a file can make this raise: every problem becomes a :class:`Violation` naming the
file, the line and the field.  A file holding several letters is checked per ``source_file``.
Files are opened and lines parsed by :mod:`letterchunk.io` only (``read_utf8``, ``jsonl_lines``),
the one reader every command shares; :func:`load_chunks` is its strict form for the commands
that need every line to be a chunk (enrich, export, index).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from letterchunk.contract.jsontypes import JSONObject
from letterchunk.contract.letter_checks import check_letter
from letterchunk.contract.predicates import short
from letterchunk.contract.schema import (
    Chunk,
    CrossReferences,
    Entities,
    Metadata,
    Principle,
    SourceSpan,
    TableData,
    TemporalReferences,
)
from letterchunk.contract.violations import (
    EvidenceRecord,
    LetterContext,
    ValidationReport,
    Violation,
    violation,
)
from letterchunk.contract.vocabulary import concepts_for
from letterchunk.errors import InputError
from letterchunk.io import jsonl_lines, read_jsonl, read_utf8
from letterchunk.layout import CLEANED_SUFFIX, evidence_path, is_chunk_file, is_compilation_source

__all__ = ["read_evidence", "collect", "check_file", "load_chunks"]

_NESTED: dict[type[BaseModel], dict[str, tuple[type[BaseModel], bool]]] = {
    Chunk: {"metadata": (Metadata, False)},
    Metadata: {
        "table_data": (TableData, True),
        "entities": (Entities, False),
        "principles": (Principle, True),
        "temporal_references": (TemporalReferences, False),
        "cross_references": (CrossReferences, False),
        "source_span": (SourceSpan, False),
    },
}


_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {
    m: tuple(m.model_fields)
    for m in (
        Chunk,
        Metadata,
        TableData,
        Entities,
        Principle,
        TemporalReferences,
        CrossReferences,
        SourceSpan,
    )
}


def _key_violations(
    obj: JSONObject, model: type[BaseModel], path: str = ""
) -> list[tuple[str, str, str]]:
    """(code, field, message) for keys missing (even ones pydantic would default) or out of
    order."""
    out: list[tuple[str, str, str]] = []
    expected = _FIELD_NAMES[model]
    keys = tuple(obj)
    if keys != expected:
        missing = [name for name in expected if name not in obj]
        for name in missing:
            info = model.model_fields[name]
            default = (
                "no default: it must be given"
                if info.is_required()
                else f"default {json.dumps(_jsonable(info.get_default(call_default_factory=True)))}"
            )
            out.append(
                (
                    "schema.missing_key",
                    path + name,
                    f"{path + name} is missing; every key of the canonical schema must be "
                    f"present ({default})",
                )
            )
        present = tuple(k for k in keys if k in expected)
        if not missing and present != expected:
            where = path.rstrip(".")
            out.append(
                (
                    "schema.key_order",
                    where or "(top level)",
                    f"keys of {where or 'the chunk'} are not in the canonical schema's order",
                )
            )
    for name, (sub, is_list) in _NESTED.get(model, {}).items():
        value = obj.get(name)
        if is_list and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    out.extend(_key_violations(item, sub, f"{path}{name}.{i}."))
        elif not is_list and isinstance(value, dict):
            out.extend(_key_violations(value, sub, f"{path}{name}."))
    return out


def _jsonable(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _pydantic_violations(exc: ValidationError) -> list[tuple[str, str, str]]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        kind = err["type"]
        if kind == "missing":
            code = "schema.missing_key"
            msg = f"{loc} is missing; every key of the canonical schema must be present"
        elif kind == "extra_forbidden":
            code = "schema.extra_key"
            msg = (
                f"{loc} is not a key of the canonical schema; "
                "remove it (the keys must match exactly)"
            )
        elif kind == "literal_error":
            code = "schema.enum"
            msg = f"{loc}: {err['msg']} (got {short(err.get('input'))})"
        elif kind == "string_pattern_mismatch" and loc == "chunk_id":
            code = "id.pattern"
            msg = f"chunk_id {short(err.get('input'))} must match ^\\d{{4}}-S\\d+-T[123]-\\d{{3}}$"
        elif kind == "string_pattern_mismatch" and loc.endswith("letter_date"):
            code = "date.format"
            msg = (
                f"letter_date {short(err.get('input'))} must be YYYY-MM-DD (0000-00-00 if unknown)"
            )
        else:
            code = "schema.type"
            msg = (
                f"{loc}: {err['msg']} (got {short(err.get('input'))}); "
                "see schemas/chunk.schema.json"
            )
        out.append((code, loc, msg))
    return out


def _chunk_id_of(obj: JSONObject) -> str | None:
    cid = obj.get("chunk_id")
    return cid if isinstance(cid, str) else None


def read_evidence(path: str | Path) -> tuple[dict[str, EvidenceRecord], list[Violation]]:
    """Read an evidence sidecar: ``chunk_id -> record`` plus violations for bad lines."""
    path = Path(path)
    out: list[Violation] = []
    records: dict[str, EvidenceRecord] = {}
    try:
        text = read_utf8(path, "the evidence sidecar as UTF-8 JSONL")
    except InputError as exc:
        return records, [
            violation(
                "evidence.malformed",
                f"cannot read the evidence sidecar ({_reason(exc)}); rewrite it as UTF-8 JSONL",
                file=str(path),
            )
        ]
    for line in jsonl_lines(text):
        n = line.number
        if line.blank:
            continue
        rec = line.value
        if line.error:
            out.append(violation("evidence.malformed", line.error, file=str(path), line=n))
            continue
        problem = None
        if not isinstance(rec, dict) or not isinstance(rec.get("chunk_id"), str):
            problem = 'each line must be an object with a string "chunk_id"'
        else:
            for key in ("content_type_evidence", "principle_evidence"):
                value = rec.get(key, [])
                if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
                    problem = f"{key} must be a list of strings"
        if problem:
            out.append(
                violation(
                    "evidence.malformed",
                    problem,
                    file=str(path),
                    line=n,
                    chunk_id=_chunk_id_of(rec) if isinstance(rec, dict) else None,
                )
            )
            continue
        records[rec["chunk_id"]] = rec
    return records, out


def _sidecar(path: Path) -> Path:
    return evidence_path(path)


def check_file(path: Path, stage: str, report: ValidationReport) -> None:
    """Every rule on one chunk JSONL file; its name, chunk count and violations go to
    ``report``."""
    fname = str(path)
    report.files.append(fname)
    text = _read_text(path, report.violations.append)
    if text is None:
        return
    parsed = _parse_lines(text, fname)
    if parsed.json_lines == 0:
        report.violations.append(
            violation(
                "input.not_jsonl",
                "no line is a JSON object: this is not a chunk JSONL file; pass the "
                "YYYY.jsonl files written by `letterchunk segment` (or their folder)",
                file=fname,
            )
        )
        return
    report.violations.extend(parsed.violations)
    report.chunks += len(parsed.chunks)

    # one letter per source file (another tool's JSONL may hold several letters)
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, chunk in enumerate(parsed.chunks):
        by_source[chunk.metadata.source_file].append(i)
    evidence: dict[str, EvidenceRecord] | None = None
    if stage == "enriched":
        side = _sidecar(path)
        if side.is_file():
            evidence, bad = read_evidence(side)
            report.violations.extend(bad)
    for source, idx in by_source.items():
        group = [parsed.chunks[i] for i in idx]
        glines: list[int | None] = [parsed.lines[i] for i in idx]
        cleaned = _read_cleaned(path, source, glines[0], report.violations.append)
        if evidence is not None and len(by_source) > 1:
            ids = {c.chunk_id for c in group}
            group_evidence: dict[str, EvidenceRecord] | None = {
                k: r for k, r in evidence.items() if k in ids
            }
        else:
            group_evidence = evidence
        # a compilation's letter (YYYY-Lk_cleaned.txt) has its profile's concepts too
        stem = source.removesuffix(CLEANED_SUFFIX)
        vocab = concepts_for(stem) if is_compilation_source(source) else None
        context = LetterContext(cleaned_text=cleaned, evidence=group_evidence, vocabulary=vocab)
        report.violations.extend(
            check_letter(group, stage, context, glines, fname, complete=parsed.failed == 0)
        )


def _reason(exc: InputError) -> str:
    """An InputError's message without the path it starts with (a violation names the file)."""
    return str(exc).removeprefix(f"{exc.path}: ")


def _read_text(path: Path, add: Callable[[Violation], None]) -> str | None:
    """The file's text, or None after reporting input.unreadable (not a regular file, cannot be
    read, binary or not UTF-8) / input.empty."""
    fname = str(path)
    try:
        text = read_utf8(path)
    except InputError as exc:
        add(violation("input.unreadable", _reason(exc), file=fname))
        return None
    if not text.strip():
        add(
            violation(
                "input.empty",
                "the file is empty; re-run `letterchunk segment` to write the chunks",
                file=fname,
            )
        )
        return None
    return text


@dataclass
class _Parsed:
    """The lines of a JSONL file read as chunks."""

    chunks: list[Chunk] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line of each chunk
    violations: list[Violation] = field(default_factory=list)
    json_lines: int = 0  # lines that hold a JSON object
    failed: int = 0  # non-blank lines that did not become a Chunk


def _parse_lines(text: str, fname: str) -> _Parsed:
    """Every line of ``text``: blank, not JSON, not an object, or an object checked for exact
    keys and types and loaded as a :class:`Chunk`."""
    parsed = _Parsed()
    pending = parsed.violations
    for line in jsonl_lines(text):
        n, obj = line.number, line.value
        if line.blank:
            pending.append(
                violation("json.blank_line", "blank line; remove it", file=fname, line=n)
            )
            continue
        if line.error:
            pending.append(
                violation(
                    "json.malformed",
                    f"{line.error}; each line must hold one complete chunk object",
                    file=fname,
                    line=n,
                )
            )
            parsed.failed += 1
            continue
        if not isinstance(obj, dict):
            pending.append(
                violation(
                    "json.not_object",
                    f"line holds a JSON {type(obj).__name__}, not a chunk object",
                    file=fname,
                    line=n,
                )
            )
            parsed.failed += 1
            continue
        parsed.json_lines += 1
        chunk = _load_chunk(obj, fname, n, pending)
        if chunk is not None:
            parsed.chunks.append(chunk)
            parsed.lines.append(n)
        else:
            parsed.failed += 1
    return parsed


def _load_chunk(obj: JSONObject, fname: str, n: int, pending: list[Violation]) -> Chunk | None:
    """``obj`` as a Chunk, or None; its key and type violations (one per code and field) go to
    ``pending``."""
    cid = _chunk_id_of(obj)
    found: dict[tuple[str, str], str] = {}
    for code, loc, msg in _key_violations(obj, Chunk):
        found.setdefault((code, loc), msg)
    chunk: Chunk | None
    try:
        chunk = Chunk.model_validate(obj)
    except ValidationError as exc:
        for code, loc, msg in _pydantic_violations(exc):
            found.setdefault((code, loc), msg)
        chunk = None
    except RecursionError:
        found.setdefault(("schema.type", "(top level)"), "value nested too deeply")
        chunk = None
    for (code, loc), msg in found.items():
        pending.append(violation(code, msg, chunk_id=cid, field=loc, file=fname, line=n))
    return chunk


def _read_cleaned(
    path: Path, source: str, line: int | None, add: Callable[[Violation], None]
) -> str | None:
    """The cleaned text named by ``source`` beside ``path``, or None (reported when it is
    missing or unreadable; a source that is not a bare file name is source.file_name's)."""
    if not source or "/" in source or "\\" in source or source in (".", ".."):
        return None
    cleaned_path = path.parent / source
    try:
        return read_utf8(cleaned_path, "the cleaned letter `letterchunk segment` wrote")
    except InputError as exc:
        if cleaned_path.exists():
            add(
                violation(
                    "source.cleaned_unreadable",
                    f"{_reason(exc)}; re-run `letterchunk segment`",
                    file=str(path),
                    line=line,
                    field="metadata.source_file",
                )
            )
            return None
        add(
            violation(
                "source.cleaned_missing",
                f"{cleaned_path} (metadata.source_file) not found; "
                "keep the cleaned text beside the JSONL "
                "as `letterchunk segment` writes it, "
                "or spans cannot be checked",
                file=str(path),
                line=line,
                field="metadata.source_file",
            )
        )
    return None


def load_chunks(path: Path) -> list[Chunk]:
    """The canonical chunks of the chunk JSONL file ``path``, in file order (blank lines
    skipped).  InputError naming the file, and the first line that is not a canonical chunk,
    when there is one; the file is read by :func:`letterchunk.io.read_jsonl`."""
    chunks: list[Chunk] = []
    for line in read_jsonl(path):
        if line.blank:
            continue
        where, reason = f"line {line.number}", line.error
        if reason is None and not isinstance(line.value, dict):
            reason = f"holds a JSON {type(line.value).__name__}, not a chunk object"
        if reason is None:
            where = (
                f"chunk {len(chunks) + 1} ({_chunk_id_of(line.value) or '?'}, line {line.number})"
            )
            try:
                chunks.append(Chunk.model_validate(line.value))
                continue
            except ValidationError as exc:
                first = _pydantic_violations(exc)[0][2]
                reason = f"is not canonical ({exc.error_count()} error(s); first: {first})"
            except RecursionError:
                reason = "is not canonical (a value nested too deeply)"
        raise InputError(
            path,
            f"{where}: {reason}; run `letterchunk validate {path}` to see every problem, or "
            "segment the letter again",
        )
    return chunks


def collect(path: Path, report: ValidationReport) -> list[Path]:
    """The chunk files ``path`` names: itself, or every ``*.jsonl`` in a folder except
    ``*.evidence.jsonl`` and ``*.report.jsonl``; a missing path or an empty folder is
    reported."""
    if not path.exists():
        report.violations.append(
            violation(
                "input.missing_path",
                f"{path} does not exist; pass a chunk JSONL file or a folder of them",
                file=str(path),
            )
        )
        return []
    if path.is_dir():
        # a FIFO or device named like a chunk file is listed, to be reported as unreadable
        files = sorted(p for p in path.glob("*.jsonl") if not p.is_dir() and is_chunk_file(p))
        if not files:
            report.violations.append(
                violation(
                    "input.no_jsonl",
                    f"{path} holds no chunk *.jsonl file; "
                    "run `letterchunk segment LETTERS --out DIR` first",
                    file=str(path),
                )
            )
        return files
    return [path]
