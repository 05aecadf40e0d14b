"""`letterchunk report DIR`: one self-contained DIR/report.html from the repair reports in DIR."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import EXIT_OK, HelpFormatter

EXAMPLES = """\
Examples:
  letterchunk report out/
  letterchunk report out/ -o /tmp/letterchunk-report.html
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write DIR/report.html from DIR's repair reports (*.report.jsonl)",
        description=(
            "Read every DIR/*.report.jsonl (written by `letterchunk run` and `letterchunk "
            "repair`) with the chunk files and evidence sidecars beside them, and write one "
            "static page, DIR/report.html: totals by rule, letter and outcome, one card per "
            "chunk (text with evidence quotes highlighted, violations, a before/after diff of "
            "each repair) and filters by letter, rule and outcome. Inline CSS/JS, works "
            "offline. Prints the page's path on stdout."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run`")
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="write the page here instead of DIR/report.html")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..report import REPORT_SUFFIX, build_html

    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(folder, "not a folder; pass the --out folder of `letterchunk run`")
    if not any(folder.glob(f"*{REPORT_SUFFIX}")):
        raise InputError(folder, f"holds no *{REPORT_SUFFIX}; run `letterchunk run ... --out "
                                 f"{folder}` or `letterchunk repair FILE.jsonl` first")
    print(build_html(folder, args.output))
    return EXIT_OK
