"""``letterchunk link --db FILE [-k 3] [--check] [--json] [--write DIR]``.

Links each chunk of an index to chunks of OTHER letters that explain the same idea: chunks that
share one of its Buffett concepts or principles and rank highest by similarity (BM25 over its
section title, summary and principles; dense vectors too when the index has them), one chunk per
letter, up to -k letters. The links are stored in the index, replacing any before, and read from
it alone: the same index gives the same links. `letterchunk index` drops them whenever it
rewrites the chunks, so run link after index. `search --expand-links` shows them beside each hit.
A segment-only index (no concepts) gets no links, and link says so. --check only checks the
stored links (targets exist, other letter, years in range, shared idea held by both) and exits 1
when one fails. --json prints every link, one JSON object per line.

--write DIR then writes the links' years into the chunk files of DIR, the folder the index was
built from: each enriched chunk's cross_references.related_years becomes the sorted distinct
years of its links, and [] for a chunk without links (a year the model guessed that no link
grounds is dropped). The chunk ids stay in the index. DIR must hold exactly the chunks the index
holds (years aside): otherwise nothing is written and link exits 2, asking to index and link
again. A file whose years already are the links' is not touched; files are written atomically,
under DIR's lock, and validated after.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, HelpFormatter, err
from letterchunk.cli.index import whole_number
from letterchunk.io import write_stream
from letterchunk.retrieval.chunks import chunk_files
from letterchunk.retrieval.links import LINKS_K, MAX_K, build_links, check_links, read_links
from letterchunk.retrieval.writeback import WriteBack, write_related_years
from letterchunk.runner.lock import folder_lock

EXAMPLES = """\
Examples:
  letterchunk index out/ --db letters.sqlite
  letterchunk link --db letters.sqlite
  letterchunk search "how did the view of float change" --db letters.sqlite --expand-links
  # every link, as JSON lines
  letterchunk link --db letters.sqlite --check --json
  # related_years of out/'s chunks := the years of their links
  letterchunk link --db letters.sqlite --write out/
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
    p.add_argument(
        "--write",
        metavar="DIR",
        help="then set related_years of each enriched chunk in DIR's chunk files to its links' "
        "years ([] without links: an ungrounded guess is dropped); DIR must hold the index's "
        "chunks",
    )
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
    if args.write is not None:
        folder = Path(args.write)
        chunk_files(folder)  # a path that is no output folder is refused before the lock makes it
        with folder_lock(folder):
            done = write_related_years(args.db, folder)
        if not args.quiet:
            print(_written(done, folder), file=sys.stderr)
    return 0


def _written(done: WriteBack, folder: Path) -> str:
    if not done.written:
        return (
            f"{folder}: nothing to change: the related_years of its {done.chunks} enriched "
            f"chunk(s) already are their links' years"
        )
    return (
        f"{folder}: related_years of {done.changed} of {done.chunks} enriched chunk(s) set to "
        f"their links' years in {len(done.written)} of {done.files} file(s) "
        f"({done.linked} chunk(s) linked; {done.dropped} guess(es) no link grounds dropped)"
    )
