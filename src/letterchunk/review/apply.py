"""The analysts' decisions applied after the model's answer: the analyst wins.

:func:`apply_reviews` takes a letter's chunks as a run is about to write them, with their
evidence records, and the decisions in force (:func:`~letterchunk.review.records.
effective_reviews`).  Each decision is placed on its chunk (:mod:`letterchunk.review.anchor`),
applied, and the chunk validated again: a decision the validator rejects is not applied
(``refused``, with the validator's message).  What each field's decision does:

* ``confession``: the decision on one paragraph (``target``: its quoted sentence).  The chunk
  is ``mistake_confession`` when a paragraph the analyst said yes to, or an unreviewed one whose
  recorded probability reaches the run's threshold, confesses (quoting the analyst's sentence
  first, else the most probable one); when every paragraph is decided no, a
  ``mistake_confession`` chunk becomes ``narrative``;
* ``rule``: yes keeps (or adds, stated by its own sentence, category ``general``) the principle
  whose evidence is ``target``; no removes it.  The cap on principles a chunk keeps is the
  model's: an analyst's yes is kept on top of it;
* ``principle_statement``: the statement of the principle whose evidence is ``target``;
* ``concepts`` / ``summary``: ``buffett_concepts`` / ``contextual_summary`` replaced;
* ``chunk``: an acknowledgement; nothing changes.

Each applied decision is marked in the chunk's evidence record under ``reviews``
(``by: "review"``), and the changes it made are returned for the repair report.  A chunk not
enriched yet is left as it is and its reviews are ``waiting``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.predicates import normalise_ws
from letterchunk.contract.schema import Chunk, Principle
from letterchunk.contract.validate import LetterContext, validate_chunk
from letterchunk.contract.violations import EvidenceRecord, ReviewMark
from letterchunk.errors import InputError
from letterchunk.review.anchor import Placed, Stale, anchor_reviews
from letterchunk.review.folder import letter_keys, read_letter, thresholds_of
from letterchunk.review.records import ReviewRecord, effective_reviews, read_reviews
from letterchunk.review.thresholds import BUILT_IN, Thresholds

__all__ = [
    "FIELD_PATHS",
    "Applied",
    "FolderReviews",
    "LetterReviews",
    "apply_one",
    "apply_reviews",
    "folder_reviews",
    "validate_review",
]

#: the chunk field each review field changes (``chunk``: none)
FIELD_PATHS: dict[str, str | None] = {
    "confession": "metadata.content_type",
    "rule": "metadata.principles",
    "principle_statement": "metadata.principles",
    "concepts": "metadata.buffett_concepts",
    "summary": "metadata.contextual_summary",
    "chunk": None,
}


@dataclass(frozen=True)
class Applied:
    """A decision applied to a chunk, and what it changed (``{"field", "before", "after",
    "by": "review"}``, the repair report's change form)."""

    placed: Placed
    changes: tuple[JSONObject, ...] = ()


@dataclass
class LetterReviews:
    """A letter's chunks and evidence with the decisions applied, and what became of each."""

    letter: str
    chunks: list[Chunk]
    evidence: dict[str, EvidenceRecord]
    applied: list[Applied] = field(default_factory=list)
    unapplied: list[Stale] = field(default_factory=list)  # stale, refused or waiting

    @property
    def stale(self) -> list[Stale]:
        return [s for s in self.unapplied if s.kind == "stale"]


def _json(value: object) -> JSONValue:
    out: JSONValue = json.loads(json.dumps(value, default=str))
    return out


def _rebuilt(chunk: Chunk, **update: object) -> Chunk:
    meta = chunk.metadata.model_copy(update=update).model_dump(mode="python")
    return Chunk.model_validate(
        {"chunk_id": chunk.chunk_id, "content": chunk.content, "metadata": meta}
    )


def _confession(
    chunk: Chunk,
    record: EvidenceRecord,
    decided: dict[str, bool],
    threshold: float,
) -> tuple[Chunk, EvidenceRecord]:
    """The chunk's confession tag from the analysts' paragraph decisions (``decided``:
    sentence -> yes/no) and, for the paragraphs they did not decide, the recorded
    probabilities at ``threshold``."""
    judged = record.get("judgements", {}).get("confession_paragraphs", [])
    votes: list[tuple[int, float, str, bool]] = []  # (reviewed, p, sentence, yes)
    for s, yes in decided.items():
        votes.append((1, 1.0, s, yes))
    for item in judged:
        s, p = item["sentence"], item["p_yes"]
        if s not in decided and p is not None:
            votes.append((0, p, s, p >= threshold))
    yes_votes = sorted((v for v in votes if v[3]), key=lambda v: (-v[0], -v[1]))
    meta = chunk.metadata
    out = dict(record)
    if yes_votes:
        quote = yes_votes[0][2]
        if meta.content_type == "mistake_confession" and record.get("content_type_evidence") == [
            quote
        ]:
            return chunk, record
        out["content_type_evidence"] = [quote]
        return _rebuilt(chunk, content_type="mistake_confession"), out  # type: ignore[return-value]
    if meta.content_type == "mistake_confession":
        out["content_type_evidence"] = []
        return _rebuilt(chunk, content_type="narrative"), out  # type: ignore[return-value]
    return chunk, record


def _rule_p(record: EvidenceRecord) -> dict[str, float | None]:
    return {r["sentence"]: r["p_yes"] for r in record.get("judgements", {}).get("rule_p_yes", [])}


def _with_principles(
    chunk: Chunk, record: EvidenceRecord, principles: list[Principle], quotes: list[str]
) -> tuple[Chunk, EvidenceRecord]:
    out = dict(record)
    out["principle_evidence"] = quotes
    judgements = record.get("judgements")
    if judgements is not None:
        p_of = _rule_p(record)
        out["judgements"] = {**judgements, "principle_p_yes": [p_of.get(q) for q in quotes]}
    return _rebuilt(chunk, principles=principles), out  # type: ignore[return-value]


def _rule(
    chunk: Chunk, record: EvidenceRecord, sentence: str, yes: bool
) -> tuple[Chunk, EvidenceRecord]:
    principles = list(chunk.metadata.principles)
    quotes = list(record.get("principle_evidence", []))
    if len(quotes) != len(principles):  # a sidecar another tool wrote: no evidence to match
        return chunk, record
    present = [i for i, q in enumerate(quotes) if q == sentence]
    if yes and not present:
        principles.insert(0, Principle(statement=normalise_ws(sentence), category="general"))
        quotes.insert(0, sentence)
    elif not yes and present:
        principles = [p for i, p in enumerate(principles) if i not in present]
        quotes = [q for i, q in enumerate(quotes) if i not in present]
    else:
        return chunk, record
    return _with_principles(chunk, record, principles, quotes)


def _statement(
    chunk: Chunk, record: EvidenceRecord, quote: str, statement: str
) -> tuple[Chunk, EvidenceRecord]:
    quotes = list(record.get("principle_evidence", []))
    principles = list(chunk.metadata.principles)
    if quote not in quotes or len(quotes) != len(principles):
        return chunk, record
    i = quotes.index(quote)
    principles[i] = principles[i].model_copy(update={"statement": statement})
    return _with_principles(chunk, record, principles, quotes)


def apply_one(
    chunk: Chunk,
    record: EvidenceRecord,
    review: ReviewRecord,
    *,
    decided: dict[str, bool] | None = None,
    thresholds: Thresholds = BUILT_IN,
) -> tuple[Chunk, EvidenceRecord]:
    """``(chunk, evidence record)`` with one decision applied (see the module docstring);
    ``decided``: the confession decisions already applied to the chunk (sentence -> yes/no),
    which this one joins.  ValueError when the decision's value has the wrong type."""
    value, target = review.value, review.target or review.quote
    if review.decision in ("skip", "undo") or value is None or review.field == "chunk":
        return chunk, record
    if review.field == "confession":
        if not isinstance(value, bool) or not target:
            raise ValueError("a confession decision is yes or no on a quoted paragraph")
        votes = {**(decided or {}), target: value}
        return _confession(chunk, record, votes, thresholds.confession_paragraph)
    if review.field == "rule":
        if not isinstance(value, bool) or not target:
            raise ValueError("a rule decision is yes or no on a quoted sentence")
        return _rule(chunk, record, target, value)
    if review.field == "principle_statement":
        if not isinstance(value, str) or not value.strip() or not target:
            raise ValueError("a principle statement is a non-empty text, on a quoted principle")
        return _statement(chunk, record, target, value)
    if review.field == "concepts":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("concepts are a list of concept names")
        return _rebuilt(chunk, buffett_concepts=list(value)), record
    if not isinstance(value, str):  # summary
        raise ValueError("a summary is a text")
    return _rebuilt(chunk, contextual_summary=value), record


def _field_value(chunk: Chunk, path: str | None) -> JSONValue:
    if path is None:
        return None
    return _json(chunk.model_dump(mode="json")["metadata"][path.split(".", 1)[1]])


def _mark(placed: Placed) -> ReviewMark:
    r = placed.record
    return {
        "id": r.id,
        "field": r.field,
        "target": r.target,
        "decision": r.decision,
        "model_value": r.model_value,
        "value": r.value,
        "reviewer": r.reviewer,
        "time": r.time,
        "anchor": placed.how,
        "by": "review",
    }


def _errors(chunk: Chunk, record: EvidenceRecord, context: LetterContext | None) -> str | None:
    ctx = dataclasses.replace(context or LetterContext(), evidence={chunk.chunk_id: record})
    found = [
        v for v in validate_chunk(chunk, stage="enriched", context=ctx) if v.severity == "error"
    ]
    return "; ".join(f"{v.code}: {v.message}" for v in found[:3]) if found else None


def _is_enriched(chunk: Chunk) -> bool:
    return bool(chunk.metadata.contextual_summary.strip())


def apply_reviews(
    letter: str,
    chunks: Sequence[Chunk],
    evidence: dict[str, EvidenceRecord],
    reviews: Iterable[ReviewRecord],
    *,
    context: LetterContext | None = None,
    thresholds: Thresholds = BUILT_IN,
) -> LetterReviews:
    """The letter's ``chunks`` and ``evidence`` with the decisions in force (``reviews``,
    already folded by :func:`~letterchunk.review.records.effective_reviews`) applied, in
    order; each one validated (``context``: the letter's, as the run checks its chunks)."""
    placed, stale = anchor_reviews(reviews, letter, chunks)
    result = LetterReviews(letter, list(chunks), dict(evidence), unapplied=list(stale))
    index = {c.chunk_id: i for i, c in enumerate(result.chunks)}
    decided: dict[str, dict[str, bool]] = {}
    for p in placed:
        i = index[p.chunk_id]
        chunk = result.chunks[i]
        if not _is_enriched(chunk):
            why = "the chunk is not enriched in this folder yet; applied once it is"
            result.unapplied.append(Stale(p.record, why, "waiting"))
            continue
        record: EvidenceRecord = result.evidence.get(chunk.chunk_id) or {"chunk_id": chunk.chunk_id}
        votes = decided.setdefault(chunk.chunk_id, {})
        try:
            new, new_record = apply_one(
                chunk, record, p.record, decided=votes, thresholds=thresholds
            )
        except ValueError as exc:
            result.unapplied.append(Stale(p.record, str(exc), "refused"))
            continue
        problem = _errors(new, new_record, context) if new is not chunk else None
        if problem:
            result.unapplied.append(Stale(p.record, f"the validator refuses it: {problem}"))
            result.unapplied[-1] = dataclasses.replace(result.unapplied[-1], kind="refused")
            continue
        if p.record.field == "confession" and isinstance(p.record.value, bool):
            votes[p.record.target or p.record.quote or ""] = p.record.value
        path = FIELD_PATHS[p.record.field]
        before, after = _field_value(chunk, path), _field_value(new, path)
        changes: tuple[JSONObject, ...] = ()
        if path is not None and before != after:
            changes = ({"field": path, "before": before, "after": after, "by": "review"},)
        marks = [m for m in new_record.get("reviews", []) if m["id"] != p.record.id]
        new_record = {**new_record, "reviews": [*marks, _mark(p)]}
        result.chunks[i] = new
        result.evidence[chunk.chunk_id] = new_record
        result.applied.append(Applied(p, changes))
    return result


def validate_review(folder: Path, record: ReviewRecord) -> str | None:
    """Why ``record`` cannot be saved for the output folder ``folder`` (its chunk is not
    there, its value has the wrong type, or the chunk with it applied breaks the validator,
    whose message is returned), else None."""
    try:
        letter = read_letter(folder, record.letter)
    except InputError as exc:
        return str(exc)
    placed, stale = anchor_reviews([record], record.letter, letter.chunks)
    if stale:
        return stale[0].reason
    chunk = next(c for c in letter.chunks if c.chunk_id == placed[0].chunk_id)
    evidence = letter.evidence.get(chunk.chunk_id) or {"chunk_id": chunk.chunk_id}
    try:
        new, new_record = apply_one(chunk, evidence, record, thresholds=thresholds_of(folder))
    except ValueError as exc:
        return str(exc)
    if new is chunk:
        return None
    return _errors(new, new_record, letter.context)


def folder_reviews(folder: Path) -> FolderReviews:
    """The decisions in force of ``folder/reviews.jsonl`` placed on the folder's letters as
    they are now: applied (the run wrote them, or will on its next run), stale, refused or
    waiting; reviews of letters not in the folder are stale.  ReviewFileError on a corrupt
    line."""
    in_force = list(effective_reviews(read_reviews(folder)).values())
    keys = letter_keys(folder) if folder.is_dir() else []
    thresholds = thresholds_of(folder)
    out = FolderReviews(in_force=len(in_force))
    for key in keys:
        mine = [r for r in in_force if r.letter == key]
        if not mine:
            continue
        letter = read_letter(folder, key)
        done = apply_reviews(
            key,
            letter.chunks,
            letter.evidence,
            mine,
            context=letter.context,
            thresholds=thresholds,
        )
        out.letters[key] = done
    for r in in_force:
        if r.letter not in keys:
            out.orphans.append(Stale(r, f"letter {r.letter} is not in this folder"))
    return out


@dataclass
class FolderReviews:
    """:func:`folder_reviews`: per letter, what became of its decisions."""

    in_force: int = 0
    letters: dict[str, LetterReviews] = field(default_factory=dict)
    orphans: list[Stale] = field(default_factory=list)  # reviews of letters not in the folder

    @property
    def applied(self) -> list[Applied]:
        return [a for r in self.letters.values() for a in r.applied]

    @property
    def unapplied(self) -> list[Stale]:
        return [s for r in self.letters.values() for s in r.unapplied] + self.orphans
