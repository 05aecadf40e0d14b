"""``letterchunk search "QUERY" --db FILE [filters] [-k 5] [--bm25 | --dense] [--json]``.

Ranks the most specific chunks of an index built by `letterchunk index` (Tier-2 paragraphs,
Tier-3 tables, Tier-1 chunks without children): BM25 and dense similarity fused by reciprocal
rank (or one of them alone), after the filters, with each chunk's section rank added. The k hits
are k different sections, each led by its best passage. The k hits share k x --window N tokens
(default 800, one peer chunk's worth each): each keeps its passage, then the sections' other
ranked passages come in rank order while they fit, and what is left is shared out; each hit's
window grows around its passage by whole paragraphs of its section, alternately after and before
it, taking in the ranked passages near it; those too far to merge come beside it ("also"). A
table is never cut. A passage longer than its share (a 50-year table) gives that many tokens of
its rows or sentences that best match the query.
The hit's span is the window's; "leaf" gives the ranked passage's own span and "within" names
the other ranked passages the window holds. --leaves returns the bare passages instead, each
with its section's other passages that rank before the first passage of a (k+1)-th section
("also"). A Tier-3 or Tier-2 hit names its Tier-1 parent; --expand returns the parent's text
too. --tokens N fills a context budget instead: bare passages in rank order while their tokens
fit N. --tier N ranks every chunk of tier N, one hit each. Each hit shows its chunk id, year,
section, score and exact source span (source_file[start:end]). --expand-links adds each hit's
links to chunks of other letters that share its Buffett concept or principle (computed by
`letterchunk link`): year, chunk id, the shared ideas and the link's score. --json prints one
JSON object per hit and line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.cli.index import add_embed_options, whole_number
from letterchunk.errors import ConfigError
from letterchunk.io import write_stream
from letterchunk.retrieval.embed import open_embedder
from letterchunk.retrieval.search import WINDOW_TOKENS, YEAR_MAX, Filters, Hit, YearSignal, search
from letterchunk.settings import Settings

EXAMPLES = """\
Examples:
  letterchunk search "float at no cost" --db letters.sqlite -k 3
  letterchunk search "GEICO float" --db letters.sqlite --year 1996 --company GEICO --json
  letterchunk search "equity holdings table" --db letters.sqlite --tier 3 --bm25
  # as many passages as fit 2,000 tokens of context
  letterchunk search "what makes an insurer worth owning" --db letters.sqlite --tokens 2000
  # the section around each paragraph or table hit, too
  letterchunk search "why float can cost nothing" --db letters.sqlite --expand
  # the ranked paragraphs and tables alone (whole), without the paragraphs around them
  letterchunk search "why float can cost nothing" --db letters.sqlite --leaves
  # and the other letters' chunks on the same idea (after `letterchunk link --db letters.sqlite`)
  letterchunk search "why float can cost nothing" --db letters.sqlite --expand-links
"""


# bounds of the counts: far past any corpus of letters (a few thousand sections, about two
# million tokens), so only a typo meets them
MAX_HITS = 100_000
MAX_TOKENS = 100_000_000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help=COMMAND_HELP["search"],
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--db", required=True, metavar="FILE", help="index built by `letterchunk index`")
    p.add_argument(
        "-k",
        type=whole_number(1, MAX_HITS),
        metavar="N",
        help="hits (sections) to return (default 5; no cap with --tokens unless given)",
    )
    p.add_argument(
        "--tokens",
        type=whole_number(1, MAX_TOKENS),
        metavar="N",
        help="context budget: bare passages in rank order while their tokens fit N",
    )
    f = p.add_argument_group("filters")
    f.add_argument("--year", type=whole_number(1, YEAR_MAX), metavar="Y", help="letter_year")
    f.add_argument("--company", metavar="C", help="a company named in the chunk (substring)")
    f.add_argument("--concept", metavar="K", help="a buffett_concepts value (substring)")
    f.add_argument(
        "--content-type",
        choices=["narrative", "financial_table", "mistake_confession", "principle_statement"],
    )
    f.add_argument("--tier", type=int, choices=[1, 2, 3], help="chunk_tier")
    m = p.add_mutually_exclusive_group()
    m.add_argument("--bm25", action="store_const", const="bm25", dest="mode", help="BM25 only")
    m.add_argument("--dense", action="store_const", const="dense", dest="mode", help="vectors only")
    p.add_argument("--json", action="store_true", help="one JSON object per hit and line")
    p.add_argument(
        "--expand", action="store_true", help="include each hit's parent text (parent.content)"
    )
    p.add_argument(
        "--expand-links",
        action="store_true",
        help="show each hit's linked chunks of other letters (needs `letterchunk link`)",
    )
    w = p.add_mutually_exclusive_group()
    w.add_argument(
        "--window",
        type=int,
        metavar="N",
        default=WINDOW_TOKENS,
        help="tokens per hit, shared by the k hits: passages and the text around them "
        "(default %(default)s)",
    )
    w.add_argument(
        "--leaves",
        action="store_true",
        help="return the ranked passages bare, without the text around them",
    )
    add_embed_options(p)
    p.set_defaults(func=run, mode="hybrid")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.window <= MAX_TOKENS:
        raise ConfigError(
            f"--window must be from 1 to {MAX_TOKENS:,} tokens, got {args.window}; --leaves "
            "returns bare passages"
        )
    k = args.k if args.k is not None or args.tokens is not None else 5
    filters = Filters(args.year, args.company, args.concept, args.content_type, args.tier)

    def embedder(name: str):  # noqa: ANN202 - the Embedder the index names
        return open_embedder(
            name,
            url=args.embed_url,
            api_key=Settings.from_env().embed_api_key,
            window=args.embed_window,
        )

    hits = search(
        args.db,
        args.query,
        k=k,
        tokens=args.tokens,
        filters=filters,
        mode=args.mode,
        embedder=embedder,
        expand=args.expand,
        window=None if args.leaves else args.window,
        expand_links=args.expand_links,
    )
    signal = hits[0].year_signal if hits else None
    if signal is not None and not args.quiet and not args.json:
        print(_year_note(signal), file=sys.stderr)
    lines = [_json(hit) for hit in hits] if args.json else _listing(hits)
    # one write of all the hits: a reader that stops early (`| head -1`) ends it quietly
    write_stream(sys.stdout, "".join(line + "\n" for line in lines))
    if not hits and not args.quiet:
        print("letterchunk: no hit; loosen the filters or check the query", file=sys.stderr)
    return 0


def _year_note(signal: YearSignal) -> str:
    """What the listing says of the years the query names (the --json hits carry them)."""
    named = ", ".join(f'"{words}"' for words in signal.said)
    years = ", ".join(map(str, signal.years))
    if signal.use == "off":
        return f"letterchunk: the query names {named}; --year decides the letter instead"
    return (
        f"letterchunk: the query names {named}: the chunks of {years} rank higher (a boost, "
        "not a filter; --year Y keeps one letter only)"
    )


def _json(hit: Hit) -> str:
    record = dataclasses.asdict(hit)
    record.pop("metadata")
    return json.dumps(record, ensure_ascii=False)


def _listing(hits: list[Hit]) -> list[str]:
    lines = []
    for n, hit in enumerate(hits, 1):
        lines.append(
            f"{n}. {hit.chunk_id}  {hit.letter_year}  {hit.section_title}  "
            f"score {hit.score:.4f}  {hit.source_file}[{hit.start_char}:{hit.end_char}]"
        )
        lines.append(textwrap.indent(textwrap.shorten(hit.summary or hit.content, 300), "   "))
        if (hit.leaf_start_char, hit.leaf_end_char) != (hit.start_char, hit.end_char):
            lines.append(f"   leaf {hit.source_file}[{hit.leaf_start_char}:{hit.leaf_end_char}]")
        lines += [f"   within {chunk_id}" for chunk_id in hit.within]
        lines += [
            f"   also {m.chunk_id} {m.source_file}[{m.start_char}:{m.end_char}]" for m in hit.more
        ]
        if hit.parent:
            p = hit.parent
            span = f"{p.source_file}[{p.start_char}:{p.end_char}]"
            lines.append(f"   parent {p.chunk_id} ({p.section_title}) {span}")
            if p.content is not None:
                lines.append(textwrap.indent(textwrap.shorten(p.content, 600), "   | "))
        for link in hit.links:
            via = "" if link.via == hit.chunk_id else f" (via section {link.via})"
            lines.append(
                f"   link {link.letter_year} {link.chunk_id}  {link.section_title}  score "
                f"{link.score:.4f}  shares {'; '.join(link.shared)}{via}"
            )
    return lines
