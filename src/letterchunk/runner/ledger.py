"""Per-run accounting: requests, tokens, repairs, cache hits, wall time and cost.

One :class:`Ledger` per run, shared by every worker (thread-safe).  The pipeline records each
LLM completion and each repair against its letter — every call, whatever became of its chunk
(valid, skipped, halted on, stopped by a cap or Ctrl-C) — and, per letter, whether it was
written complete or left *incomplete* (chunks kept as segmented: :meth:`Ledger.record_letter`,
``"state"`` and ``"pending_chunk_ids"`` in ``run.json``, a line in the summary saying to rerun).
At the end the CLI prints
:meth:`Ledger.summary_lines` and the pipeline writes :meth:`Ledger.write` → ``DIR/run.json``
(atomic).  ``"identity"`` in ``run.json`` says what made the run (model and settings, prompt and
schema hashes, vocabularies, letterchunk version, start time: :mod:`letterchunk.runner.identity`).

Prices live in a JSON file, ``letterchunk/data/prices.json`` by default (package data, so it is
installed with the wheel like the tokenizer file; it is configuration, not a schema, which is why
it is not under ``schemas/``).  ``LETTERCHUNK_PRICES`` or an explicit path replaces it.  A model
missing from the table has an *unknown* cost: ``cost_usd`` is ``null`` in ``run.json`` and the
summary says "unknown", never 0.  A model's entry may also give ``batch_input_per_mtok`` and
``batch_output_per_mtok``, the Batch API's rate: tokens a run's batches billed
(:class:`BatchSpend`, set by ``letterchunk batch collect``) are priced at it, under ``"batch"`` in
``run.json``, beside the live figures.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from letterchunk.errors import ConfigError
from letterchunk.io import atomic_write_text
from letterchunk.layout import CHUNKS_SUFFIX, RUN_FILE
from letterchunk.redact import redact
from letterchunk.review.thresholds import Thresholds
from letterchunk.settings import Settings

if TYPE_CHECKING:  # the records the ledger counts; the pipeline imports nothing from here
    from letterchunk.llm.client import Usage
    from letterchunk.runner.pipeline import ChunkOutcome

__all__ = [
    "BatchSpend",
    "ModelPrice",
    "load_prices",
    "price_for",
    "LetterTotals",
    "Ledger",
]

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ModelPrice:
    model: str
    input_per_mtok: float
    output_per_mtok: float
    batch_input_per_mtok: float | None = None  # the Batch API's rate; None: not in the table
    batch_output_per_mtok: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6

    def batch_cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.batch_input_per_mtok is None or self.batch_output_per_mtok is None:
            return None
        return (
            prompt_tokens * self.batch_input_per_mtok
            + completion_tokens * self.batch_output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class BatchSpend:
    """What a run's batches answered and billed (``"batch"`` in ``run.json``)."""

    batch_ids: list[str]
    prompt_tokens: int
    completion_tokens: int
    answered_chunk_ids: list[str]  # chunks whose first answer came from a batch
    failed: list[dict[str, str]]  # requests no batch answered: chunk_id, error (asked live)


def _prices_path(path: str | Path | None) -> Path | Traversable:
    """The price file: ``path``, else ``LETTERCHUNK_PRICES``, else the table shipped with the
    package."""
    if path is not None:
        return Path(path)
    configured = Settings.from_env().prices
    if configured is not None:
        return configured
    return resources.files("letterchunk").joinpath("data", "prices.json")


def load_prices(path: str | Path | None = None) -> dict[str, ModelPrice]:
    """The price table: model id (lower case) → :class:`ModelPrice`."""
    source = _prices_path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{source}: price file not found; fix --prices / LETTERCHUNK_PRICES"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{source}: cannot read the price file ({exc}); "
            "fix the JSON or point --prices elsewhere"
        ) from exc
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ConfigError(
            f'{source}: expected {{"models": {{"<model id>": '
            '{"input_per_mtok": .., "output_per_mtok": ..}}}'
        )
    table: dict[str, ModelPrice] = {}
    for model, entry in models.items():
        try:
            inp, out = entry["input_per_mtok"], entry["output_per_mtok"]
            if (
                isinstance(inp, bool)
                or isinstance(out, bool)
                or not all(isinstance(v, (int, float)) and v >= 0 for v in (inp, out))
            ):
                raise TypeError
        except (KeyError, TypeError):
            raise ConfigError(
                f"{source}: model {model!r} needs non-negative numbers "
                "input_per_mtok and output_per_mtok"
            ) from None
        batch = [entry.get(k) for k in ("batch_input_per_mtok", "batch_output_per_mtok")]
        if not all(v is None or (type(v) in (int, float) and v >= 0) for v in batch):
            raise ConfigError(
                f"{source}: model {model!r}: batch_input_per_mtok and batch_output_per_mtok "
                "must be non-negative numbers (or left out)"
            )
        table[model.lower()] = ModelPrice(
            model,
            float(inp),
            float(out),
            *(None if v is None else float(v) for v in batch),
        )
    return table


def price_for(model: str, prices: dict[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The model's price, trying the exact id then the id without a ``-YYYY-MM-DD`` suffix."""
    table = load_prices() if prices is None else prices
    key = model.strip().lower()
    return table.get(key) or table.get(_DATED.sub("", key))


@dataclass
class LetterTotals:
    requests: int = 0  # HTTP requests answered (cache hits excluded)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: int = 0  # repair re-asks
    questions: int = 0  # one-token yes/no follow-ups (enrich.judges), cache hits included
    cache_hits: int = 0
    cache_misses: int = 0
    chunks: int = 0
    failed_chunks: int = 0
    wall_s: float = 0.0
    # complete | incomplete | not_started (listed, never reached); None: not listed, end not
    # recorded
    state: str | None = None
    enriched_chunks: int | None = None
    total_chunks: int | None = None
    pending: list[str] = field(default_factory=list)  # chunk ids written as segmented
    written: bool = True
    _started: float | None = field(default=None, repr=False)

    def add(self, other: LetterTotals) -> None:
        for name in (
            "requests",
            "prompt_tokens",
            "completion_tokens",
            "repairs",
            "questions",
            "cache_hits",
            "cache_misses",
            "chunks",
            "failed_chunks",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Ledger:
    """Thread-safe per-letter accounting for one run."""

    def __init__(
        self,
        model: str,
        *,
        prices: dict[str, ModelPrice] | None = None,
        clock: Callable[[], float] = time.monotonic,
        identity: Mapping[str, object] | None = None,
        thresholds: Thresholds | None = None,
    ) -> None:
        """``prices``: a table from :func:`load_prices` (default: the shipped/env price file);
        ``identity``: what made the run (:func:`letterchunk.runner.identity.run_identity`),
        written under ``"identity"``; ``thresholds``: the judges' thresholds in force
        (:func:`letterchunk.review.thresholds.thresholds_for`), under ``"thresholds"``."""
        self.model = model
        self.identity = dict(identity or {})
        self.thresholds = thresholds
        self.price = price_for(model, prices)
        self._clock = clock
        self._lock = threading.Lock()
        self._letters: dict[str, LetterTotals] = {}
        self._started = clock()
        self._boundary = self._started  # end of the last finished letter (letters run in turn)
        self._ended: float | None = None
        self.extra: dict[str, object] = {}  # e.g. limiter stats, written under "limits"
        self.status = "running"
        self.stop_reason: str | None = None
        self.batch: BatchSpend | None = None  # set when the run's first answers came by batch

    # ------------------------------------------------------------------ recording
    def _letter(self, letter: str | int) -> LetterTotals:
        return self._letters.setdefault(str(letter), LetterTotals())

    def letter_started(self, letter: str | int) -> None:
        with self._lock:
            t = self._letter(letter)
            if t._started is None:
                t._started = self._clock()

    def letter_finished(self, letter: str | int) -> None:
        """Close a letter's wall time: from :meth:`letter_started`, or when it was never called,
        from the end of the previous letter (the pipeline enriches letters one after another)."""
        with self._lock:
            t = self._letter(letter)
            now = self._clock()
            t.wall_s += now - (t._started if t._started is not None else self._boundary)
            t._started = None
            self._boundary = now

    def mark(self) -> None:
        """Start the next letter's wall time now (e.g. once every letter is segmented)."""
        with self._lock:
            self._boundary = self._clock()

    def record_outcome(self, outcome: ChunkOutcome) -> None:
        """One ``pipeline.ChunkOutcome``: its live usage, cache hits, re-asks and result."""
        letter = str(outcome.chunk_id)[:4]
        usage = outcome.usage
        calls = int(getattr(outcome, "calls", 1) or 0)
        hits = int(getattr(outcome, "cache_hits", 0) or 0)
        # the yes/no questions are counted apart; cache hits and misses are the structured calls'
        questions = int(getattr(outcome, "questions", 0) or 0)
        with self._lock:
            t = self._letter(letter)
            t.chunks += 1
            t.failed_chunks += int(getattr(outcome, "chunk", None) is None)
            t.cache_hits += hits
            t.cache_misses += max(0, calls - hits)
            t.repairs += max(0, calls - 1)
            t.questions += questions
            t.requests += int(getattr(usage, "requests", 0) or 0)
            t.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            t.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)

    def record_completion(
        self,
        letter: str | int,
        *,
        source: str,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        requests: int = 1,
    ) -> None:
        """One LLM answer: ``source`` "cache" (no tokens spent) or "live"."""
        with self._lock:
            t = self._letter(letter)
            if source == "cache":
                t.cache_hits += 1
                return
            t.cache_misses += 1
            t.requests += requests
            t.prompt_tokens += prompt_tokens
            t.completion_tokens += completion_tokens

    def record_usage(self, letter: str | int, usage: Usage, *, source: str) -> None:
        """Convenience for an ``llm.Usage``-like object (prompt_tokens, completion_tokens,
        requests)."""
        self.record_completion(
            letter,
            source=source,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            requests=int(getattr(usage, "requests", 1) or (0 if source == "cache" else 1)),
        )

    def record_repairs(self, letter: str | int, count: int = 1) -> None:
        with self._lock:
            self._letter(letter).repairs += count

    def record_chunk(self, letter: str | int, *, failed: bool = False) -> None:
        with self._lock:
            t = self._letter(letter)
            t.chunks += 1
            t.failed_chunks += int(failed)

    def record_letter(
        self,
        letter: str | int,
        *,
        total: int,
        enriched: int,
        pending: list[str],
        written: bool = True,
    ) -> None:
        """How the letter ended: ``enriched`` of ``total`` chunks; ``pending`` ids are in the
        file as segmented (``written=False``: this run left the letter's files unchanged)."""
        with self._lock:
            t = self._letter(letter)
            t.total_chunks, t.enriched_chunks = total, enriched
            t.pending, t.written = list(pending), written
            t.state = "incomplete" if pending else "complete"

    def plan_letter(self, letter: str | int, *, total: int) -> None:
        """A letter the run will ask about (``total`` chunks to ask): listed in ``run.json`` as
        ``not_started`` until :meth:`record_letter` says how it ended, so a run stopped early
        still names every letter it left."""
        with self._lock:
            t = self._letter(letter)
            if t.state is None:
                t.state, t.total_chunks, t.enriched_chunks = "not_started", total, 0
                t.written = False

    def incomplete(self) -> list[str]:
        with self._lock:
            return sorted(k for k, t in self._letters.items() if t.state == "incomplete")

    def finish(self, status: str = "complete", reason: str | None = None) -> None:
        """Close the run: ``status`` complete | budget_exceeded | halted | interrupted | failed."""
        with self._lock:
            now = self._clock()
            for t in self._letters.values():
                if t._started is not None:
                    t.wall_s += now - t._started
                    t._started = None
            self._ended = now
            # an error text can echo the API key or a password of the base URL
            self.status, self.stop_reason = status, None if reason is None else redact(reason)

    # ------------------------------------------------------------------ reading
    def cost(self, t: LetterTotals) -> float | None:
        return (
            None
            if self.price is None
            else round(self.price.cost(t.prompt_tokens, t.completion_tokens), 6)
        )

    def totals(self) -> LetterTotals:
        with self._lock:
            total = LetterTotals()
            for t in self._letters.values():
                total.add(t)
            return total

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            letters = {k: self._letter_dict(v) for k, v in sorted(self._letters.items())}
            end = self._ended if self._ended is not None else self._clock()
            status, reason = self.status, self.stop_reason
        total = self.totals()
        out = self._letter_dict(total)
        out["wall_s"] = round(end - self._started, 3)
        return {
            "model": self.model,
            **({"identity": self.identity} if self.identity else {}),
            **({"thresholds": self.thresholds.to_dict()} if self.thresholds else {}),
            "price": None
            if self.price is None
            else {
                "input_per_mtok": self.price.input_per_mtok,
                "output_per_mtok": self.price.output_per_mtok,
            },
            "status": status,
            "stop_reason": reason,
            "incomplete_letters": [k for k, v in letters.items() if v.get("state") == "incomplete"],
            "not_started_letters": [
                k for k, v in letters.items() if v.get("state") == "not_started"
            ],
            "totals": out,
            "letters": letters,
            **({"limits": self.extra} if self.extra else {}),
            **({"batch": self._batch_dict(self.batch)} if self.batch is not None else {}),
        }

    def _batch_dict(self, b: BatchSpend) -> dict[str, Any]:
        cost = (
            None
            if self.price is None
            else self.price.batch_cost(b.prompt_tokens, b.completion_tokens)
        )
        return {
            "batch_ids": list(b.batch_ids),
            "answers": len(b.answered_chunk_ids),
            "prompt_tokens": b.prompt_tokens,
            "completion_tokens": b.completion_tokens,
            "total_tokens": b.prompt_tokens + b.completion_tokens,
            "cost_usd": None if cost is None else round(cost, 6),
            "answered_chunk_ids": list(b.answered_chunk_ids),
            "failed_requests": [dict(f) for f in b.failed],
        }

    def _letter_dict(self, t: LetterTotals) -> dict[str, Any]:
        state = (
            {}
            if t.state is None
            else {
                "state": t.state,
                "enriched_chunks": t.enriched_chunks,
                "total_chunks": t.total_chunks,
                "pending_chunk_ids": list(t.pending),
                "written": t.written,
            }
        )
        return {
            **state,
            "requests": t.requests,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "total_tokens": t.prompt_tokens + t.completion_tokens,
            "repairs": t.repairs,
            "questions": t.questions,
            "cache_hits": t.cache_hits,
            "cache_misses": t.cache_misses,
            "chunks": t.chunks,
            "failed_chunks": t.failed_chunks,
            "wall_s": round(t.wall_s, 3),
            "cost_usd": self.cost(t),
        }

    def write(self, out_dir: str | Path) -> Path:
        """Write ``DIR/run.json`` atomically; returns its path."""
        path = Path(out_dir) / RUN_FILE
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        return path

    def summary_lines(self, out_dir: str | Path | None = None) -> list[str]:
        """A human table (one row per letter and a total) for the CLI to print on stderr, then
        a line per incomplete letter saying how to finish it (``out_dir``: the run's folder)."""
        data = self.to_dict()
        head = (
            "letter",
            "chunks",
            "requests",
            "prompt",
            "completion",
            "repairs",
            "cache hits",
            "wall s",
            "cost $",
        )
        rows = []
        for name, d in list(data["letters"].items()) + [("total", data["totals"])]:
            rows.append(
                (
                    name,
                    str(d["chunks"]),
                    str(d["requests"]),
                    str(d["prompt_tokens"]),
                    str(d["completion_tokens"]),
                    str(d["repairs"]),
                    str(d["cache_hits"]),
                    f"{d['wall_s']:.1f}",
                    "unknown" if d["cost_usd"] is None else f"{d['cost_usd']:.4f}",
                )
            )
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

        def fmt(r: Sequence[str]) -> str:
            return "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )

        lines = [fmt(head), *(fmt(r) for r in rows)]
        if data["price"] is None:
            lines.append(
                f"cost unknown: model {self.model!r} is not in the price table "
                "(add it to prices.json)"
            )
        if "batch" in data:
            b = data["batch"]
            cost = "unknown" if b["cost_usd"] is None else f"${b['cost_usd']:.4f}"
            lines.append(
                f"batch: {b['answers']} first answer(s) from {len(b['batch_ids'])} batch(es), "
                f"{b['total_tokens']} tokens, {cost} at the batch rate (above: live requests only)"
            )
            for f in b["failed_requests"]:
                lines.append(f"batch: {f['chunk_id']}: no batch answer ({f['error']}); asked live")
        if data["status"] != "complete":
            lines.append(f"run {data['status']}: {data['stop_reason'] or ''}".rstrip(": "))
        folder = "DIR" if out_dir is None else str(out_dir)
        for name in data["incomplete_letters"]:
            d = data["letters"][name]
            pending = len(d["pending_chunk_ids"])
            chunk_file = Path(folder) / f"{name}{CHUNKS_SUFFIX}"
            where = (
                f"the other {pending} kept as segmented in {chunk_file}"
                if d["written"]
                else "its files were left as they were"
            )
            lines.append(
                f"letter {name} incomplete: {d['enriched_chunks']} of {d['total_chunks']} "
                f"chunk(s) enriched, {where}; rerun `letterchunk enrich {folder}` (or the same "
                "command) to finish it"
            )
        for name in data["not_started_letters"]:
            lines.append(
                f"letter {name} not started: the run stopped before it; rerun the same command "
                "to enrich it"
            )
        return lines
