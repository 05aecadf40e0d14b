"""The repair report's records: ``DIR/YYYY.report.jsonl``, one :class:`AttemptRecord` per attempt.

Writing.  :class:`RepairReport` APPENDS the records of one run to its JSONL file, whole lines
at a time and fsynced, as each chunk finishes (:func:`letterchunk.io.append_lines`).  Nothing is
ever overwritten: a cached rerun or a ``letterchunk repair`` adds its own records after those
of the live run, so the tokens, latency and source of every run stay readable.  Every record
carries the ``run_id`` of the run that wrote it (:func:`new_run_id`: UTC time, pid and a random
suffix); an interrupted run leaves complete lines for the chunks it finished.

One line of the file, as :meth:`AttemptRecord.to_dict` writes it (keys in this order)::

    {"chunk_id", "letter_year", "attempt", "kind": "enrich"|"reask"|"file"|"check"|"review",
     "asked_fields", "violations": [{"code", "field", "message", "severity", "rule_kind",
                                     "fixed"?}],
     "changes": [{"field", "before", "after", "by": "code"|"llm"|"review"}],
     "usage": {"prompt_tokens", "completion_tokens"}, "latency_s", "source", "error",
     "outcome": "valid"|"repaired"|"retry"|"failed"|"needs-llm", "span", "content"?, "run_id"}

Reading.  Files on disk may come from older versions or be cut short, so they are read back as
plain dicts: :func:`load_records` skips bad lines with a warning, :func:`runs_by_chunk` groups a
file's records by chunk and run, in file order: the last run of a chunk is its latest, the
others are its history.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.schema import Chunk
from letterchunk.io import append_lines, read_json_objects
from letterchunk.layout import REPORT_SUFFIX
from letterchunk.redact import redact_obj
from letterchunk.review.apply import LetterReviews

__all__ = [
    "AttemptKind",
    "AttemptOutcome",
    "AttemptRecord",
    "ChunkRun",
    "RepairReport",
    "ViolationNote",
    "chunk_records",
    "count_value",
    "load_records",
    "new_run_id",
    "review_records",
    "runs_by_chunk",
    "write_letter_report",
]

log = logging.getLogger(__name__)

# "review": the analysts' decisions applied to a chunk after the model's answer (attempt 0,
# source "review", each change "by": "review" with its reviewer, time and review_id)
AttemptKind = Literal["enrich", "reask", "file", "check", "review"]
AttemptOutcome = Literal["valid", "repaired", "retry", "failed", "needs-llm"]


def new_run_id() -> str:
    """A fresh run id: ``20240501T120000Z-4242-9f1c`` (UTC time, pid, random suffix)."""
    now = _dt.datetime.now(_dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{os.getpid()}-{secrets.token_hex(2)}"


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class ViolationNote:
    """One violation as an attempt saw it.  ``fixed``: whether code fixed it in that attempt
    (None, and left out of the JSON, for a line that never became a chunk)."""

    code: str
    field: str | None
    message: str
    severity: str
    rule_kind: str
    fixed: bool | None = None

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "code": self.code,
            "field": self.field,
            "message": self.message,
            "severity": self.severity,
            "rule_kind": self.rule_kind,
        }
        if self.fixed is not None:
            out["fixed"] = self.fixed
        return out


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt at one chunk: what was asked, found, changed, spent, and how it ended.

    ``changes`` holds each change as ``{"field", "before", "after", "by"}`` (``Change.to_dict``
    of the repair stage).  ``content`` is set only where the output file does not hold the
    chunk's text (a failed chunk, a line that is not a chunk), so the report page can show it.
    """

    chunk_id: str
    letter_year: int | None
    attempt: int
    kind: AttemptKind
    outcome: AttemptOutcome
    asked_fields: tuple[str, ...] = ()
    violations: tuple[ViolationNote, ...] = ()
    changes: tuple[JSONObject, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float | None = None
    source: str = "live"
    error: str | None = None
    span: tuple[int, int] | None = None
    content: str | None = None
    run_id: str | None = None  # set by the RepairReport that writes it

    def to_dict(self) -> JSONObject:
        """The JSON line, keys in the order of the module docstring."""
        out: JSONObject = {
            "chunk_id": self.chunk_id,
            "letter_year": self.letter_year,
            "attempt": self.attempt,
            "kind": self.kind,
            "asked_fields": list(self.asked_fields),
            "violations": [v.to_dict() for v in self.violations],
            "changes": list(self.changes),
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            },
            "latency_s": self.latency_s,
            "source": self.source,
            "error": self.error,
            "outcome": self.outcome,
            "span": list(self.span) if self.span is not None else None,
        }
        if self.content is not None:
            out["content"] = self.content
        if self.run_id is not None:
            out["run_id"] = self.run_id
        return out

    def redacted(self) -> AttemptRecord:
        """A copy with API keys and URL credentials masked in every text (error texts can echo
        the key)."""
        values = {f.name: redact_obj(getattr(self, f.name)) for f in fields(self)}
        values["violations"] = tuple(
            ViolationNote(**{f.name: redact_obj(getattr(v, f.name)) for f in fields(v)})
            for v in self.violations
        )
        return replace(self, **values)


@dataclass(frozen=True)
class UnreadLineRecord(AttemptRecord):
    """The record of a chunk-file line that never became a chunk (not JSON, not canonical).

    Written with ``changes`` before ``violations``, the order readers of such lines expect.
    """

    def to_dict(self) -> JSONObject:
        out = super().to_dict()
        order = ["chunk_id", "letter_year", "attempt", "kind", "asked_fields", "changes"]
        return {k: out[k] for k in order} | {k: v for k, v in out.items() if k not in order}


# --------------------------------------------------------------------------- from the pipeline


class TokenUsage(Protocol):
    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


class FinishedChunk(Protocol):
    """What the pipeline knows of one chunk when it is done (``runner.pipeline.ChunkOutcome``)."""

    @property
    def chunk_id(self) -> str: ...

    @property
    def chunk(self) -> Chunk | None: ...

    @property
    def usage(self) -> TokenUsage: ...

    @property
    def latency_s(self) -> float | None: ...

    @property
    def cache_hits(self) -> int: ...

    @property
    def records(self) -> Sequence[AttemptRecord]: ...


class FinishedLetter(Protocol):
    """The chunks one letter finished (``runner.pipeline.LetterOutcome``)."""

    @property
    def outcomes(self) -> Sequence[FinishedChunk]: ...


class Halt(Protocol):
    """The error that stopped a letter, with the records of the chunk it stopped on
    (``errors.RepairExhausted``)."""

    @property
    def records(self) -> Sequence[AttemptRecord]: ...


def chunk_records(
    outcome: FinishedChunk, year: int | None = None, source: str | None = None
) -> list[AttemptRecord]:
    """Report records of one finished pipeline chunk.

    A chunk whose first answer was valid never entered the repair loop and has no records of its
    own; it gets one ``enrich`` record (usage, latency, source) so the totals count every chunk.
    """
    if outcome.records:
        return [_relabel(r, source) for r in outcome.records]
    chunk = outcome.chunk
    span = None
    if chunk is not None:
        ss = chunk.metadata.source_span
        span = (ss.start_char, ss.end_char_exclusive)
        year = chunk.metadata.letter_year
    latency = outcome.latency_s
    # the record is the structured call's: the yes/no questions asked after it (their usage is
    # in the outcome's total and in run.json) are not attempts of the repair loop
    asked = getattr(getattr(outcome, "verdicts", None), "usage", None)
    prompt = int(outcome.usage.prompt_tokens or 0) - int(getattr(asked, "prompt_tokens", 0))
    completion = int(outcome.usage.completion_tokens or 0) - int(
        getattr(asked, "completion_tokens", 0)
    )
    return [
        AttemptRecord(
            chunk_id=outcome.chunk_id,
            letter_year=year if year is not None else int(outcome.chunk_id[:4]),
            attempt=1,
            kind="enrich",
            outcome="valid" if chunk is not None else "failed",
            prompt_tokens=prompt,
            completion_tokens=completion,
            latency_s=round(float(latency), 4) if latency is not None else None,
            source="cache" if outcome.cache_hits else (source or "live"),
            span=span,
        )
    ]


def _relabel(record: AttemptRecord, source: str | None) -> AttemptRecord:
    if source and record.source == "live":
        return replace(record, source=source)
    return record


_Done = TypeVar("_Done", bound=FinishedChunk)  # the pipeline's own outcome type, passed on


def review_records(done: LetterReviews | None, year: int | str) -> list[AttemptRecord]:
    """One ``review`` record per chunk the analysts' decisions changed: its changes, each
    ``by: "review"`` with who decided it and when."""
    by_chunk: dict[str, list[JSONObject]] = {}
    for a in done.applied if done is not None else ():
        r = a.placed.record
        extra = {"reviewer": r.reviewer, "time": r.time, "review_id": r.id}
        by_chunk.setdefault(a.placed.chunk_id, []).extend({**c, **extra} for c in a.changes)
    return [
        AttemptRecord(
            chunk_id=chunk_id,
            letter_year=int(str(year)[:4]),
            attempt=0,
            kind="review",
            outcome="valid",
            changes=tuple(changes),
            source="review",
        )
        for chunk_id, changes in by_chunk.items()
        if changes
    ]


# --------------------------------------------------------------------------- writing


class RepairReport:
    """The records one run adds to one ``X.report.jsonl``.

    :meth:`add` appends records to the file at once (whole lines, fsynced); :meth:`flush`
    appends those put straight into :attr:`records`.  Lines already in the file, from earlier
    runs, are never touched.  Each record gets this run's ``run_id`` unless it has one, and
    ``source`` relabels answers the HTTP layer calls "live" (e.g. "cassette" under vcrpy
    replay).  Safe to share between the threads of one run.
    """

    def __init__(
        self, path: str | Path, *, run_id: str | None = None, source: str | None = None
    ) -> None:
        self.path = Path(path)
        self.run_id = run_id or new_run_id()
        self.source = source
        self.records: list[AttemptRecord] = []
        self._written = 0
        self._lock = threading.RLock()

    @classmethod
    def for_letter(
        cls,
        out_dir: str | Path,
        year: int | str,
        *,
        run_id: str | None = None,
        source: str | None = None,
    ) -> RepairReport:
        return cls(Path(out_dir) / f"{year}{REPORT_SUFFIX}", run_id=run_id, source=source)

    def add(self, records: Iterable[AttemptRecord]) -> None:
        with self._lock:
            self.records.extend(records)
            self.flush()

    def flush(self) -> None:
        with self._lock:
            pending = [
                replace(r, run_id=r.run_id or self.run_id) for r in self.records[self._written :]
            ]
            self.records[self._written :] = pending
            append_lines(self.path, [json.dumps(r.to_dict(), ensure_ascii=False) for r in pending])
            self._written = len(self.records)

    def add_outcome(self, outcome: FinishedChunk) -> None:
        """The records of one finished pipeline chunk."""
        self.add(chunk_records(outcome, source=self.source))

    def chunk_hook(self, then: Callable[[_Done], None] | None = None) -> Callable[[_Done], None]:
        """A ``Hooks.chunk_done`` that appends each finished chunk's records, then calls
        ``then``."""

        def done(outcome: _Done) -> None:
            self.add_outcome(outcome)
            if then is not None:
                then(outcome)

        return done

    @property
    def usage(self) -> dict[str, int]:
        """Tokens over every attempt this run recorded."""
        return {
            "prompt_tokens": sum(r.prompt_tokens for r in self.records),
            "completion_tokens": sum(r.completion_tokens for r in self.records),
        }


def write_letter_report(
    out_dir: str | Path,
    year: int,
    outcome: FinishedLetter | None = None,
    failure: Halt | None = None,
    *,
    source: str | None = None,
    run_id: str | None = None,
) -> Path:
    """Append one letter's records of a pipeline run to ``DIR/YYYY.report.jsonl``.

    ``outcome`` is the ``pipeline.LetterOutcome`` (or the ``partial`` one a halt carries);
    ``failure`` the ``RepairExhausted`` that halted the letter, whose ``records`` name the chunk
    that stopped it.
    ``source="cassette"`` labels answers that the HTTP layer calls live but a vcrpy cassette
    really served.  The pipeline itself appends chunk by chunk (:meth:`RepairReport.chunk_hook`);
    this writes a whole letter at once.
    """
    report = RepairReport.for_letter(out_dir, year, run_id=run_id, source=source)
    found: list[AttemptRecord] = []
    for chunk_outcome in outcome.outcomes if outcome is not None else ():
        found += chunk_records(chunk_outcome, year, source)
    found += [_relabel(r, source) for r in (failure.records if failure is not None else ())]
    report.add(found)
    return report.path


# --------------------------------------------------------------------------- reading


def read_jsonl(path: Path, *, lenient: bool = False) -> list[JSONObject]:
    """The JSON objects of one JSONL file ([] when it is absent); bad lines are skipped with a
    warning.  InputError when ``path`` is not a regular file of UTF-8 text; with ``lenient``
    (sidecars and logs) bytes that are not UTF-8 only spoil their own line."""
    if not path.exists() and not path.is_symlink():
        return []
    objects, bad = read_json_objects(path, lenient=lenient)
    for n, reason in bad:
        log.warning("%s:%d: skipped, %s", path, n, reason)
    return objects


def load_records(path: str | Path) -> list[JSONObject]:
    """The records of one ``*.report.jsonl`` (bad lines are skipped with a warning)."""
    return read_jsonl(Path(path), lenient=True)


@dataclass
class ChunkRun:
    """The records one run wrote for one chunk, by attempt."""

    run_id: str | None  # None for records that carry no run_id
    records: list[JSONObject] = field(default_factory=list)  # report lines as read

    @property
    def outcome(self) -> str | None:
        outcome = self.records[-1].get("outcome") if self.records else None
        return outcome if isinstance(outcome, str) else None

    def tokens(self, key: str) -> int:
        total = 0
        for r in self.records:
            usage = r.get("usage")
            total += count_value(usage.get(key)) if isinstance(usage, dict) else 0
        return total


def count_value(value: JSONValue) -> int:
    """``int(value or 0)`` for a count read from a report line (a list or an object fails as
    int() would)."""
    if isinstance(value, list | dict):
        raise TypeError(f"not a count: {value!r}")
    return int(value or 0)


def _attempt(record: JSONObject) -> int | float:
    number = record.get("attempt")
    return number if isinstance(number, int | float) else 0


def runs_by_chunk(records: Iterable[JSONObject]) -> dict[str, list[ChunkRun]]:
    """``chunk_id -> [ChunkRun, ...]`` in the order the runs first appended: latest last.

    Records without a ``run_id`` count as one run, placed where the first of them appears.
    """
    out: dict[str, dict[str | None, ChunkRun]] = {}
    for rec in records:
        runs = out.setdefault(str(rec.get("chunk_id")), {})
        found = rec.get("run_id")
        run_id = found if isinstance(found, str) else None
        runs.setdefault(run_id, ChunkRun(run_id, [])).records.append(rec)
    for runs in out.values():
        for run in runs.values():
            run.records.sort(key=_attempt)
    return {cid: list(runs.values()) for cid, runs in out.items()}
