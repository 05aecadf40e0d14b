"""Options and plumbing shared by `letterchunk run` and `letterchunk enrich`: rate limits
(--tpm/--rpm), concurrency, budget caps and the run ledger (DIR/run.json).

``cli/run.py`` calls three things from here: :func:`add_limit_options` on the parser,
:func:`make_limiter` when it builds the LLM client, and :func:`accounting` around the pipeline
job.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.limiter import RateLimiter
from letterchunk.runner.ledger import Ledger, ModelPrice, load_prices, price_for
from letterchunk.runner.pipeline import Hooks
from letterchunk.runner.session import ledger_session
from letterchunk.settings import Settings


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


def _prices(args: argparse.Namespace) -> dict[str, ModelPrice]:

    return load_prices(getattr(args, "prices", None))


def make_limiter(args: argparse.Namespace, settings: LLMSettings) -> RateLimiter | None:
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
        window_s=Settings.from_env().rate_window_s,
        completion_allowance=settings.max_tokens,
    )
    args._limiter = limiter  # accounting() puts its stats into run.json
    return limiter if limiter.active else None


def _out_dir(args: argparse.Namespace) -> Path | None:
    folder = getattr(args, "out", None) or getattr(args, "dir", None)
    return Path(folder) if folder else None


@contextlib.contextmanager
def accounting(
    args: argparse.Namespace,
    client: LLMClient,
    hooks: Hooks,
    summary: Callable[[Ledger, BaseException | None], None] | None = None,
) -> Iterator[Hooks]:
    """:func:`letterchunk.runner.session.ledger_session` with the options of ``args``: the price
    file, the limiter's figures and what a batch billed go into DIR/run.json."""

    def extra() -> dict[str, object] | None:
        limiter = getattr(args, "_limiter", None)
        if limiter is None or not limiter.active:
            return None
        return {
            "tpm": limiter.tpm,
            "rpm": limiter.rpm,
            "window_s": limiter.window_s,
            "max_tokens_total": limiter.max_tokens_total,
            "max_cost": limiter.max_cost,
            **limiter.stats().to_dict(),
        }

    with ledger_session(
        _out_dir(args),
        client,
        hooks,
        prices=_prices(args),
        extra=extra,
        batch=lambda: getattr(args, "_batch", None),  # `batch collect`: what batches billed
        summary=summary,
    ) as wrapped:
        yield wrapped
