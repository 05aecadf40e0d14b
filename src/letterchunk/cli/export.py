"""``letterchunk export DIR --to langchain|llamaindex|jsonl-flat [--out FILE]``.

Reads DIR/YYYY.jsonl (segmented or enriched) and writes one JSON object per chunk: a LangChain
``Document(**obj)``, a LlamaIndex ``TextNode.model_validate(obj)``, or a store-neutral flat line.
Metadata is flat and filterable (LangChain: scalars only, lists joined with "; "; LlamaIndex and
jsonl-flat: scalars and lists of scalars); only the summary and the content are embedded; the
chunk id is the document id and tiers are parent/child relationships.  Without --out the lines go
to stdout.
"""

from __future__ import annotations

import argparse
import sys

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.io import write_stream
from letterchunk.retrieval.export import TARGETS, export_folder

EXAMPLES = """\
Examples:
  letterchunk export out/ --to llamaindex --out nodes.jsonl
  letterchunk export out/ --to langchain --out docs.jsonl --embed content
  letterchunk export out/ --to jsonl-flat > chunks.jsonl
"""

LOADING = """\
In Python (the export extra brings both libraries):
  from letterchunk.retrieval.export import load_llamaindex, load_langchain
  nodes = load_llamaindex("nodes.jsonl")   # each line: TextNode.model_validate_json(line)
  docs = load_langchain("docs.jsonl")      # each line: Document(**json.loads(line))
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help=COMMAND_HELP["export"],
        description=(__doc__.split("\n\n", 1)[1].replace("``", "") + "\n" + LOADING)
        if __doc__
        else None,
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run` or `segment`")
    p.add_argument("--to", required=True, choices=TARGETS, help="target library or format")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write here instead of stdout: a file is replaced atomically, a device or FIFO "
        "written as a stream",
    )
    p.add_argument(
        "--embed",
        choices=["summary+content", "content"],
        default="summary+content",
        help="what the target embeds: the contextual summary then the content (default), or "
        "the content alone",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    lines = export_folder(args.dir, args.to, args.out, embed=args.embed)
    if args.out is None:
        write_stream(sys.stdout, "".join(line + "\n" for line in lines))
    elif not args.quiet:
        print(f"{len(lines)} chunk(s) written to {args.out} ({args.to})", file=sys.stderr)
    return 0
