"""The analysts' decisions: ``DIR/reviews.jsonl``, one :class:`ReviewRecord` a line.

The file is append-only.  A decision is never rewritten: an analyst who changes their mind
appends another decision for the same item (the last one counts) or an ``undo`` naming the
record it cancels.  :func:`effective_reviews` folds the file into the decisions in force.

Crash safety: :func:`append_review` writes the whole line with one ``os.write`` on an
``O_APPEND`` descriptor while holding an exclusive ``fcntl`` lock on the file, then fsyncs, so
two writers (two browser tabs, the page and an import) never interleave and ``kill -9`` loses
at most the line being written.  A torn last line (no newline: the writer died mid-write) is
skipped by :func:`read_reviews` with a warning, and the next append starts on a fresh line.  Any
other unreadable line is an error naming ``file:line``: nothing is guessed and nothing dropped.

The anchor of a decision is the chunk it was made on: its letter, its id, the SHA-256 of its
content and the evidence quote judged.  ``letterchunk.review.anchor`` finds the chunk again
after a re-segmentation.
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from letterchunk.contract.jsontypes import JSONValue
from letterchunk.errors import LetterchunkError
from letterchunk.io import append_lines, jsonl_lines, read_utf8
from letterchunk.layout import REVIEWS_FILE

__all__ = [
    "DECISIONS",
    "FIELDS",
    "REVIEWS_FILE",
    "Decision",
    "Field",
    "ReviewFileError",
    "ReviewRecord",
    "AnchorKey",
    "anchor_key",
    "append_review",
    "default_reviewer",
    "effective_reviews",
    "new_record",
    "read_reviews",
    "text_sha256",
]

log = logging.getLogger(__name__)


#: what a decision is about.  ``confession``: a confession paragraph question (``target`` its
#: quoted sentence); ``rule``: a candidate rule sentence (``target`` the sentence);
#: ``principle_statement``: a principle's statement edited (``target`` its evidence quote);
#: ``concepts`` / ``summary``: the chunk's concepts or contextual summary edited; ``chunk``: a
#: repaired, halted or warned chunk acknowledged.
Field = Literal["confession", "rule", "principle_statement", "concepts", "summary", "chunk"]
Decision = Literal["accept", "reject", "skip", "edit", "undo"]

FIELDS: tuple[str, ...] = get_args(Field)
DECISIONS: tuple[str, ...] = get_args(Decision)

#: (``letter/chunk_id#text_sha256``, field, target): one reviewed item
AnchorKey = tuple[str, str, str | None]


class ReviewFileError(LetterchunkError):
    """A line of ``reviews.jsonl`` that cannot be read; carries ``path`` and ``line``."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(
            f"{self.path}:{line}: {reason}; nothing was changed: fix or delete that line "
            "(every other line is kept as it is), then run the command again"
        )


def text_sha256(text: str) -> str:
    """The anchor hash of a chunk's content: SHA-256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ReviewRecord:
    """One analyst decision: one line of ``reviews.jsonl`` (keys in this order)."""

    id: str  # uuid4 hex, made by new_record
    chunk_id: str
    letter: str  # the output file stem, e.g. "1977" or "1962-L2"
    text_sha256: str  # sha256 of the chunk's content (UTF-8) when reviewed
    quote: str | None  # the evidence sentence or paragraph judged, or None
    field: Field
    target: str | None  # which item within the field; None for chunk-wide fields
    model_value: JSONValue  # what the model decided
    model_p: float | None  # the yes-probability recorded, if any
    threshold: float | None  # the threshold in force when reviewed
    decision: Decision
    value: JSONValue  # the analyst's value (None for skip / undo)
    undoes: str | None  # for "undo": the id of the record it cancels
    reviewer: str
    time: str  # ISO 8601 UTC
    run: dict[str, str]  # {"model": ..., "prompts_sha256": ...} of the run reviewed

    def to_json(self) -> str:
        """One line of JSON (no newline inside: json escapes every control character)."""
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)

    @property
    def key(self) -> AnchorKey:
        return anchor_key(self)

    @classmethod
    def from_json(cls, value: Any) -> ReviewRecord:
        """The record of a parsed line; ValueError saying what is wrong otherwise."""
        if not isinstance(value, Mapping):
            raise ValueError("not a JSON object")
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in value]
        extra = sorted(set(value) - set(names))
        if missing or extra:
            raise ValueError(
                "not a review record"
                + (f" (missing {', '.join(missing)})" if missing else "")
                + (f" (unknown {', '.join(extra)})" if extra else "")
            )
        record = cls(**{n: value[n] for n in names})
        _check(record)
        return record


def _check(r: ReviewRecord) -> None:
    strings = ("id", "chunk_id", "letter", "text_sha256", "reviewer", "time")
    for name in strings:
        if not isinstance(getattr(r, name), str) or not getattr(r, name):
            raise ValueError(f"{name} must be a non-empty string")
    for name in ("quote", "target", "undoes"):
        if getattr(r, name) is not None and not isinstance(getattr(r, name), str):
            raise ValueError(f"{name} must be a string or null")
    if r.field not in FIELDS:
        raise ValueError(f"field {r.field!r} is not one of {', '.join(FIELDS)}")
    if r.decision not in DECISIONS:
        raise ValueError(f"decision {r.decision!r} is not one of {', '.join(DECISIONS)}")
    for name in ("model_p", "threshold"):
        p = getattr(r, name)
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float)):
            raise ValueError(f"{name} must be a number or null")
        if p is not None and not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} {p} is not a probability between 0 and 1")
    if r.decision == "undo" and not r.undoes:
        raise ValueError("an undo names the record it cancels in undoes")
    yes_no = r.field in ("confession", "rule")
    if r.decision in ("accept", "reject") and yes_no and not isinstance(r.value, bool):
        raise ValueError(f"value of a {r.decision} on {r.field} must be true or false")
    if not isinstance(r.run, dict) or not all(isinstance(v, str) for v in r.run.values()):
        raise ValueError("run must be an object of strings")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def default_reviewer() -> str:
    """The reviewer when ``--reviewer`` is not given: the login name, else ``"unknown"``."""
    try:
        return getpass.getuser() or "unknown"
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return "unknown"


def new_record(**fields: Any) -> ReviewRecord:
    """A record with a fresh ``id`` and the current ``time`` (either may be given instead);
    optional fields default to None, ``run`` to ``{}``.  ValueError when a field is wrong."""
    fields.setdefault("id", uuid.uuid4().hex)
    fields.setdefault("time", _now())
    for name in ("quote", "target", "model_value", "model_p", "threshold", "value", "undoes"):
        fields.setdefault(name, None)
    fields.setdefault("run", {})
    record = ReviewRecord(**fields)
    _check(record)
    return record


def anchor_key(record: ReviewRecord) -> AnchorKey:
    """The item a decision is about: its chunk (letter, id and content hash), field and
    target.  Two decisions with one key: the later one is in force."""
    return (f"{record.letter}/{record.chunk_id}#{record.text_sha256}", record.field, record.target)


def append_review(folder: Path, record: ReviewRecord) -> None:
    """Append ``record`` to ``folder/reviews.jsonl``: one ``os.write`` of the whole line with
    ``O_APPEND`` under an exclusive ``fcntl`` lock, then fsync (:func:`letterchunk.io.
    append_lines`).  A torn last line left by a crash gets its newline first, so the new line
    starts fresh."""
    append_lines(Path(folder) / REVIEWS_FILE, [record.to_json()], lock=True)


def read_reviews(folder: Path) -> list[ReviewRecord]:
    """Every record of ``folder/reviews.jsonl`` in file order ([] when there is none).

    A torn final line (no trailing newline, not JSON) is skipped with a warning; any other
    unreadable line raises :class:`ReviewFileError` naming it.  Blank lines are ignored."""
    path = Path(folder) / REVIEWS_FILE
    if not path.exists():
        return []
    text = read_utf8(path, "the reviews file letterchunk review writes (one JSON object a line)")
    lines = jsonl_lines(text)
    torn = not text.endswith("\n")
    records: list[ReviewRecord] = []
    for i, line in enumerate(lines):
        if line.blank:
            continue
        if line.error and torn and i == len(lines) - 1:
            log.warning("%s:%d: torn last line (an interrupted write), skipped", path, line.number)
            continue
        try:
            if line.error:
                raise ValueError(line.error)
            records.append(ReviewRecord.from_json(line.value))
        except (ValueError, TypeError) as exc:
            raise ReviewFileError(path, line.number, str(exc)) from None
    return records


def effective_reviews(records: Iterable[ReviewRecord]) -> dict[AnchorKey, ReviewRecord]:
    """The decision in force per item (:func:`anchor_key`): the last decision in file order,
    an ``undo`` cancelling the record it names (the item then falls back to its previous
    decision, or to none), ``skip`` and ``undo`` never counting as decisions.  An undo can be
    undone in turn (a redo): read from the end, only an undo still in force cancels."""
    records = list(records)
    cancelled: set[str] = set()
    for r in reversed(records):
        if r.decision == "undo" and r.id not in cancelled and r.undoes:
            cancelled.add(r.undoes)
    out: dict[AnchorKey, ReviewRecord] = {}
    for r in records:
        if r.decision in ("skip", "undo") or r.id in cancelled:
            continue
        out[r.key] = r
    return out
