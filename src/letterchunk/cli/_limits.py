"""Options shared by `letterchunk run`, `enrich`, `repair` and `batch`: rate limits
(--tpm/--rpm), concurrency, budget caps and the price table.

:func:`add_limit_options` adds them to a parser; :func:`limits_from` turns the parsed options
into the :class:`~letterchunk.runner.session.Limits` the run session applies.
"""

from __future__ import annotations

import argparse

from letterchunk.runner.session import Limits


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


def limits_from(args: argparse.Namespace) -> Limits:
    """The run's :class:`Limits` from the options (unset ones fall back to the environment)."""
    return Limits(
        tpm=getattr(args, "tpm", None),
        rpm=getattr(args, "rpm", None),
        max_tokens_total=getattr(args, "max_tokens_total", None),
        max_cost=getattr(args, "max_cost", None),
        prices=getattr(args, "prices", None),
        context_tokens=getattr(args, "context_tokens", None),
    )
