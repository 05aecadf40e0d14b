"""The report page: ``DIR/report.html``, one self-contained static page of an output folder.

:func:`build_html` turns an output folder into one self-contained static page: inline CSS and
JS (the template is the package file ``templates/report.html``), no network.  It works for any
output folder: chunk files ``X.jsonl`` (segmented or enriched), their evidence sidecars
``X.evidence.jsonl``, the reports ``X.report.jsonl`` and the cleaned letters beside them.  The
data (:func:`collect`) travels as JSON inside the page; the page's script computes the totals
(by outcome, letter, content type and rule), draws one card per chunk — its text with evidence
quotes highlighted, what the LLM produced for it (summary, themes, concepts, content type and
principles with their evidence, entities, cross references), its tables, what the validator
says about the file now, the attempts of its latest run with tokens and latency, a word-level
before/after diff of each change (computed here with :mod:`difflib`) and its earlier runs — and
filters the cards by letter, rule, outcome and content type, also from the URL fragment
(``report.html#letter=1977&outcome=failed&type=mistake_confession``), so filters can be linked
and tested.  Nothing is inserted as HTML by the script: every text goes through
``textContent``, and the embedded JSON escapes ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Literal

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.rules import RULES
from letterchunk.contract.validate import validate_path
from letterchunk.errors import InputError
from letterchunk.io import read_utf8, write_output
from letterchunk.layout import (
    CLEANED_SUFFIX,
    EVIDENCE_SUFFIX,
    HTML_NAME,
    REPORT_SUFFIX,
    chunk_stem,
    cleaned_name,
    is_chunk_file,
    is_compilation_source,
)
from letterchunk.report.records import (
    ChunkRun,
    load_records,
    read_jsonl,
    runs_by_chunk,
)
from letterchunk.review.apply import folder_reviews
from letterchunk.review.folder import thresholds_of
from letterchunk.review.records import ReviewFileError

__all__ = [
    "build_html",
    "collect",
    "evidence_marks",
    "word_diff",
]


# --------------------------------------------------------------------------- diff + marks

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def _as_text(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def word_diff(before: JSONValue, after: JSONValue) -> list[list[str]]:
    """Word-level diff of two values as ``[[op, text], ...]`` with op in eq / del / ins."""
    a, b = _TOKEN.findall(_as_text(before)), _TOKEN.findall(_as_text(after))
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(["eq", "".join(a[i1:i2])])
            continue
        if i2 > i1:
            out.append(["del", "".join(a[i1:i2])])
        if j2 > j1:
            out.append(["ins", "".join(b[j1:j2])])
    return out


def evidence_marks(content: str, quotes: dict[str, list[str]]) -> list[list]:
    """``[[start, end, kind], ...]`` of each quote in ``content`` (whitespace-insensitive).

    Sorted, non-overlapping (the earlier quote wins); quotes not found are left out.
    """
    found: list[list] = []
    for kind, items in quotes.items():
        for quote in items:
            words = quote.split()
            if not words:
                continue
            m = re.search(r"\s+".join(re.escape(w) for w in words), content)
            if m:
                found.append([m.start(), m.end(), kind])
    found.sort()
    out: list[list] = []
    for mark in found:
        if not out or mark[0] >= out[-1][1]:
            out.append(mark)
    return out


# --------------------------------------------------------------------------- collecting


def _rules() -> dict[str, dict]:
    return {
        code: {"severity": r.severity, "description": r.description, "kind": r.kind}
        for code, r in RULES.items()
    }


def _stems(folder: Path) -> list[str]:
    """Every ``X`` with an ``X.jsonl`` chunk file or an ``X.report.jsonl`` in ``folder``."""
    stems: set[str] = set()
    for p in folder.glob("*.jsonl"):
        if p.name.endswith(REPORT_SUFFIX):
            stems.add(p.name[: -len(REPORT_SUFFIX)])
        elif is_chunk_file(p):
            stems.add(chunk_stem(p))
    return sorted(stems)


def _id_key(chunk_id: str) -> tuple:
    """Reading order: section, then tier, then sequence (ids that do not parse go last)."""
    m = re.fullmatch(r"(\d{4})-S(\d+)-T(\d)-(\d+)", chunk_id)
    return (0, int(m[2]), int(m[3]), int(m[4])) if m else (1, 0, 0, 0)


def _cleaned(path: Path) -> str | None:
    """The cleaned letter's text, or None when it is missing or unreadable (the validator's
    checks on the page say which)."""
    try:
        return read_utf8(path, "the cleaned letter")
    except InputError:
        return None


def _file_checks(path: Path, written: list[dict]) -> tuple[str, dict[str, list[dict]], list[dict]]:
    """(stage, chunk id -> violations, file-level violations) of the chunk file as it is now.

    Stage ``enriched`` once any chunk has a summary, else ``segmented``.
    """
    enriched = any((c.get("metadata") or {}).get("contextual_summary") for c in written)
    stage: Literal["segmented", "enriched"] = "enriched" if enriched else "segmented"
    per_chunk: dict[str, list[dict]] = {}
    whole: list[dict] = []
    for v in validate_path(path, stage=stage):
        item = {
            "code": v.code,
            "field": v.field,
            "message": v.message,
            "severity": v.severity,
            "rule_kind": v.kind,
            "line": v.line,
        }
        if v.chunk_id:
            per_chunk.setdefault(v.chunk_id, []).append(item)
        else:
            whole.append(item)
    return stage, per_chunk, whole


def collect(out_dir: str | Path) -> dict:
    """Everything the page shows, as one JSON-able dict."""
    folder = Path(out_dir)
    t = thresholds_of(folder)
    judged_at = {"confession_paragraph": t.confession_paragraph, "rule_sentence": t.rule_sentence}
    chunks: list[dict] = []
    files: list[dict] = []
    found: list[dict] = []  # the letters cut from compilations
    for stem in _stems(folder):
        chunk_file = folder / f"{stem}.jsonl"
        written_list = [c for c in read_jsonl(chunk_file) if c.get("chunk_id")]
        written = {str(c["chunk_id"]): c for c in written_list}
        evidence_file = folder / f"{stem}{EVIDENCE_SUFFIX}"
        evidence = {e.get("chunk_id"): e for e in read_jsonl(evidence_file, lenient=True)}
        source = (
            _mapping(written_list[0].get("metadata")).get("source_file") if written_list else None
        )
        cleaned_path = folder / (
            source if isinstance(source, str) and "/" not in source else f"{stem}{CLEANED_SUFFIX}"
        )
        cleaned = _cleaned(cleaned_path)
        if written_list and is_compilation_source(cleaned_name(stem)):
            md = _mapping(written_list[0].get("metadata"))
            found.append(
                {
                    "letter": stem,
                    "date": md.get("letter_date"),
                    "year": md.get("letter_year"),
                    "lines": cleaned.count("\n") if cleaned is not None else None,
                    "chunks": len(written_list),
                }
            )
        runs = runs_by_chunk(load_records(folder / f"{stem}{REPORT_SUFFIX}"))
        checks: dict[str, list[dict]] = {}
        stage = None
        if chunk_file.is_file():
            stage, checks, whole = _file_checks(chunk_file, written_list)
            files.append(
                {
                    "file": chunk_file.name,
                    "stage": stage,
                    "chunks": len(written_list),
                    "violations": whole,
                }
            )
        ids = list(dict.fromkeys([*written, *runs]))
        ids.sort(key=_id_key)  # stable: ids that do not parse keep file order
        for chunk_id in ids:
            chunks.append(
                _chunk_view(
                    chunk_id,
                    stem,
                    runs.get(chunk_id, []),
                    written.get(chunk_id),
                    evidence.get(chunk_id),
                    cleaned,
                    checks.get(chunk_id, []),
                    stage,
                    judged_at,
                )
            )
    return {
        "dir": folder.name,
        "rules": _rules(),
        "files": files,
        "chunks": chunks,
        "compilation_letters": found,
        "reviews": _reviews(folder),
    }


def _reviews(folder: Path) -> dict[str, object]:
    """The analysts' decisions of ``folder/reviews.jsonl``: how many are in force and applied,
    and each one not applied (stale, refused, waiting) with why; ``error`` when the file has a
    corrupt line (named), so the page says so instead of failing."""
    thresholds = thresholds_of(folder)
    out: dict[str, object] = {"thresholds": thresholds.to_dict()}
    try:
        found = folder_reviews(folder)
    except (ReviewFileError, InputError) as exc:
        return {**out, "error": str(exc), "in_force": 0, "applied": 0, "unapplied": []}
    return {
        **out,
        "in_force": found.in_force,
        "applied": len(found.applied),
        "unapplied": [s.to_dict() for s in found.unapplied],
    }


def _judged(evidence: dict | None, thresholds: dict[str, float]) -> dict[str, list[dict]]:
    """Each judged value's probability beside the threshold it was decided at."""
    judged = _mapping((evidence or {}).get("judgements"))
    kept = set(_strings((evidence or {}).get("principle_evidence")))

    def rows(key: str, threshold: float, mark_kept: bool) -> list[dict]:
        out = []
        found = judged.get(key)
        for item in found if isinstance(found, list) else []:
            if isinstance(item, dict):
                sentence = str(item.get("sentence") or "")
                row = {"sentence": sentence, "p": item.get("p_yes"), "threshold": threshold}
                if mark_kept:
                    row["kept"] = sentence in kept
                out.append(row)
        return out

    return {
        "confession": rows("confession_paragraphs", thresholds["confession_paragraph"], False),
        "rules": rows("rule_p_yes", thresholds["rule_sentence"], True),
    }


def _mapping(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _strings(value: JSONValue) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _enrichment(md: dict, evidence: dict | None) -> dict:
    """What the LLM produced for a written chunk, with its evidence quotes beside it."""
    ev = evidence or {}
    p_ev = _strings(ev.get("principle_evidence"))
    entities, xref, temporal = (
        _mapping(md.get(k)) for k in ("entities", "cross_references", "temporal_references")
    )
    principles = []
    for i, p in enumerate(md.get("principles") or []):
        if isinstance(p, dict):
            principles.append(
                {
                    "statement": str(p.get("statement", "")),
                    "category": str(p.get("category", "")),
                    "evidence": p_ev[i] if i < len(p_ev) else None,
                }
            )
    return {
        "summary": str(md.get("contextual_summary") or ""),
        "themes": _strings(md.get("themes")),
        "concepts": _strings(md.get("buffett_concepts")),
        "content_type_evidence": _strings(ev.get("content_type_evidence")),
        "principles": principles,
        "entities": {k: _strings(v) for k, v in entities.items()},
        "cross_references": {k: _strings(v) for k, v in xref.items()},
        "temporal": {
            "primary_year": temporal.get("primary_year"),
            "comparison_years": _strings(temporal.get("comparison_years")),
            "future_outlook": bool(temporal.get("future_outlook")),
        },
        "has_financial_data": bool(md.get("has_financial_data")),
        "retrieval_priority": md.get("retrieval_priority"),
        "abstraction_level": md.get("abstraction_level"),
    }


def _tables(md: dict) -> list[dict]:
    out = []
    for t in md.get("table_data") or []:
        if isinstance(t, dict):
            out.append(
                {
                    "name": str(t.get("table_name") or ""),
                    "summary": str(t.get("summary") or ""),
                    "columns": _strings(t.get("columns")),
                    "rows": [_strings(r) for r in t.get("rows") or [] if isinstance(r, list)],
                }
            )
    return out


def _attempts(records: list[dict]) -> list[dict]:
    return [
        {
            "attempt": r.get("attempt"),
            "kind": r.get("kind"),
            "source": r.get("source"),
            "latency_s": r.get("latency_s"),
            "usage": r.get("usage") or {},
            "error": r.get("error"),
            "outcome": r.get("outcome"),
            "asked_fields": r.get("asked_fields") or [],
            "violations": r.get("violations") or [],
            "changes": [
                {
                    "field": c.get("field"),
                    "by": c.get("by"),
                    "diff": word_diff(c.get("before"), c.get("after")),
                }
                for c in r.get("changes") or []
            ],
        }
        for r in records
    ]


def _chunk_view(
    chunk_id: str,
    stem: str,
    runs: list[ChunkRun],
    written: dict | None,
    evidence: dict | None,
    cleaned: str | None,
    checks: list[dict],
    stage: str | None,
    thresholds: dict[str, float],
) -> dict:
    latest = runs[-1].records if runs else []
    last = latest[-1] if latest else {}
    md = _mapping((written or {}).get("metadata"))
    found = (written or {}).get("content")
    content = found if isinstance(found, str) else None
    if content is None:
        content = next(
            (text for r in reversed(latest) if isinstance(text := r.get("content"), str)), None
        )
    where = last.get("span")
    if content is None and cleaned is not None and isinstance(where, list):
        start, end = where[:2]
        if isinstance(start, int) and isinstance(end, int):
            content = cleaned[start:end]
    quotes: dict[str, list[str]] = {}
    if evidence:
        quotes["confession-or-principle"] = _strings(evidence.get("content_type_evidence"))
        quotes["principle"] = _strings(evidence.get("principle_evidence"))
    year = md.get("letter_year") or last.get("letter_year")
    letter = str(year or (chunk_id[:4] if chunk_id[:4].isdigit() else stem))
    if is_compilation_source(cleaned_name(stem)):
        letter = stem  # a compilation's letters of one year are told apart
    if last:
        outcome = last.get("outcome")
    else:  # no report records: what the file itself holds
        outcome = "enriched" if md.get("contextual_summary") else "segmented"
    span = _mapping(md.get("source_span"))
    return {
        "chunk_id": chunk_id,
        "letter": letter,
        "file": stem,
        "outcome": outcome,
        "written": written is not None,
        "stage": stage,
        "section_title": md.get("section_title"),
        "tier": md.get("chunk_tier"),
        "content_type": md.get("content_type") or "unknown",
        "token_count": md.get("token_count"),
        "char_count": md.get("char_count"),
        "span": [span.get("start_char"), span.get("end_char_exclusive")]
        if span
        else last.get("span"),
        "content": content or "",
        "marks": evidence_marks(content or "", quotes) if quotes else [],
        "enrichment": _enrichment(md, evidence) if md.get("contextual_summary") else None,
        "tables": _tables(md),
        "reviewed": [r for r in (evidence or {}).get("reviews") or [] if isinstance(r, dict)],
        "judged": _judged(evidence, thresholds),
        "checks": checks,
        "run_id": runs[-1].run_id if runs else None,
        "attempts": _attempts(latest),
        "history": [
            {"run_id": run.run_id, "outcome": run.outcome, "attempts": _attempts(run.records)}
            for run in runs[:-1]
        ],
    }


# --------------------------------------------------------------------------- HTML


def _json_for_script(data: object) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _template() -> str:
    template = resources.files("letterchunk.report") / "templates" / HTML_NAME
    return template.read_text(encoding="utf-8")


def build_html(
    out_dir: str | Path,
    path: str | Path | None = None,
    *,
    extend: Callable[[dict], None] | None = None,
) -> Path:
    """Write the self-contained ``DIR/report.html``; return its path.  ``extend`` adds to the
    page's data before it is written (the runs and as-of views of
    :func:`letterchunk.report.history.build_history`)."""
    folder = Path(out_dir)
    data = collect(folder)
    if extend is not None:
        extend(data)
    target = Path(path) if path is not None else folder / HTML_NAME
    page = _template().replace("{{title}}", html.escape(f"letterchunk report: {folder.name}"))
    page = page.replace("{{data}}", _json_for_script(data))  # last: data may contain "{{"
    write_output(target, page)
    return target
