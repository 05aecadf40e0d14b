"""The text a hit returns around its ranked passage: small to big, and big to small.

A ranked passage (a leaf: a paragraph, a table) is small so that it ranks precisely, but a reader
needs the text around it.  :func:`grow_window` grows a window around it, step by step, within an
allowance of tokens; the steps end at :func:`paragraph_edges` (and the section's chunk edges), so
a window holds whole paragraphs, as a chunk of a recursive splitter does, and never a sentence
cut from its paragraph.

A passage longer than the allowance (a 50-year performance table, a long section without
Tier-2 children) is the opposite case: returned whole it would fill the context alone.
:func:`focus_window` returns the allowance's worth of it around the line (of a table) or the
sentence (of prose) that matches the query best by BM25, grown by whole lines or sentences; with
no word of the query in it, its beginning (a table's title and column headings).  The hit still
names the whole passage (its chunk id and span), so a reader can fetch the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from letterchunk.retrieval.marks import focus_pieces, line_spans, paragraph_edges
from letterchunk.retrieval.query import fts_query
from letterchunk.retrieval.store import FTS_TOKENIZE, scratch
from letterchunk.tokens import SpanCounter

__all__ = ["focus_window", "grow_window", "line_spans", "paragraph_edges"]

_FIGURE = re.compile(r"\d")


# long function: one growth loop whose two sides share the allowance, kept whole to read as one
def grow_window(
    text: str,
    leaf: tuple[int, int],
    allowance: int,
    *,
    steps: Iterable[int],
    tables: Sequence[tuple[int, int]] = (),
    passages: Sequence[tuple[int, int]] = (),
    count: Callable[[int, int], int] | None = None,
    bounds: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """``(start, end)``: the window of ``text`` around the leaf ``text[leaf[0]:leaf[1]]``.

    The window holds at most ``allowance`` tokens (``count(a, b)``: the tokens of
    ``text[a:b]``, o200k by default).  It starts as the leaf and first takes in the section's
    other ranked ``passages``, best first, each when the span covering the window and the
    passage (and whole any table that span would cut) still fits: they merge, the text between
    them comes too.  Then it grows one step after it, then one before, and so on; a step ends
    at the next of ``steps`` (or an end of ``text``), never strictly inside a ``tables`` span,
    so a table comes whole or not at all.  A side stops for good when its next step would pass
    the allowance or ``text`` ends.  The leaf is always inside, even when it alone is over the
    allowance; the window neither starts nor ends with whitespace outside the leaf.  With
    ``bounds`` (around the leaf) the window stays inside them: what lies beyond is returned
    apart from it (a ranked passage beside the window), and must not be returned twice.
    """
    count = count or SpanCounter(text).count
    lo, hi = bounds or (0, len(text))
    start, end = leaf
    for a, b in passages:
        # the covering span; an edge it moves into a table moves to the table's edge
        a = min(a, start)
        b = max(b, end)
        if a < start:
            a = min([a, *(ta for ta, tb in tables if ta < a < tb)])
        if b > end:
            b = max([b, *(tb for ta, tb in tables if ta < b < tb)])
        if lo <= a and b <= hi and count(a, b) <= allowance:
            start, end = a, b
    points = {lo, hi, *steps}
    edges = sorted(p for p in points if lo <= p <= hi and not any(a < p < b for a, b in tables))
    after = [p for p in reversed(edges) if p > end]  # nearest last: pop() takes the next step
    before = [p for p in edges if p < start]
    growing = {"after": True, "before": True}
    while any(growing.values()):
        for side, points_left in (("after", after), ("before", before)):
            if not growing[side]:
                continue
            growing[side] = False
            while points_left:
                p = points_left.pop()
                a, b = (start, p) if side == "after" else (p, end)
                if not text[a:start].strip() and not text[end:b].strip():
                    continue  # only blanks up to this point: the step adds no text
                if count(a, b) <= allowance:
                    start, end = a, b
                    growing[side] = True
                else:
                    points_left.clear()  # the window only grows: this side can never fit again
                break
    while end > leaf[1] and text[end - 1].isspace():
        end -= 1
    while start < leaf[0] and text[start].isspace():
        start += 1
    return start, end


def focus_window(
    text: str,
    query: str,
    allowance: int,
    *,
    table: bool,
    count: Callable[[int, int], int] | None = None,
) -> tuple[int, int]:
    """``(start, end)``: at most ``allowance`` tokens of ``text`` (a passage over the allowance)
    around its line (``table``) or sentence that best matches ``query`` by BM25 (the index's
    tokenizer), grown by whole lines or sentences; its first one when none
    matches."""
    pieces = focus_pieces(text, table)
    if not pieces:
        return 0, len(text)
    best = pieces[0]
    # a table's candidates are its rows of figures: its title and column headings repeat the
    # words of any question about it, the row is what the question picks out
    candidates = [(a, b) for a, b in pieces if not table or _FIGURE.search(text, a, b)]
    match = fts_query(query)
    if match and candidates:
        conn = scratch()
        try:
            conn.execute(f"CREATE VIRTUAL TABLE piece USING fts5(t, tokenize = '{FTS_TOKENIZE}')")
            conn.executemany(
                "INSERT INTO piece (rowid, t) VALUES (?, ?)",
                [(n, text[a:b]) for n, (a, b) in enumerate(candidates)],
            )
            row = conn.execute(
                "SELECT rowid FROM piece WHERE piece MATCH ? ORDER BY bm25(piece), rowid LIMIT 1",
                (match,),
            ).fetchone()
        finally:
            conn.close()
        if row:
            best = candidates[row[0]]
    steps = [p for a, b in pieces for p in (a, b)]
    return grow_window(text, best, allowance, steps=steps, count=count)
