"""`letterchunk report DIR`: one self-contained DIR/report.html of an output folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_OK, HelpFormatter
from letterchunk.errors import InputError
from letterchunk.io import write_stream
from letterchunk.layout import REVIEWS_FILE
from letterchunk.report.history import build_history
from letterchunk.report.html import build_html
from letterchunk.review.apply import folder_reviews
from letterchunk.review.records import ReviewFileError

EXAMPLES = """\
Examples:
  letterchunk report out/
  letterchunk report out/ -o /tmp/letterchunk-report.html
  letterchunk report out/ --compare out-2025/ segmented/
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help=COMMAND_HELP["report"],
        description=(
            "Read DIR's chunk files (YYYY.jsonl, segmented or enriched) with the evidence "
            "sidecars, cleaned letters and repair reports (*.report.jsonl, written by "
            "`letterchunk run`, `enrich` and `repair`) beside them, and write one static page, "
            "DIR/report.html: totals by outcome, content type, letter and rule; one card per "
            "chunk (text with evidence quotes highlighted; summary, themes, concepts, content "
            "type, principles, entities and cross references; tables; what the validator says "
            "about the file now; every attempt of the latest run with tokens and latency, a "
            "before/after diff of each repair, and the earlier runs) and filters by letter, "
            "rule, outcome and content type. Inline CSS/JS, works offline. Prints the page's "
            "path on stdout."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run` or `segment`")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="write the page here instead of DIR/report.html",
    )
    p.add_argument(
        "--compare",
        nargs="+",
        metavar="RUN",
        default=[],
        help="other output folders over the same letters (earlier or later runs): each chunk "
        "card shows the chunk's fields in every run, oldest first by the time in run.json, and "
        "a diff page REPORT.diff.html beside the page (e.g. DIR/report.diff.html) shows what "
        "changed from each run to the next; both paths are printed",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(
            folder,
            "not a folder; pass the --out folder of `letterchunk run` or `letterchunk segment`",
        )
    if not any(folder.glob("*.jsonl")):
        raise InputError(
            folder,
            f"holds no chunk files (*.jsonl) and no *.report.jsonl; run "
            f"`letterchunk segment LETTER --out {folder}` or `letterchunk "
            f"run LETTER --out {folder}` first",
        )
    if args.compare:
        page, diff_page = build_history(folder, args.compare, args.output)
        write_stream(sys.stdout, f"{page}\n{diff_page}\n")
    else:
        write_stream(sys.stdout, f"{build_html(folder, args.output)}\n")
    if not args.quiet:
        _say_unapplied(folder)
    return EXIT_OK


def _say_unapplied(folder: Path) -> None:
    """The analysts' decisions not applied (stale, refused, waiting), one line each on stderr;
    the page lists them too."""
    if not (folder / REVIEWS_FILE).is_file():
        return
    try:
        unapplied = folder_reviews(folder).unapplied
    except (ReviewFileError, InputError) as exc:
        print(f"letterchunk: {exc}", file=sys.stderr)
        return
    for u in unapplied:
        r = u.record
        print(
            f"letterchunk: {u.kind} review {r.letter} {r.chunk_id} {r.field} "
            f"({r.reviewer}, {r.time}): {u.reason}",
            file=sys.stderr,
        )
