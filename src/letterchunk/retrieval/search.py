"""``letterchunk search``: BM25 and dense ranking fused by reciprocal rank, filters, tier expansion.

Each retriever ranks the chunks that pass the filters; hybrid mode fuses the two rankings with
reciprocal-rank fusion (score = sum of 1 / (20 + rank)), which needs no score calibration between
BM25 and cosine.  A chunk's dense score is its best unit (summary or content window); a parent
its children cover is scored by its summary and its children's units.

What is ranked: the index's leaves (see :mod:`letterchunk.retrieval.index`), the most specific
chunks: Tier-2 paragraphs, Tier-3 tables, Tier-1 chunks without children.  Each retriever ranks
the leaves and, separately, the sections (Tier-1 chunks); a leaf's fused score adds its section's
reciprocal ranks to its own, so a passage of a section that matches the question as a whole
rises (a question about a principle often matches a section better than any one paragraph).
Hits are grouped by section: walking the fused ranking, the first leaf of a section opens a hit
and the section's later leaves join it (``more``), until a leaf would open a (k+1)-th section.
So k hits are k different sections, each returning its best passage and its other passages that
rank before that leaf; the section itself is a pointer (``parent``).  With a token
budget (``tokens``) the walk instead takes leaves while their token counts fit it.  A ``tier``
filter ranks every chunk of that tier instead, one hit each (``--tier 1`` searches whole
sections).

A year in the query: many questions name the year they ask about ("by 1977", "in the 1982
letter", "mid-1991").  A year 1950-2029 written in the query (not an amount such as "$1985" or
"1,977") is a soft signal: one more ranking joins the fusion, for
the leaves and for the sections alike, the retrievers' fused ranking of the chunks of that
year's letter alone.  Those chunks rise; the others are still ranked, since an event of one year
is often reported in a later letter.  A decade ("the 1990s", "the '90s") names each of its years;
the newest letter said without its year ("last year", "this year", "the latest letter", "the most
recent report") is read as the newest letter the index holds.  An explicit year filter
(``Filters.year``, ``--year``) turns the signal off: it already keeps only that letter.  Never
silently: every hit carries the signal (``year_signal``: the years, the words that named them,
and ``use``: ``"boost"`` or ``"off"``), ``--json`` prints it and the listing notes it.

Small to big (paragraph window, :mod:`letterchunk.retrieval.window`): a leaf is small (a
paragraph, a table) so that it ranks precisely, but a reader needs the text around it.  The k
hits share ``k * window`` tokens (``window`` default :data:`WINDOW_TOKENS`: 800, the size peer
chunkers cut at, so k hits hand the reader at most k chunks' worth of text).  Each hit keeps its
leaf; then the k sections' other ranked passages come, in rank order over all the hits, while
they fit; what is left is shared out in rank order (each hit an equal part of what remains, and
what a hit's window cannot use goes on to the hits after it).  Each hit's window starts as its
leaf, takes in its passages that merge with it (the text between them comes too), then grows in
document order by whole paragraphs of its Tier-1 parent, one after it, then one before, and so
on, while it fits the hit's passages and share; a ranked passage too far to merge is returned
beside the window (``more``), so it is never dropped for the text around the leaf.  (Measured on
the blind dev questions, docs/benchmarks.md: one 800-token window a hit, passages that did not
merge left out, found 0.867 of the evidence with the year filter; the shared budget 0.964.)
A table is never cut: the window takes it whole or stops at its edge.  A parent that fits whole
is returned whole.  The hit's ``start_char``/``end_char``/``content`` are the window's; its
``chunk_id`` and ``leaf_start_char``/``leaf_end_char`` are the leaf's; ``within`` names the
passages inside the window.  A leaf without a Tier-1 parent (a Tier-1 chunk) is its own window.
A leaf over ``window`` tokens (a 50-year table, a long section without children) counts as
``window`` and is the one thing a window cuts: the hit returns its allowance's worth of it around
the row or sentence that best matches the query (BM25), so one hit never fills the context
alone; ``leaf_start_char``/``leaf_end_char`` still give the whole leaf.  ``window=None`` returns
bare leaves, whole, and their ``more`` passages.  A token budget (``tokens``) always does, since
it already fills the context with the best-ranked passages.  A ``tier`` filter gives each hit a
window of its own of ``window`` tokens.

BM25 matches the query's content words (:mod:`letterchunk.retrieval.query`): function words
such as "why", "does" and "its" are left out.

Tier expansion (docs/spec.md §4.1): a Tier-3 (table) or Tier-2 (paragraph) hit names its Tier-1
parent (id, title, span) in ``parent``, so an answer about a figure or a quote can fetch the
surrounding text; with ``expand`` the parent's text comes with it.  Every hit carries its exact
source span: ``source_file[start_char:end_char] == content``.

Link expansion: with ``expand_links`` each hit also carries the chunks of other letters its leaf
is linked to (``letterchunk link``, :mod:`letterchunk.retrieval.links`), so a question about how
a view changed reaches the other letters that explain the same idea.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from letterchunk.errors import ConfigError
from letterchunk.retrieval.embed import Embedder, load_numpy, windows
from letterchunk.retrieval.links import LinkedChunk, linked_chunks, require_links
from letterchunk.retrieval.marks import MarkedCounter
from letterchunk.retrieval.query import YearSignal, fts_query, query_years, year_signal
from letterchunk.retrieval.store import check_index, connect, index_errors
from letterchunk.retrieval.vectors import UnitVectors, unit_vectors
from letterchunk.retrieval.window import focus_window, grow_window, paragraph_edges
from letterchunk.text.clean import FIRST_LETTER_YEAR

__all__ = [
    "Context",
    "Filters",
    "Hit",
    "Mode",
    "Passage",
    "RRF_K",
    "WINDOW_TOKENS",
    "YearSignal",
    "fts_query",
    "letter_years",
    "query_years",
    "search",
]

log = logging.getLogger(__name__)

Mode = Literal["hybrid", "bm25", "dense"]
# the reciprocal-rank constant, chosen on the blind dev questions among 10, 20, 40 and 60
# (docs/benchmarks.md, Retrieval): a smaller constant lets a passage both retrievers rank
# near the top stand further out
RRF_K = 20
POOL = 50  # candidates each retriever contributes before fusion
# o200k tokens a hit's window may hold: the chunk size of the peer chunkers letterchunk is
# measured against (chonkie, semchunk, LangChain at 800), so a hit carries one chunk's worth
WINDOW_TOKENS = 800
# content types only enrichment assigns (the segmenter writes narrative and financial_table)
ENRICHED_TYPES = ("mistake_confession", "principle_statement")
YEAR_MAX = 9999  # a year filter is a calendar year; one no letter has simply finds nothing


def letter_years() -> tuple[int, int]:
    """The first and last year a letter can have (the bounds a letter file's name is held to)."""
    return FIRST_LETTER_YEAR, _dt.date.today().year + 1


@dataclass(frozen=True)
class Filters:
    year: int | None = None
    company: str | None = None  # case-insensitive substring of any entities.companies value
    concept: str | None = None  # case-insensitive substring of any buffett_concepts value
    content_type: str | None = None
    tier: int | None = None

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE condition on table alias ``c`` (chunks) and its parameters."""
        terms: list[str] = ["1"]
        params: list[Any] = []
        if self.year is not None:
            terms.append("c.letter_year = ?")
            params.append(self.year)
        for column, value in (("companies", self.company), ("concepts", self.concept)):
            if value:
                terms.append(
                    f"EXISTS (SELECT 1 FROM json_each(c.{column}) "
                    "WHERE instr(lower(value), lower(?)) > 0)"
                )
                params.append(value)
        if self.content_type:
            terms.append("c.content_type = ?")
            params.append(self.content_type)
        if self.tier is not None:
            terms.append("c.chunk_tier = ?")
            params.append(self.tier)
        return " AND ".join(terms), params


@dataclass(frozen=True)
class Context:
    """The parent chunk of a Tier-2/Tier-3 hit: a pointer, with its text when expanded."""

    chunk_id: str
    section_title: str
    source_file: str
    start_char: int
    end_char: int
    content: str | None = None  # source_file[start_char:end_char]; None unless expanded


@dataclass(frozen=True)
class Passage:
    """Another leaf of a hit's section, ranked before the leaf of a (k+1)-th section."""

    chunk_id: str
    chunk_tier: int
    source_file: str
    start_char: int
    end_char: int
    content: str
    tokens: int = 0  # o200k tokens of content


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    letter_year: int
    section_title: str
    chunk_tier: int
    content_type: str
    score: float
    source_file: str
    start_char: int  # the returned window: source_file[start_char:end_char] == content
    end_char: int
    leaf_start_char: int  # the ranked leaf (chunk_id) itself, inside the window
    leaf_end_char: int
    summary: str
    content: str
    bm25_rank: int | None = None
    dense_rank: int | None = None
    parent: Context | None = None
    more: list[Passage] = field(default_factory=list)
    within: list[str] = field(default_factory=list)  # ids of ranked passages the window holds
    metadata: dict[str, Any] = field(default_factory=dict)
    # chunks of other letters sharing the leaf's (or its section's) idea; with expand_links
    links: list[LinkedChunk] = field(default_factory=list)
    # the letter years the query names and how the search used them (the same on every hit)
    year_signal: YearSignal | None = None


def _bm25(conn: Any, query: str, where: str, params: list[Any]) -> list[int]:
    match = fts_query(query)
    if not match:
        return []
    rows = conn.execute(
        "SELECT c.rowid FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
        f"WHERE chunks_fts MATCH ? AND {where} ORDER BY bm25(chunks_fts) LIMIT ?",
        [match, *params, POOL],
    ).fetchall()
    return [r[0] for r in rows]


def _dense_rank(conn: Any, score: dict[int, float], where: str, params: list[Any]) -> list[int]:
    """Chunk rowids passing ``where`` (on alias ``c``) by their dense ``score`` (each chunk's
    best unit cosine, :meth:`UnitVectors.best`, computed once a search), best first."""
    rows = conn.execute(f"SELECT c.rowid FROM chunks c WHERE {where}", params)
    found = [rowid for (rowid,) in rows if rowid in score]
    return sorted(found, key=lambda rowid: (-score[rowid], rowid))[:POOL]


def _fuse(rankings: list[list[int]]) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking, 1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


_COLUMNS = (
    "rowid, chunk_id, letter_year, section_title, chunk_tier, content_type, source_file, "
    "start_char, end_char, summary, content, parent_chunk_id, metadata"
)


def _parent(conn: Any, chunk_id: str, expand: bool) -> Context | None:
    row = conn.execute(
        "SELECT chunk_id, section_title, source_file, start_char, end_char, content "
        "FROM chunks WHERE chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if not row:
        return None
    chunk_id, title, source, start, end, content = row
    return Context(chunk_id, title, source, start, end, content if expand else None)


def _passage(conn: Any, rowid: int) -> Passage:
    row = conn.execute(
        "SELECT chunk_id, chunk_tier, source_file, start_char, end_char, content, "
        "json_extract(metadata, '$.token_count') FROM chunks WHERE rowid = ?",
        (rowid,),
    ).fetchone()
    chunk_id, tier, source, start, end, content, tokens = row
    return Passage(chunk_id, tier, source, start, end, content, int(tokens or 0))


def _sections(conn: Any, rowids: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    """Each chunk's section (its Tier-1 parent's rowid, or its own for a Tier-1 chunk) and its
    token count."""
    section_of: dict[int, int] = {}
    size: dict[int, int] = {}
    for first in range(0, len(rowids), 500):
        part = rowids[first : first + 500]
        rows = conn.execute(
            "SELECT c.rowid, p.rowid, json_extract(c.metadata, '$.token_count') FROM chunks c "
            "LEFT JOIN chunks p ON p.chunk_id = c.parent_chunk_id AND c.chunk_tier IN (2, 3) "
            f"WHERE c.rowid IN ({', '.join('?' * len(part))})",
            part,
        ).fetchall()
        for leaf, section, tokens in rows:
            section_of[leaf] = section or leaf
            size[leaf] = int(tokens or 0)
    return section_of, size


def _fuse_sections(
    leaves: dict[str, list[int]], sections: dict[str, list[int]], section_of: dict[int, int]
) -> list[tuple[int, float]]:
    """Leaves by the sum of their own and their section's reciprocal ranks, best first."""
    scores = dict(_fuse(list(leaves.values())))
    for ranking in sections.values():
        bonus = {rowid: 1.0 / (RRF_K + rank) for rank, rowid in enumerate(ranking, 1)}
        for leaf in scores:
            scores[leaf] += bonus.get(section_of[leaf], 0.0)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _group(
    ranked: list[tuple[int, float]],
    section_of: dict[int, int],
    k: int | None,
    size: dict[int, int],
    tokens: int | None,
) -> list[list[tuple[int, float]]]:
    """The first ``k`` sections in rank order, each with its leaves that rank before the first
    leaf of section k+1.

    With a ``tokens`` budget, a leaf that would take the passages past it is passed over (a
    smaller one further down may still fit).
    """
    groups: dict[int, list[tuple[int, float]]] = {}
    left = tokens
    for rowid, score in ranked:
        if left is not None and size[rowid] > left:
            continue
        section = section_of[rowid]
        if section not in groups:
            if k is not None and len(groups) == k:
                break
            groups[section] = []
        groups[section].append((rowid, score))
        if left is not None:
            left -= size[rowid]
    return list(groups.values())


def _window(
    conn: Any,
    parent_id: str,
    leaf: tuple[int, int],
    passages: list[Passage],
    allowance: int,
) -> tuple[tuple[int, int, str], int, list[Passage]] | None:
    """The window (start, end, text) of a Tier-2/Tier-3 leaf at source span ``leaf`` in its
    Tier-1 parent ``parent_id``, its tokens, and the section's ranked ``passages`` returned
    beside it; None when the leaf has no Tier-1 parent in the index.

    The window first takes in the passages that merge with it and grows by whole paragraphs
    (see :func:`~letterchunk.retrieval.window.grow_window`).  A ranked passage too far from the
    leaf to merge is not dropped: passages come before the text around the leaf, so those left
    out are returned beside the window, best first, while they fit the allowance, and the window
    grows around the leaf with what is left.  Window and passages together hold at most
    ``allowance`` tokens."""
    row = conn.execute(
        "SELECT start_char, content FROM chunks WHERE chunk_id = ? AND chunk_tier = 1",
        (parent_id,),
    ).fetchone()
    if not row:
        return None
    origin, text = row
    children = conn.execute(
        "SELECT chunk_tier, start_char, end_char FROM chunks WHERE parent_chunk_id = ?",
        (parent_id,),
    ).fetchall()
    spans = [(tier, a - origin, b - origin) for tier, a, b in children]
    count = MarkedCounter.of(conn, text).count  # counts the index keeps: no tokenizer
    steps = [*paragraph_edges(text), *(p for _, a, b in spans for p in (a, b))]
    tables = [(a, b) for tier, a, b in spans if tier == 3]
    own = (leaf[0] - origin, leaf[1] - origin)
    ranked = [(m.start_char - origin, m.end_char - origin) for m in passages]

    def grow(
        room: int, merge: list[tuple[int, int]], bounds: tuple[int, int] | None = None
    ) -> tuple[int, int]:
        return grow_window(
            text, own, room, steps=steps, tables=tables, passages=merge, count=count, bounds=bounds
        )

    a, b = grow(allowance, ranked)
    left = [i for i, (pa, pb) in enumerate(ranked) if not (a <= pa and pb <= b)]
    beside: list[int] = []
    if left:
        room = allowance - count(*own)
        for i in left:
            size = count(*ranked[i])
            if size <= room:
                beside.append(i)
                room -= size
        taken = sum(count(*ranked[i]) for i in beside)
        # the window stops short of the passages beside it: their text is returned once
        bounds = (
            max([0, *(ranked[i][1] for i in beside if ranked[i][1] <= own[0])]),
            min([len(text), *(ranked[i][0] for i in beside if ranked[i][0] >= own[1])]),
        )
        a, b = grow(allowance - taken, [p for i, p in enumerate(ranked) if i not in beside], bounds)
    # the window's count: its span out to the step points it grew to (the blanks its ends
    # were trimmed of counted too), which the index keeps counts for
    points = sorted({0, len(text), *steps})
    lo = max(p for p in points if p <= a and not text[p:a].strip())
    hi = min(p for p in points if p >= b and not text[b:p].strip())
    return (origin + a, origin + b, text[a:b]), count(lo, hi), [passages[i] for i in beside]


def _holds(span: tuple[int, int, str], passage: Passage) -> bool:
    return span[0] <= passage.start_char and passage.end_char <= span[1]


def _hit(
    conn: Any,
    query: str,
    rowid: int,
    score: float,
    ranks: dict[str, list[int]],
    expand: bool,
    more: list[int] | None = None,
    window: int | None = None,
    least: int | None = None,
) -> tuple[Hit, int]:
    """The hit of leaf ``rowid`` with its section's ranked passages ``more`` (bare, with
    ``window`` None, or within ``window`` tokens), and the o200k tokens it returns (at most:
    a window counts the blanks trimmed from its ends).  A leaf over ``window`` keeps its
    passages beside the part of it that matches the query while that part keeps ``least``
    tokens (default: all of ``window``)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM chunks WHERE rowid = ?", (rowid,)).fetchone()
    (_, chunk_id, year, title, tier, ctype, source, start, end, summary, content, parent, md) = row

    def rank(name: str) -> int | None:
        ranking = ranks.get(name, [])
        return ranking.index(rowid) + 1 if rowid in ranking else None

    span = (start, end, content)
    passages = [_passage(conn, r) for r in more or []]
    beside = passages
    metadata = json.loads(md)
    tokens = int(metadata.get("token_count") or 0)
    if window is not None and tokens > window:
        # a leaf over the allowance: the part of it that matches the query, not all of it,
        # beside the ranked passages that leave that part ``least`` tokens
        room = window - (window if least is None else least)
        beside = []
        for m in passages:
            if m.tokens <= room:
                beside.append(m)
                room -= m.tokens
        count = MarkedCounter.of(conn, content).count  # counts the index keeps: no tokenizer
        share = window - sum(m.tokens for m in beside)
        a, b = focus_window(content, query, share, table=tier == 3, count=count)
        # counted as its whole allowance: the index keeps no counts at the part's ends
        span, tokens = (start + a, start + b, content[a:b]), share
    elif window is not None and parent and tier in (2, 3):
        windowed = _window(conn, parent, (start, end), passages, window)
        if windowed:  # one window per hit and the ranked passages beside it that fit
            span, tokens, beside = windowed
    return Hit(
        chunk_id=chunk_id,
        letter_year=year,
        section_title=title,
        chunk_tier=tier,
        content_type=ctype,
        score=round(score, 6),
        source_file=source,
        start_char=span[0],
        end_char=span[1],
        leaf_start_char=start,
        leaf_end_char=end,
        summary=summary,
        content=span[2],
        bm25_rank=rank("bm25"),
        dense_rank=rank("dense"),
        parent=_parent(conn, parent, expand) if parent and tier in (2, 3) else None,
        # a passage the window holds is named, not returned twice
        more=[m for m in beside if not _holds(span, m)],
        within=[m.chunk_id for m in passages if _holds(span, m)],
        metadata=metadata,
    ), tokens + sum(m.tokens for m in beside if not _holds(span, m))


def search(
    db: str | Path,
    query: str,
    *,
    k: int | None = 5,
    filters: Filters | None = None,
    mode: Mode = "hybrid",
    embedder: Callable[[str], Embedder] | None = None,
    expand: bool = False,
    tokens: int | None = None,
    window: int | None = WINDOW_TOKENS,
    expand_links: bool = False,
) -> list[Hit]:
    """The ``k`` best sections' leaves in the index ``db`` for ``query`` (see the module doc).

    ``embedder`` builds the query embedder from the name stored in the index (dense and hybrid
    modes only); an index built with ``--no-dense`` searches in ``bm25`` mode.  ``expand`` puts
    each Tier-2/Tier-3 hit's parent text in ``hit.parent.content``.  ``tokens`` is a context
    budget: passages are taken in rank order while their token counts fit it (``k=None`` then
    leaves the number of sections to the budget), and returned bare.  ``window`` is each hit's
    share of the tokens the k hits return (leaves, passages and the text around them, shared
    out: see the module doc); ``None`` returns bare leaves.
    ``expand_links`` puts in ``hit.links`` the chunks of other letters its leaf is linked to
    (its section's links for a leaf with no concept of its own; see
    :mod:`letterchunk.retrieval.links`), and needs an index that ``letterchunk link`` ran on.
    """
    if k is None and tokens is None:
        raise ConfigError("search needs k, a token budget, or both")
    if window is not None and window < 1:
        raise ConfigError("a window needs at least 1 token; pass window=None for bare leaves")
    filters = filters or Filters()
    _check_numbers(k, tokens, filters)
    if tokens is not None:
        window = None  # a budget is filled with ranked passages, not with the text around them
    check_index(db, write=False)
    with index_errors(db):
        # dense scores are numpy's (retrieval.vectors): no sqlite-vec needed
        conn, _ = connect(db, vectors=False)
    try:
        with index_errors(db):
            # one read transaction: every query of the search sees the same index, and the
            # kept unit vectors are checked against it (retrieval.vectors)
            conn.execute("BEGIN")
            if expand_links:
                require_links(conn, db)
            hits = _search(conn, db, query, k, filters, mode, embedder, expand, tokens, window)
            if expand_links:
                hits = [replace(hit, links=linked_chunks(conn, hit.chunk_id)) for hit in hits]
            return hits
    finally:
        conn.close()


def _check_numbers(k: int | None, tokens: int | None, filters: Filters) -> None:
    """Counts are positive, a year has at most four digits, a tier is 1-3 (SQLite holds 64-bit
    integers: a larger year would not even reach the query).  A year no letter has (1900) is
    allowed: it finds nothing."""
    for name, value in (("k", k), ("tokens", tokens)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    if filters.year is not None and not 1 <= filters.year <= YEAR_MAX:
        raise ConfigError(
            f"year {filters.year} is no calendar year (1-{YEAR_MAX}); the letters are of "
            "{}-{}".format(*letter_years())
        )
    if filters.tier is not None and filters.tier not in (1, 2, 3):
        raise ConfigError(f"tier {filters.tier} is no chunk tier (1, 2 or 3)")


def _shared_windows(
    conn: Any,
    query: str,
    ranked: list[tuple[int, float]],
    section_of: dict[int, int],
    size: dict[int, int],
    ranks: dict[str, list[int]],
    expand: bool,
    k: int,
    window: int,
) -> list[Hit]:
    """The k best sections' hits sharing ``k * window`` tokens (see the module doc).

    Each hit keeps its leaf; then the sections' other ranked passages come in rank order, over
    all k hits, while they fit; what is left is shared out in rank order, and each hit's window
    grows around its leaf with its passages' tokens and its share; what it leaves goes on.  A
    leaf over ``window`` tokens counts as ``window``: its hit is focused to at least that many,
    beside its passages."""
    groups = _group(ranked, section_of, k, size, None)
    capped = {rowid: min(size[rowid], window) for group in groups for rowid, _ in group}
    taken = {group[0][0] for group in groups}
    used = sum(capped[rowid] for rowid in taken)
    budget = k * window
    for rowid, _ in sorted(
        (item for group in groups for item in group[1:]), key=lambda item: (-item[1], item[0])
    ):
        if used + capped[rowid] <= budget:
            taken.add(rowid)
            used += capped[rowid]
    pool = budget - used  # shared out in rank order: what a hit leaves goes to the next ones
    hits = []
    for n, group in enumerate(groups):
        kept = [(rowid, score) for rowid, score in group if rowid in taken]
        (rowid, score), *rest = kept
        own = sum(capped[r] for r, _ in kept)
        share = pool // (len(groups) - n)
        hit, spent = _hit(
            conn, query, rowid, score, ranks, expand, [r for r, _ in rest], own + share, window
        )
        pool -= min(share, max(spent - own, 0))
        hits.append(hit)
    return hits


def _search(
    conn: Any,
    db: str | Path,
    query: str,
    k: int | None,
    filters: Filters,
    mode: Mode,
    embedder: Callable[[str], Embedder] | None,
    expand: bool,
    tokens: int | None,
    window: int | None,
) -> list[Hit]:
    where, params = filters.sql()
    _check_metadata(conn, db, filters)
    dense_query = _query_vector(conn, db, query, mode, embedder)
    # every ranking of the search (leaves, sections, the year's letter) picks from these
    dense = dense_query[0].best(dense_query[1]) if dense_query is not None else None

    def rank(condition: str, extra: Sequence[Any] = ()) -> dict[str, list[int]]:
        ranks: dict[str, list[int]] = {}
        if mode in ("hybrid", "bm25"):
            ranks["bm25"] = _bm25(conn, query, condition, [*params, *extra])
        if dense is not None:
            ranks["dense"] = _dense_rank(conn, dense, condition, [*params, *extra])
        return ranks

    # a year the query names (and no --year filter) is a soft signal: one more ranking,
    # the fused ranking of that letter's chunks alone, so they rise without shutting out
    # a later letter that reports the event; every hit says which years and why
    newest = conn.execute("SELECT max(letter_year) FROM chunks").fetchone()[0]
    signal = year_signal(query, newest)
    if signal is not None and filters.year is not None:
        signal = replace(signal, use="off")
    years = list(signal.years) if signal is not None and signal.use == "boost" else []

    def rank_with_year(condition: str) -> dict[str, list[int]]:
        ranks = rank(condition)
        if years:
            among = f" AND c.letter_year IN ({', '.join('?' * len(years))})"
            ranks["year"] = [r for r, _ in _fuse(list(rank(condition + among, years).values()))]
        return ranks

    if filters.tier is not None:  # one hit per chunk: each is its own section
        ranks = rank_with_year(where)
        fused = _fuse(list(ranks.values()))
        _, size = _sections(conn, [rowid for rowid, _ in fused])
        hits = _group(fused, {r: r for r, _ in fused}, k, size, tokens)
        found = [
            _hit(conn, query, rowid, score, ranks, expand, window=window)[0]
            for [(rowid, score)] in hits
        ]
        return [replace(hit, year_signal=signal) for hit in found]
    leaves = rank_with_year(where + " AND c.leaf = 1")
    sections = rank_with_year(where + " AND c.chunk_tier = 1")
    candidates = sorted({r for ranking in leaves.values() for r in ranking})
    section_of, size = _sections(conn, candidates)
    ranked = _fuse_sections(leaves, sections, section_of)
    if window is not None and k is not None:
        return [
            replace(hit, year_signal=signal)
            for hit in _shared_windows(
                conn, query, ranked, section_of, size, leaves, expand, k, window
            )
        ]
    groups = _group(ranked, section_of, k, size, tokens)
    return [
        replace(
            _hit(conn, query, rowid, score, leaves, expand, [r for r, _ in rest], window)[0],
            year_signal=signal,
        )
        for (rowid, score), *rest in groups
    ]


# what an enrichment-only filter needs the index to hold, probed per letter on table alias c
_ENRICHED = {
    "company": ("--company", "company names (entities.companies)", "c.companies != '[]'"),
    "concept": ("--concept", "Buffett concepts (buffett_concepts)", "c.concepts != '[]'"),
    "content_type": (
        "--content-type",
        "enriched content types (a summary on some chunk)",
        "c.summary != ''",
    ),
}


def _check_metadata(conn: Any, db: str | Path, filters: Filters) -> None:
    """A filter on metadata only enrichment writes (companies, concepts, the confession and
    principle content types) matches nothing in a segmented letter: a warning says so, naming
    the letters without that metadata (the search still runs: it may find nothing)."""
    wanted = [
        _ENRICHED[name]
        for name, value in (
            ("company", filters.company),
            ("concept", filters.concept),
            (
                "content_type",
                filters.content_type if filters.content_type in ENRICHED_TYPES else None,
            ),
        )
        if value
    ]
    scope, params = ("c.letter_year = ?", [filters.year]) if filters.year is not None else ("1", [])
    for option, what, probe in wanted:
        rows = conn.execute(
            f"SELECT c.letter_year, max({probe}) FROM chunks c WHERE {scope} "
            "GROUP BY c.letter_year ORDER BY c.letter_year",
            params,
        ).fetchall()
        bare = [year for year, held in rows if not held]
        if rows and len(bare) == len(rows):
            letters = f"the {bare[0]} letter in {db}" if len(bare) == 1 else str(db)
            log.warning(
                "%s holds no %s: it was indexed from segmented chunks, which have none, so %s "
                "can match nothing; enrich the letters (`letterchunk enrich DIR`) and index "
                "again, or search without %s",
                letters,
                what,
                option,
                option,
            )
        elif bare:
            shown = ", ".join(map(str, bare[:10])) + (", …" if len(bare) > 10 else "")
            log.warning(
                "%s: %d letter(s) (segmented, not enriched) hold no %s: %s; %s matches only the "
                "other letters: enrich these and index again to search them too",
                db,
                len(bare),
                what,
                shown,
                option,
            )


def _warn_unembedded(vectors: UnitVectors, db: str | Path) -> None:
    """A warning when some chunks have text to embed but no vectors: an ``index`` run was
    interrupted (or ran with --no-dense after the chunks changed); dense ranking misses them."""
    missing, total = vectors.unembedded
    if missing:
        log.warning(
            "%s: %d of %d chunk(s) have no vectors yet (an interrupted `letterchunk index`, or "
            "one run with --no-dense after the chunks changed), so dense ranking cannot find "
            "them; run `letterchunk index DIR --db %s` again: it embeds only what is missing",
            db,
            missing,
            total,
            db,
        )


def _query_vector(
    conn: Any, db: str | Path, query: str, mode: Mode, embedder: Callable[[str], Embedder] | None
) -> tuple[UnitVectors, Any] | None:
    """The index's unit vectors and the query's vector for dense ranking, or None (BM25 mode,
    or an index with no vectors)."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if mode == "bm25":
        return None
    name = meta.get("embedder")
    if not name or not conn.execute("SELECT 1 FROM units LIMIT 1").fetchone():
        if mode == "dense":
            raise ConfigError(
                f"{db} has no vectors (indexed with --no-dense); index again without "
                "--no-dense, or search with --bm25"
            )
        return None
    if embedder is None:
        raise ConfigError(f"{db} holds {name} vectors; pass an embedder for them")
    kept = unit_vectors(conn, db)
    _warn_unembedded(kept, db)
    model = embedder(name)
    # a query longer than the model's window is embedded window by window, and the mean of
    # the window vectors (normalised) stands for it; the model never sees a cut text
    vectors = model.embed([query[w.start : w.end] for w in windows(model, query)])
    np = load_numpy()
    mean = vectors.mean(axis=0)
    return kept, mean / max(float(np.linalg.norm(mean)), 1e-12)
