"""Which of the fields ``letterchunk diff`` found changed were decided by an analyst.

A run applies the analysts' decisions after the model's answer and marks each in the chunk's
evidence record (``reviews``, ``by: "review"``).  A field of a changed chunk is **by review**
when either run's evidence marks a decision on it (a decision made, or one undone since);
every other changed field is **by the model** (or the segmenter).  The review fields map to
the chunk fields of :func:`letterchunk.report.runs.chunk_fields`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from letterchunk.contract.files import read_evidence
from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.layout import LETTER_CHUNKS, evidence_path
from letterchunk.report.diff import RunDiff

__all__ = ["REVIEW_FIELDS", "review_split", "reviewed_fields", "split_lines"]

#: the chunk field (as the diff names it) each review field decides
REVIEW_FIELDS = {
    "confession": "content_type",
    "rule": "principles",
    "principle_statement": "principles",
    "concepts": "buffett_concepts",
    "summary": "contextual_summary",
}


def reviewed_fields(folder: str | Path) -> dict[tuple[str, str], set[str]]:
    """``(letter, chunk_id) -> {field, ...}`` decided by an analyst in ``folder``'s files."""
    out: dict[tuple[str, str], set[str]] = {}
    folder = Path(folder)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not LETTER_CHUNKS.match(path.name) or not evidence_path(path).is_file():
            continue
        letter = path.name.removesuffix(".jsonl")
        for chunk_id, record in read_evidence(evidence_path(path))[0].items():
            for mark in record.get("reviews", []):
                field = REVIEW_FIELDS.get(mark.get("field", ""))
                if field is not None:
                    out.setdefault((letter, chunk_id), set()).add(field)
    return out


def review_split(d: RunDiff, a: str | Path, b: str | Path) -> JSONObject:
    """The changed fields of ``d`` (run ``a`` -> ``b``) split: ``by_review`` lists each field
    an analyst decided, ``by_model`` counts the others per field; {} when neither run applied
    a review (the diff's own report says it all)."""
    decided_a, decided_b = reviewed_fields(a), reviewed_fields(b)
    if not decided_a and not decided_b:
        return {}
    by_review: list[JSONValue] = []
    by_model: Counter[str] = Counter()
    for chunk in d.chunks:
        key = (chunk.letter, chunk.chunk_id)
        old_key = (chunk.letter, chunk.id_in_a or chunk.chunk_id)
        decided = decided_b.get(key, set()) | decided_a.get(old_key, set())
        for change in chunk.changes:
            if change.field in decided:
                by_review.append(
                    {"letter": chunk.letter, "chunk_id": chunk.chunk_id, "field": change.field}
                )
            else:
                by_model[change.field] += 1
    return {"by_review": by_review, "by_model": dict(sorted(by_model.items()))}


def split_lines(split: JSONObject) -> list[str]:
    """The split as text, after the diff's own report (none for an empty split)."""
    if not split:
        return []
    reviewed = split.get("by_review")
    model = split.get("by_model")
    reviewed = reviewed if isinstance(reviewed, list) else []
    model = model if isinstance(model, dict) else {}
    lines = ["", f"changed by review: {len(reviewed)} field(s)"]
    for r in reviewed:
        if isinstance(r, dict):
            lines.append(f"  {r.get('chunk_id')} {r.get('field')}")
    total = sum(v for v in model.values() if isinstance(v, int))
    lines.append(f"changed by the model or the segmenter: {total} field(s)")
    lines += [f"  {field}: {n}" for field, n in model.items()]
    return lines
