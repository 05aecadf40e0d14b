"""Exact o200k token counts of a hit's window, kept in the index so a search loads no tokenizer.

A hit's window grows by steps and asks the token count of many spans between step points: over
its Tier-1 section, points at the section's paragraph edges and its children's edges
(:func:`~letterchunk.retrieval.window.grow_window`); inside a passage longer than the window,
points at its lines or sentences (:func:`~letterchunk.retrieval.window.focus_window`).
:class:`~letterchunk.tokens.SpanCounter` counts a span as ``head(a) + tail(b)``, each part
depending on one end only (the parts exist where a safe cut lies near each end).  The index
keeps both parts for every such point of every chunk text (table ``token_marks``, keyed by the
sha256 of the text, so a changed text never meets stale counts), and :class:`MarkedCounter`
counts spans from them.  Any other span (an end with no safe cut near it, a point not kept)
is counted by the tokenizer, loaded then: a count is always the exact one, only its cost
differs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from letterchunk.text.lines import split_lines
from letterchunk.text.sentences import sentence_spans
from letterchunk.tokens import SpanCounter

__all__ = [
    "MARKS_SQL",
    "MarkedCounter",
    "focus_pieces",
    "line_spans",
    "marks_of",
    "paragraph_edges",
    "section_points",
    "write_marks",
]

MARKS_SQL = (
    "CREATE TABLE IF NOT EXISTS token_marks (text_sha TEXT PRIMARY KEY, marks TEXT NOT NULL)"
)

_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")


def paragraph_edges(text: str) -> list[int]:
    """The start and end of each paragraph of ``text`` (blocks between blank lines)."""
    edges = [0, len(text)]
    for match in _BLANK_LINES.finditer(text):
        edges += [match.start(), match.end()]
    return sorted(set(edges))


def line_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each non-blank line of ``text``, without its trailing blanks."""
    return [(ln.start, ln.start + len(ln.raw.rstrip())) for ln in split_lines(text) if not ln.blank]


def focus_pieces(text: str, table: bool) -> list[tuple[int, int]]:
    """The pieces a passage longer than its window is cut into: lines of a table, sentences of
    prose."""
    return line_spans(text) if table else sentence_spans(text)


def section_points(text: str, children: Iterable[tuple[int, int]]) -> set[int]:
    """The points a window grows to over a section: its paragraph edges and its children's
    edges (``children``: spans relative to ``text``)."""
    return {*paragraph_edges(text), *(p for span in children for p in span)}


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def marks_of(text: str, points: Iterable[int]) -> str:
    """The kept parts (JSON) of ``text`` at ``points``: ``head`` and ``tail`` lists of
    ``[point, cut, n]``, a point with no safe cut near it left out."""
    counter = SpanCounter(text, background=False)
    kept = sorted({p for p in points if 0 <= p <= len(text)})
    heads = [[p, *h] for p in kept if (h := counter.head(p)) is not None]
    tails = [[p, *t] for p in kept if (t := counter.tail(p)) is not None]
    return json.dumps({"head": heads, "tail": tails}, separators=(",", ":"))


def write_marks(conn: Any, points: dict[str, set[int]]) -> None:
    """Keep the marks of each text of ``points`` (text -> its points): reuse those of an
    unchanged text, compute the others, drop those of texts no longer indexed."""
    wanted = {text_key(text): text for text in points}
    have = {row[0] for row in conn.execute("SELECT text_sha FROM token_marks")}
    conn.executemany(
        "DELETE FROM token_marks WHERE text_sha = ?", [(key,) for key in have - wanted.keys()]
    )
    conn.executemany(
        "INSERT INTO token_marks VALUES (?, ?)",
        [(key, marks_of(wanted[key], points[wanted[key]])) for key in sorted(wanted.keys() - have)],
    )


class MarkedCounter:
    """``count(a, b) == count_tokens(text[a:b])``, from the index's marks where they serve."""

    def __init__(self, text: str, marks: str | None) -> None:
        self.text = text
        kept = json.loads(marks) if marks else {"head": [], "tail": []}
        self._heads = {p: (cut, n) for p, cut, n in kept["head"]}
        self._tails = {p: (cut, n) for p, cut, n in kept["tail"]}
        self._exact: SpanCounter | None = None

    @classmethod
    def of(cls, conn: Any, text: str) -> MarkedCounter:
        row = conn.execute(
            "SELECT marks FROM token_marks WHERE text_sha = ?", (text_key(text),)
        ).fetchone()
        return cls(text, row[0] if row else None)

    def count(self, a: int, b: int) -> int:
        # SpanCounter's decomposition, from kept parts (exact for a span of any length)
        head, tail = self._heads.get(a), self._tails.get(b)
        if head is not None and tail is not None and tail[0] >= head[0]:
            return head[1] + tail[1]
        if self._exact is None:  # a span the marks do not serve: the tokenizer counts it
            self._exact = SpanCounter(self.text, background=False)
        return self._exact.count(a, b)
