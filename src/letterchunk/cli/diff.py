"""`letterchunk diff RUN_A RUN_B`: what changed between two runs over the same letters."""

from __future__ import annotations

import argparse
import json
import sys

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, EXIT_OK, HelpFormatter
from letterchunk.io import write_stream
from letterchunk.report.diff import diff_runs, render_text
from letterchunk.report.review_diff import review_split, split_lines
from letterchunk.report.runs import read_run

EXAMPLES = """\
Examples:
  letterchunk diff out-2025/ out/
  letterchunk diff segmented/ enriched/ --json > changes.json
  letterchunk diff old/ new/ -q

exit codes:
  0  the two runs hold the same letters, cleaned texts and chunks
  1  they differ
  2  unusable input: a folder missing, not an output folder, or a chunk file that is not
     canonical (the message names it)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help=COMMAND_HELP["diff"],
        description=(
            "Compare two output folders of `letterchunk run`, `enrich` or `segment` (A before, "
            "B after: a prompt edit, another model, a new vocabulary). Chunks are matched by "
            "chunk_id: re-bounded (other text or span), moved (same text under another id), "
            "added, removed; per field what changed: set fields (themes, concepts, entities, "
            "principles, cross references) as members added and removed, values such as "
            "content_type as flips, summaries as rewrites with a similarity figure. Prints both "
            "runs' identities from run.json side by side (model, prompt, schema and vocabulary "
            "hashes, letterchunk version, start time; unknown for a segment-only folder), a "
            "summary table per field and every changed chunk; --json prints the same as one JSON "
            "object with stable keys (docs/usage.md). Writes nothing but stdout; with -q "
            "nothing at all (the exit code says whether the runs differ)."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("run_a", metavar="RUN_A", help="the earlier output folder")
    p.add_argument("run_b", metavar="RUN_B", help="the later output folder")
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = diff_runs(read_run(args.run_a), read_run(args.run_b))
    # the fields an analyst decided apart from the model's, when either run applied reviews
    split = review_split(result, args.run_a, args.run_b)
    if args.json:
        found = {**result.to_dict(), **({"changed_by": split} if split else {})}
        text = json.dumps(found, indent=2, ensure_ascii=False) + "\n"
    else:
        text = render_text(result) + "".join(f"{line}\n" for line in split_lines(split))
    if not args.quiet:
        write_stream(sys.stdout, text)
    return EXIT_OK if result.identical else EXIT_INVALID
