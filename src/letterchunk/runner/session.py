"""The accounting of one run, for the CLI and the Python API alike: ``DIR/run.json``.

:func:`ledger_session` wraps a run's :class:`~letterchunk.runner.pipeline.Hooks` with a
:class:`~letterchunk.runner.ledger.Ledger`: every chunk's calls and tokens, every letter the run
lists (those a halt or a cap never reached included) and how each ended.  ``run.json`` is
written after every letter, so a killed run leaves the figures of what it finished, and once
more however the run ends; the exception (halt, cap, Ctrl-C) propagates unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

from letterchunk.errors import BudgetExceeded, RepairExhausted
from letterchunk.layout import LetterKey
from letterchunk.llm.client import CompletionClient
from letterchunk.runner.identity import run_identity
from letterchunk.runner.ledger import BatchSpend, Ledger, ModelPrice
from letterchunk.runner.pipeline import ChunkOutcome, Hooks, LetterOutcome

__all__ = ["ledger_session"]


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

    ledger = Ledger(client.settings.model, prices=prices, identity=run_identity(client.settings))
    wrapped = _counted(ledger, hooks or Hooks(), lambda: _write(ledger, out, extra, batch))
    status, reason = "complete", None
    failure: BaseException | None = None
    try:
        yield wrapped
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
        _write(ledger, out, extra, batch)
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
