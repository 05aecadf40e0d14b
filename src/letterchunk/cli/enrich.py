"""`letterchunk enrich DIR`: enrich already segmented output in place (atomic writes)."""

from __future__ import annotations

import argparse
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.cli.run import add_llm_options, execute
from letterchunk.runner.outputs import segmented_letters
from letterchunk.runner.pipeline import enrich_dir

EXAMPLES = """\
Examples:
  # segment first (no LLM), look at the chunks, then enrich them in place
  letterchunk segment corpus/letters --out out/
  letterchunk enrich out/
  # on an API with a tokens-per-minute limit
  OPENAI_API_KEY=sk-... letterchunk enrich out/ --tpm 90000 --workers 4
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "enrich",
        help=COMMAND_HELP["enrich"],
        description=(
            "Enrich every DIR/YYYY.jsonl written by `letterchunk segment` (its "
            "DIR/YYYY_cleaned.txt must be beside it), validate at stage 'enriched', and replace "
            "the files atomically; evidence goes to DIR/YYYY.evidence.jsonl. Same backend and "
            "cache rules as `letterchunk run`."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="folder of segmented output")
    add_llm_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # an unusable DIR, chunk file or cleaned text fails here, before the embedded server is
    # started or a token is spent; the job reads the folder again under its lock
    segmented_letters(Path(args.dir))
    return execute(
        args, lambda client, options, hooks: enrich_dir(args.dir, client, options, hooks)
    )
