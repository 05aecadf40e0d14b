"""Options and plumbing shared by `letterchunk run` and `letterchunk enrich`: rate limits
(--tpm/--rpm), concurrency, budget caps and the run ledger (DIR/run.json).

``cli/run.py`` calls three things from here: :func:`add_limit_options` on the parser,
:func:`make_limiter` when it builds the LLM client, and :func:`accounting` around the pipeline
job.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from letterchunk.errors import BudgetExceeded, ConfigError, RepairExhausted
from letterchunk.llm.limiter import RateLimiter
from letterchunk.runner.ledger import Ledger, load_prices, price_for

ENV_WINDOW = (
    "LETTERCHUNK_RATE_WINDOW_S"  # rolling-window length; 60 s = per minute (tests/bench scale it)
)


def add_limit_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "limits and budget (a stopped run exits 4; rerun with a higher cap to resume)"
    )
    g.add_argument(
        "--concurrency",
        dest="workers",
        type=int,
        default=argparse.SUPPRESS,
        metavar="N",
        help="requests in flight at once (same as --workers)",
    )
    g.add_argument(
        "--tpm",
        type=int,
        default=None,
        metavar="N",
        help="tokens-per-minute limit of the API (env OPENAI_TPM_LIMIT; default none)",
    )
    g.add_argument(
        "--rpm",
        type=int,
        default=None,
        metavar="N",
        help="requests-per-minute limit of the API (env OPENAI_RPM_LIMIT; default none)",
    )
    g.add_argument(
        "--max-tokens-total",
        type=int,
        default=None,
        metavar="N",
        help="stop before the run's live tokens (prompt + completion) would pass N; "
        "cached answers are free",
    )
    g.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop before the run's cost would pass USD (needs the model in the price table)",
    )
    g.add_argument(
        "--prices",
        default=None,
        metavar="FILE",
        help="price table JSON (env LETTERCHUNK_PRICES; default letterchunk/data/prices.json)",
    )


def _window_s() -> float:

    raw = os.environ.get(ENV_WINDOW, "").strip()
    if not raw:
        return 60.0
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{ENV_WINDOW}={raw!r} is not a number of seconds; fix or unset it"
        ) from None
    if value <= 0:
        raise ConfigError(f"{ENV_WINDOW} must be positive, got {value}")
    return value


def _prices(args: argparse.Namespace) -> dict:

    return load_prices(getattr(args, "prices", None))


def make_limiter(args: argparse.Namespace, settings: Any) -> Any:
    """The run's RateLimiter (None when nothing is limited), built from options then env.

    ``settings`` is the client's ``LLMSettings``: its model prices the cost cap, its
    ``max_tokens`` is the completion allowance inside every request estimate.
    """

    limiter = RateLimiter.from_env(
        tpm=getattr(args, "tpm", None),
        rpm=getattr(args, "rpm", None),
        max_tokens_total=getattr(args, "max_tokens_total", None),
        max_cost=getattr(args, "max_cost", None),
        price=price_for(settings.model, _prices(args)),
        window_s=_window_s(),
        completion_allowance=getattr(settings, "max_tokens", None),
    )
    args._limiter = limiter  # accounting() puts its stats into run.json
    return limiter if limiter.active else None


def _out_dir(args: argparse.Namespace) -> Path | None:
    folder = getattr(args, "out", None) or getattr(args, "dir", None)
    return Path(folder) if folder else None


@contextlib.contextmanager
def accounting(
    args: argparse.Namespace,
    client: Any,
    hooks: Any,
    summary: Callable[[Any, BaseException | None], None] | None = None,
) -> Iterator[Any]:
    """Wrap ``hooks`` with the ledger; on the way out write DIR/run.json and call
    ``summary(ledger, failure)`` (``failure`` None when the run completed) to print the summary.

    The ledger is written after every letter too, so a killed run leaves the figures of the
    letters it finished.  The exception (budget cap, halt, Ctrl-C) propagates unchanged.
    """

    ledger = Ledger(client.settings.model, prices=_prices(args))
    out = _out_dir(args)
    chunk_done, letter_done, segmented, listed = (
        hooks.chunk_done,
        hooks.letter_done,
        hooks.letters_segmented,
        hooks.letters_listed,
    )

    def on_chunk(outcome: Any) -> None:
        ledger.record_outcome(outcome)
        if chunk_done:
            chunk_done(outcome)

    def on_letter(outcome: Any) -> None:
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
        _write(ledger, args, out)

    def on_listed(letters: list[tuple[Any, int]]) -> None:
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
        _write(ledger, args, out)
        if summary is not None:
            summary(ledger, failure)


def _write(ledger: Any, args: argparse.Namespace, out: Path | None) -> None:
    limiter = getattr(args, "_limiter", None)
    if limiter is not None and limiter.active:
        ledger.extra = {
            "tpm": limiter.tpm,
            "rpm": limiter.rpm,
            "window_s": limiter.window_s,
            "max_tokens_total": limiter.max_tokens_total,
            "max_cost": limiter.max_cost,
            **limiter.stats().to_dict(),
        }
    ledger.batch = getattr(args, "_batch", None)  # `batch collect`: what its batches billed
    if out is not None:
        ledger.write(out)  # creates DIR if the run stopped before writing any letter
