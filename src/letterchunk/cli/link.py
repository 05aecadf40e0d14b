"""``letterchunk link --db FILE [-k 3] [--check] [--json]``.

Links each chunk of an index to chunks of OTHER letters that explain the same idea: chunks that
share one of its Buffett concepts or principles and rank highest by similarity (BM25 over its
section title, summary and principles; dense vectors too when the index has them), one chunk per
letter, up to -k letters. The links are stored in the index, replacing any before, and read from
it alone: the same index gives the same links. `letterchunk index` drops them whenever it
rewrites the chunks, so run link after index. `search --expand-links` shows them beside each hit.
A segment-only index (no concepts) gets no links, and link says so. --check only checks the
stored links (targets exist, other letter, years in range, shared idea held by both) and exits 1
when one fails. --json prints every link, one JSON object per line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, HelpFormatter, err
from letterchunk.cli.index import whole_number
from letterchunk.io import write_stream
from letterchunk.retrieval.links import LINKS_K, MAX_K, build_links, check_links, read_links

EXAMPLES = """\
Examples:
  letterchunk index out/ --db letters.sqlite
  letterchunk link --db letters.sqlite
  letterchunk search "how did the view of float change" --db letters.sqlite --expand-links
  # every link, as JSON lines
  letterchunk link --db letters.sqlite --check --json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "link",
        help=COMMAND_HELP["link"],
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--db", required=True, metavar="FILE", help="index built by `letterchunk index`")
    p.add_argument(
        "-k",
        type=whole_number(1, MAX_K),
        default=LINKS_K,
        metavar="N",
        help="links per chunk, each to another letter (default %(default)s)",
    )
    p.add_argument(
        "--check", action="store_true", help="check the stored links only; compute nothing"
    )
    p.add_argument("--json", action="store_true", help="print every link, one JSON object a line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.check:
        stats = build_links(args.db, k=args.k)
        if not args.quiet:
            if stats.reason:
                print(f"letterchunk: {args.db}: no links: {stats.reason}", file=sys.stderr)
            else:
                print(
                    f"{stats.links} link(s) for {stats.linked} of {stats.sources} chunk(s) with a "
                    f"concept or principle ({stats.chunks} in the index), each to another "
                    f"letter; ranked by {' + '.join(stats.signals)} and shared ideas",
                    file=sys.stderr,
                )
    problems = check_links(args.db)
    if args.json:
        links = [link for found in read_links(args.db).values() for link in found]
        write_stream(
            sys.stdout,
            "".join(json.dumps(dataclasses.asdict(x), ensure_ascii=False) + "\n" for x in links),
        )
    for problem in problems:
        err(f"{args.db}: {problem}")
    if problems:
        err(f"{len(problems)} link(s) fail the check; compute them again: letterchunk link --db …")
        return EXIT_INVALID
    if args.check and not args.quiet:
        print(f"{args.db}: every link holds", file=sys.stderr)
    return 0
