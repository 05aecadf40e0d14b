"""`letterchunk analyze DIR`: chunk, token, entity/concept, confession and repair statistics."""

from __future__ import annotations

import argparse
import json
import sys

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.errors import ConfigError
from letterchunk.io import write_stream
from letterchunk.report.analyze import analyze_dir, render_text

EXAMPLES = """\
Examples:
  letterchunk analyze out/
  letterchunk analyze out/ --top 20 --json > stats.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help=(COMMAND_HELP["analyze"]),
        description=(
            "Read DIR/YYYY.jsonl (segmented or enriched), DIR/YYYY.report.jsonl and DIR/run.json "
            "and print: chunks per letter, tier and content type; the token_count distribution "
            "(min/median/p90/max); top entities, concepts and themes; mistake confessions per "
            "year; repair counts by rule. --json prints the same as one JSON object."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run` or `segment`")
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="entries per top list (default 10)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise ConfigError("--top must be >= 1")
    result = analyze_dir(args.dir, top=args.top)
    if args.json:
        write_stream(sys.stdout, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        write_stream(sys.stdout, render_text(result))
    if result["skipped"] and not args.quiet:
        print(
            f"letterchunk: {len(result['skipped'])} line(s) skipped; run `letterchunk validate "
            f"{args.dir}` to see why",
            file=sys.stderr,
        )
    return 0
