"""`letterchunk repair FILE.jsonl`: the repair loop applied to an existing chunk file.

Mechanical fixes always.  LLM re-asks of only the failing fields when a backend is configured
(``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL``, as for `letterchunk run`); without one, or with
``--no-llm``, the chunks that still need the model are listed with the fields a re-ask would
name.  FILE is rewritten atomically; the report goes to FILE's ``X.report.jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, EXIT_OK, HelpFormatter
from letterchunk.cli.run import add_llm_options, llm_client
from letterchunk.llm.connect import backend_configured
from letterchunk.repair.job import refuse_unusable, repair_file
from letterchunk.runner.lock import folder_lock

EXAMPLES = """\
Examples:
  # mechanical fixes only, no LLM
  letterchunk repair out/1977.jsonl --no-llm
  # also re-ask an OpenAI-compatible server for the fields code cannot fix
  OPENAI_BASE_URL=http://127.0.0.1:8080/v1 letterchunk repair other-tool/1977.jsonl --max-attempts 3
  # then see every repair in one page
  letterchunk report out/
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repair",
        help=COMMAND_HELP["repair"],
        description=(
            "Validate every chunk of FILE.jsonl (ours or another tool's) at stage 'enriched', "
            "fix what code can fix (counts, flags, defaults, links, spellings), and re-ask the "
            "LLM for only the failing fields when OPENAI_API_KEY / OPENAI_BASE_URL is set. "
            "FILE (and its X.evidence.jsonl) is rewritten atomically, every chunk kept; the "
            "per-attempt report is written to X.report.jsonl beside it. The file as written is "
            "then checked like `letterchunk validate --stage enriched` (letter- and file-level "
            "rules too). Exit 0 when it is valid, 1 when errors remain (listed on stderr), 2 "
            "when FILE is not a chunk JSONL file, 3 when --on-failure halt stopped on a chunk "
            "(FILE then untouched)."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("file", metavar="FILE.jsonl", help="chunk JSONL file to repair in place")
    p.add_argument(
        "--no-llm",
        action="store_true",
        help="mechanical fixes only, even when a backend is configured",
    )
    add_llm_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    refuse_unusable(args.file)  # exit 2 as `validate` would, before any server starts
    use_llm = not args.no_llm and (backend_configured() or args.cache == "offline")
    with contextlib.ExitStack() as stack:
        stack.enter_context(folder_lock(Path(args.file).parent))  # one process per folder
        client = stack.enter_context(llm_client(args)) if use_llm else None
        result = repair_file(
            args.file, client, max_attempts=args.max_attempts, on_failure=args.on_failure
        )
    counts: dict[str, int] = {}
    for outcome in result.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    if not args.quiet:
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no chunks"
        tokens = ""
        if result.usage is not None and (
            result.usage.prompt_tokens or result.usage.completion_tokens
        ):
            tokens = (
                f"; {result.usage.requests} request(s), {result.usage.prompt_tokens:,} "
                f"prompt + {result.usage.completion_tokens:,} completion tokens"
            )
        if result.remaining:
            summary += f"; {len(result.remaining)} letter/file-level error(s) left"
        print(
            f"letterchunk: {result.path}: {summary}{tokens}; report {result.report_path}"
            + ("" if result.rewritten else " (file unchanged)"),
            file=sys.stderr,
        )
        for cid, fields in result.needs_llm.items():
            print(
                f"letterchunk: {cid}: needs the LLM for {', '.join(fields) or '?'}; set "
                "OPENAI_BASE_URL (or OPENAI_API_KEY) and rerun",
                file=sys.stderr,
            )
        for cid in result.failed:
            if cid not in result.needs_llm:
                print(
                    f"letterchunk: {cid}: still invalid, see {result.report_path}", file=sys.stderr
                )
        for v in result.remaining:  # what `validate --stage enriched` reports; code can't fix
            print(f"letterchunk: {v}", file=sys.stderr)
        if result.remaining:
            print(
                f"letterchunk: {result.path}: repair does not fix these; see `letterchunk "
                f"validate --stage enriched {result.path}`",
                file=sys.stderr,
            )
    return EXIT_OK if result.valid else EXIT_INVALID
