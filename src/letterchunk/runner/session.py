"""One run session, for the CLI, batch and the Python API alike.

:func:`run_session` is everything around a job that writes an output folder, in this order:

1. the output folder is created and proved writable (:func:`check_folder`), and ``run.json``
   replaceable (:func:`~letterchunk.runner.outputs.check_replaceable`; each letter's files are
   checked once the letters are known), before anything is paid for;
2. the folder's lock is taken (:func:`~letterchunk.runner.lock.folder_lock`: one process per
   output folder), before any server starts or request is sent;
3. the client is opened (:func:`~letterchunk.llm.connect.open_client`) with the run's
   :class:`~letterchunk.llm.limiter.RateLimiter` (rate limits, token and cost caps);
4. the hooks are wrapped with the ledger (:func:`ledger_session`: ``DIR/run.json`` after every
   letter and however the run ends).

The options arrive as typed records: :class:`Backend` (which model, how it is asked, the
answer cache, one request's timeout and retries) and :class:`Limits` (rate limits, caps, the
price table, the model's context).  The session resolves the context a request must fit
(:func:`letterchunk.llm.connect.context_tokens`); :meth:`Session.options` puts it into the
job's :class:`~letterchunk.runner.pipeline.RunOptions`, so ``letterchunk.run`` and the CLI
refuse the same oversized prompts before sending them.

:func:`ledger_session` wraps a run's :class:`~letterchunk.runner.pipeline.Hooks` with a
:class:`~letterchunk.runner.ledger.Ledger`: every chunk's calls and tokens, every letter the run
lists (those a halt or a cap never reached included) and how each ended.  ``run.json`` is
written after every letter, so a killed run leaves the figures of what it finished, and once
more however the run ends; the exception (halt, cap, Ctrl-C) propagates unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from letterchunk.errors import BudgetExceeded, ConfigError, NotReplaceable, RepairExhausted
from letterchunk.layout import LetterKey
from letterchunk.llm import connect
from letterchunk.llm.client import CompletionClient, LLMClient, LLMSettings
from letterchunk.llm.connect import CacheMode
from letterchunk.llm.limiter import RateLimiter
from letterchunk.review.thresholds import read_settings_file, thresholds_for
from letterchunk.runner.identity import run_identity
from letterchunk.runner.ledger import BatchSpend, Ledger, ModelPrice, load_prices, price_for
from letterchunk.runner.lock import folder_lock
from letterchunk.runner.outputs import check_replaceable
from letterchunk.runner.pipeline import ChunkOutcome, Hooks, LetterOutcome, RunOptions
from letterchunk.settings import Settings

__all__ = [
    "Backend",
    "Limits",
    "Session",
    "Summary",
    "check_folder",
    "check_number",
    "ledger_session",
    "limiter_for",
    "open_limited_client",
    "run_session",
]


def check_number(label: str, value: float | None, low: float) -> None:
    """A ConfigError unless ``value`` is None, or finite and above ``low`` (nan compares false
    with everything and an infinite timeout never fires: both are refused)."""
    if value is not None and (not math.isfinite(value) or value <= low):
        raise ConfigError(
            f"{label} must be {'>= 0' if low < 0 else 'positive'} and finite, got {value}"
        )


@dataclasses.dataclass(frozen=True)
class Backend:
    """Which model answers and how: the options of :func:`letterchunk.llm.connect.open_client`.

    None means "from the environment, else the default" (``LETTERCHUNK_MODEL``,
    ``LETTERCHUNK_INSTRUCTOR_MODE``, ``LETTERCHUNK_CACHE_DIR``, ``LETTERCHUNK_TIMEOUT_S``,
    ``LETTERCHUNK_TRANSPORT_RETRIES``).
    """

    model: str | None = None
    mode: str | None = None
    cache: CacheMode = "use"
    cache_dir: str | Path | None = None
    timeout_s: float | None = None  # seconds to wait for one answer
    transport_retries: int | None = None  # extra attempts after a timeout, 429, 5xx or reset

    def __post_init__(self) -> None:
        check_number("timeout_s", self.timeout_s, 0)
        check_number("transport_retries", self.transport_retries, -1)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a run may spend and how fast, and how large a request may be.

    ``tpm`` / ``rpm``: the API's tokens / requests per minute (None: ``OPENAI_TPM_LIMIT`` /
    ``OPENAI_RPM_LIMIT``, else none); ``max_tokens_total`` / ``max_cost``: stop with
    :class:`~letterchunk.errors.BudgetExceeded` before the run's live tokens / cost in USD would
    pass them; ``prices``: the price table file (None: ``LETTERCHUNK_PRICES``, else the shipped
    one); ``context_tokens``: the model's context window, a chunk whose prompt and answer would
    not fit is refused unsent (None: ``LETTERCHUNK_CONTEXT_TOKENS``, else the backend's own).
    """

    tpm: int | None = None
    rpm: int | None = None
    max_tokens_total: int | None = None
    max_cost: float | None = None
    prices: str | Path | None = None
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        check_number("context_tokens", self.context_tokens, 0)

    def price_table(self) -> dict[str, ModelPrice]:
        """The price table these limits name (a ConfigError names a bad file)."""
        return load_prices(self.prices)


@dataclasses.dataclass(frozen=True)
class Session:
    """What a job runs with: its client, its hooks (the ledger's inside them) and what the
    session resolved."""

    folder: Path | None  # the output folder (None: a job that writes none)
    client: LLMClient
    limiter: RateLimiter  # as built from the limits; the client holds it only when it is active
    context_tokens: int  # the context every request is checked against before it is sent
    hooks: Hooks  # the caller's hooks, each also telling the ledger
    ledger: Ledger | None  # None: a session opened with ledger=False (a job that runs no letter)

    def options(self, options: RunOptions) -> RunOptions:
        """``options`` with this session's context (oversized prompts are refused unsent) and
        the judges' thresholds in force for its model (recorded in ``run.json``)."""
        found = self.ledger.thresholds if self.ledger is not None else None
        thresholds = found or options.thresholds
        return dataclasses.replace(
            options, context_tokens=self.context_tokens, thresholds=thresholds
        )


# (session, ledger, failure): prints the end summary; ``failure`` is None when the run completed
Summary = Callable[[Session, Ledger, BaseException | None], None]


def check_folder(folder: str | Path, *, create: bool = True) -> None:
    """Create the output folder (``create``) and prove it writable now, before any request is
    paid for."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"output folder {path} is a file; pass a folder to --out (it is "
            "created if missing) or move the file away"
        )
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".letterchunk-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"output folder {path} is not writable ({exc.strerror or exc}); pass "
            "another --out or fix the folder's permissions"
        ) from exc


def limiter_for(
    limits: Limits, settings: LLMSettings, prices: dict[str, ModelPrice] | None = None
) -> RateLimiter:
    """The run's RateLimiter, built from ``limits`` then the environment.

    ``settings`` is the client's ``LLMSettings``: its model prices the cost cap, its
    ``max_tokens`` is the completion allowance inside every request estimate.
    """
    return RateLimiter.from_env(
        tpm=limits.tpm,
        rpm=limits.rpm,
        max_tokens_total=limits.max_tokens_total,
        max_cost=limits.max_cost,
        price=price_for(settings.model, limits.price_table() if prices is None else prices),
        window_s=Settings.from_env().rate_window_s,
        completion_allowance=settings.max_tokens,
    )


@contextlib.contextmanager
def open_limited_client(
    backend: Backend,
    limits: Limits,
    *,
    prices: dict[str, ModelPrice] | None = None,
    built: Callable[[RateLimiter], None] = lambda _: None,
) -> Iterator[LLMClient]:
    """:func:`~letterchunk.llm.connect.open_client` with ``backend``'s options and the limiter
    of ``limits`` (attached when it limits anything); ``built(limiter)`` is told the limiter."""

    def make(settings: LLMSettings) -> RateLimiter | None:
        limiter = limiter_for(limits, settings, prices)
        built(limiter)
        return limiter if limiter.active else None

    with connect.open_client(
        model=backend.model,
        mode=backend.mode,
        cache=backend.cache,
        cache_dir=backend.cache_dir,
        timeout_s=backend.timeout_s,
        transport_retries=backend.transport_retries,
        limiter=make,
    ) as client:
        yield client


def _limits_record(limiter: RateLimiter) -> dict[str, object] | None:
    """The limiter's settings and figures for ``run.json``'s ``"limits"`` (None: none set)."""
    if not limiter.active:
        return None
    return {
        "tpm": limiter.tpm,
        "rpm": limiter.rpm,
        "window_s": limiter.window_s,
        "max_tokens_total": limiter.max_tokens_total,
        "max_cost": limiter.max_cost,
        **limiter.stats().to_dict(),
    }


@contextlib.contextmanager
def run_session(
    folder: str | Path | None,
    *,
    backend: Backend | None = None,
    limits: Limits | None = None,
    hooks: Hooks | None = None,
    lock: bool = True,
    create: bool = True,
    ledger: bool = True,
    summary: Summary | None = None,
    batch: Callable[[], BatchSpend | None] = lambda: None,
) -> Iterator[Session]:
    """The session of one job on ``folder``: checked writable, locked, a client with the
    limiter, the hooks wrapped with the ledger (see the module docstring for the order).

    ``create``: make ``folder`` when missing; with ``create=False`` a folder that does not
    exist is neither checked nor locked (the job names that error itself).  ``lock=False``
    leaves the folder unlocked.  ``ledger=False``: no ``run.json`` (a job that runs no letter,
    such as submitting a batch).  ``summary(session, ledger, failure)`` is called once however
    the run ends; ``batch()`` is what the run's batches billed, written into ``run.json``.
    Raises :class:`~letterchunk.errors.FolderLocked` while another job holds the folder.
    """
    backend, limits = backend or Backend(), limits or Limits()
    out = Path(folder) if folder is not None else None
    context = connect.context_tokens(limits.context_tokens)
    prices = limits.price_table()  # a bad price file fails before the folder is touched
    if ledger:
        read_settings_file()  # so does a bad thresholds file, before any server starts
    guarded = out is not None and (create or out.is_dir())
    if out is not None and guarded:
        check_folder(out, create=create)
        if ledger:
            check_replaceable(out, [])  # run.json, written however the run ends
    built: list[RateLimiter] = []
    with contextlib.ExitStack() as stack:
        if out is not None and guarded and lock:
            stack.enter_context(folder_lock(out))
        client = stack.enter_context(
            open_limited_client(backend, limits, prices=prices, built=built.append)
        )
        limiter = built[0]
        if not ledger:
            yield Session(out, client, limiter, context, hooks or Hooks(), None)
            return
        session: list[Session] = []

        def told(kept: Ledger, failure: BaseException | None) -> None:
            if summary is not None and session:
                summary(session[0], kept, failure)

        accounts = _ledger(
            out,
            client,
            hooks,
            prices=prices,
            extra=lambda: _limits_record(limiter),
            batch=batch,
            summary=told,
        )
        kept, wrapped = stack.enter_context(accounts)
        session.append(Session(out, client, limiter, context, wrapped, kept))
        yield session[0]


@contextlib.contextmanager
def ledger_session(
    out: Path | None,
    client: CompletionClient,
    hooks: Hooks | None = None,
    *,
    prices: dict[str, ModelPrice] | None = None,
    extra: Callable[[], dict[str, object] | None] = lambda: None,
    batch: Callable[[], BatchSpend | None] = lambda: None,
    summary: Callable[[Ledger, BaseException | None], None] | None = None,
) -> Iterator[Hooks]:
    """Wrap ``hooks`` with the ledger; on the way out write DIR/run.json and call
    ``summary(ledger, failure)`` (``failure`` None when the run completed) to print the summary.

    The ledger is written after every letter too, so a killed run leaves the figures of the
    letters it finished.  The exception (budget cap, halt, Ctrl-C) propagates unchanged.
    """
    with _ledger(out, client, hooks, prices=prices, extra=extra, batch=batch, summary=summary) as (
        _,
        wrapped,
    ):
        yield wrapped


@contextlib.contextmanager
def _ledger(
    out: Path | None,
    client: CompletionClient,
    hooks: Hooks | None,
    *,
    prices: dict[str, ModelPrice] | None,
    extra: Callable[[], dict[str, object] | None],
    batch: Callable[[], BatchSpend | None],
    summary: Callable[[Ledger, BaseException | None], None] | None,
) -> Iterator[tuple[Ledger, Hooks]]:
    """:func:`ledger_session`, yielding the ledger beside the wrapped hooks."""
    identity = run_identity(client.settings)
    thresholds = thresholds_for(identity)
    ledger = Ledger(client.settings.model, prices=prices, identity=identity, thresholds=thresholds)
    wrapped = _counted(ledger, hooks or Hooks(), lambda: _write(ledger, out, extra, batch))
    status, reason = "complete", None
    failure: BaseException | None = None
    try:
        yield ledger, wrapped
    except BudgetExceeded as exc:
        status, reason, failure = "budget_exceeded", str(exc), exc
        raise
    except RepairExhausted as exc:
        status, reason, failure = "halted", str(exc), exc
        raise
    except KeyboardInterrupt as exc:
        status, reason, failure = "interrupted", "Ctrl-C", exc
        raise
    except BaseException as exc:
        status, reason, failure = "failed", f"{type(exc).__name__}: {exc}", exc
        raise
    finally:
        ledger.finish(status, reason)
        if not isinstance(failure, NotReplaceable):  # refused before any request: keep the
            _write(ledger, out, extra, batch)  # earlier run.json (it may be the refused file)
        if summary is not None:
            summary(ledger, failure)


def _counted(ledger: Ledger, hooks: Hooks, write: Callable[[], None]) -> Hooks:
    """``hooks``, each also telling ``ledger``; ``write()`` after every letter."""
    chunk_done, letter_done, segmented, listed = (
        hooks.chunk_done,
        hooks.letter_done,
        hooks.letters_segmented,
        hooks.letters_listed,
    )

    def on_chunk(outcome: ChunkOutcome) -> None:
        ledger.record_outcome(outcome)
        if chunk_done:
            chunk_done(outcome)

    def on_letter(outcome: LetterOutcome) -> None:
        ledger.letter_finished(outcome.year)
        written = getattr(outcome, "written", None) or outcome.chunks
        ledger.record_letter(
            outcome.year,
            total=len(written),
            enriched=len(outcome.chunks),
            pending=list(getattr(outcome, "pending", [])),
            written=outcome.files_written,
        )
        if letter_done:
            letter_done(outcome)
        write()

    def on_listed(letters: list[tuple[LetterKey, int]]) -> None:
        for key, total in letters:
            ledger.plan_letter(key, total=total)
        if listed:
            listed(letters)

    def on_segmented(letters: int, chunks: int) -> None:
        ledger.mark()
        if segmented:
            segmented(letters, chunks)

    wrapped = dataclasses.replace(
        hooks,
        chunk_done=on_chunk,
        letter_done=on_letter,
        letters_segmented=on_segmented,
        letters_listed=on_listed,
    )
    return wrapped


def _write(
    ledger: Ledger,
    out: Path | None,
    extra: Callable[[], dict[str, object] | None],
    batch: Callable[[], BatchSpend | None],
) -> None:
    ledger.extra = extra() or {}
    ledger.batch = batch()
    if out is not None:
        ledger.write(out)  # creates DIR if the run stopped before writing any letter
