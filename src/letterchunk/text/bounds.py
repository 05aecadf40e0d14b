"""Tier-1 size bounds: parts of a long section, each at most :data:`T1_MAX_TOKENS` tokens.

The segmenter's even split (:mod:`letterchunk.text.segment`, step 4) works on glued units and
on sums of block counts, which leave out the whitespace between blocks; a part it makes can end
a few tokens over the maximum, and a glued unit (a header with its paragraph, a one-sentence
transition with the next paragraph) or a single paragraph over the maximum is never broken.
When a part is over the maximum and could be split, :func:`bounded_parts` splits the section
again, on exact span counts:

* pieces are the section's glued units; a unit over the maximum that holds no table is broken
  into its blocks (a header, separator, salutation or letterhead stays glued to what follows),
  and a paragraph or list over the maximum into its sentences
  (:func:`letterchunk.text.sentences.sentence_spans`);
* dynamic programming picks the fewest parts, then the most even ones: every part is at most
  the maximum unless it is a single piece (a table with its lead-in, or a sentence, is never
  split), and at least :data:`T1_MIN_TOKENS` tokens (the anti-orphan rules of spec §2.4 come
  first: a part over the maximum is chosen only where every other split leaves a short part).

A table is never split; a part over the maximum that cannot be split gets a boundary note
(spec §3.1 rule 8) saying why it was kept whole.
"""

from __future__ import annotations

import math

from letterchunk.contract.rules import T1_MAX_TOKENS, T1_MIN_TOKENS
from letterchunk.text.blocks import Block
from letterchunk.text.sentences import sentence_spans
from letterchunk.tokens import SpanCounter

__all__ = ["bounded_parts", "kept_whole_note", "split_note"]

_GLUED_FORWARD = ("header", "separator", "salutation", "letterhead")


def split_note(n_part: int, n_parts: int, sentences: bool) -> str:
    """The boundary note of part ``n_part`` of a section split into ``n_parts``."""
    where = (
        "paragraph boundaries and, inside a paragraph over the maximum, at sentence boundaries"
        if sentences
        else "paragraph boundaries"
    )
    return f"Section over {T1_MAX_TOKENS} tokens split at {where} (part {n_part} of {n_parts})."


def kept_whole_note(blocks: list[Block], tokens: int) -> str:
    """The boundary note of a part over the maximum that cannot be split."""
    what = "a table is" if any(b.kind == "table" for b in blocks) else "a sentence is"
    return (
        f"Kept whole at {tokens} tokens, over the {T1_MAX_TOKENS}-token maximum: "
        f"{what} never split."
    )


def _sentence_blocks(b: Block, text: str) -> list[Block]:
    """``b`` as one block per sentence (same kind and lines; spans without outer blanks)."""
    spans = sentence_spans(text[b.start : b.end])
    return [
        Block(kind=b.kind, first=b.first, last=b.last, start=b.start + s, end=b.start + e)
        for s, e in spans
    ] or [b]


def _rejoin(blocks: list[Block]) -> list[Block]:
    """Sentences of one paragraph that ended in the same part, as one block again."""
    out: list[Block] = []
    for b in blocks:
        prev = out[-1] if out else None
        if prev is not None and (prev.kind, prev.first, prev.last) == (b.kind, b.first, b.last):
            out[-1] = Block(kind=b.kind, first=b.first, last=b.last, start=prev.start, end=b.end)
        else:
            out.append(b)
    return out


def _pieces(units: list[list[Block]], text: str, counter: SpanCounter) -> list[list[Block]]:
    """The section's units, those over the maximum without a table broken as far as allowed."""
    pieces: list[list[Block]] = []
    for unit in units:
        size = counter.count(unit[0].start, unit[-1].end)
        if size <= T1_MAX_TOKENS or any(b.kind == "table" for b in unit):
            pieces.append(unit)
            continue
        carry: list[Block] = []
        for b in unit:
            parts = [b]
            if b.kind in ("paragraph", "list") and counter.count(b.start, b.end) > T1_MAX_TOKENS:
                parts = _sentence_blocks(b, text)
            for p in parts:
                carry.append(p)
                if p.kind not in _GLUED_FORWARD:
                    pieces.append(carry)
                    carry = []
        if carry:
            if pieces:
                pieces[-1] = pieces[-1] + carry
            else:
                pieces.append(carry)
    return pieces


def bounded_parts(
    units: list[list[Block]], text: str, counter: SpanCounter
) -> tuple[list[list[Block]], bool]:
    """The section's blocks (``units``: its glued units, in order) in parts within the bounds,
    and whether a paragraph was split at sentence boundaries."""
    pieces = _pieces(units, text, counter)
    n = len(pieces)
    total = counter.count(pieces[0][0].start, pieces[-1][-1].end)
    ideal = max(T1_MIN_TOKENS, total / max(1, math.ceil(total / T1_MAX_TOKENS)))
    inf = float("inf")
    best = [inf] * (n + 1)
    back = [0] * (n + 1)
    best[0] = 0.0
    for j in range(1, n + 1):
        for i in range(j - 1, -1, -1):
            t = counter.count(pieces[i][0].start, pieces[j - 1][-1].end)
            if t > 3 * T1_MAX_TOKENS and j - i > 1:
                break
            cost = 1e7 + (t - ideal) ** 2  # fewest parts first, then the most even
            if t < T1_MIN_TOKENS:
                cost += 1e13
            if t > T1_MAX_TOKENS and j - i > 1:
                cost += 1e10 + (t - T1_MAX_TOKENS) * 1e6
            if best[i] + cost < best[j]:
                best[j], back[j] = best[i] + cost, i
    parts: list[list[Block]] = []
    j = n
    while j > 0:
        i = back[j]
        parts.append(_rejoin([b for p in pieces[i:j] for b in p]))
        j = i
    parts.reverse()
    originals = {(b.start, b.end): b for u in units for b in u}
    parts = [[originals.get((b.start, b.end), b) for b in p] for p in parts]
    split_sentences = any((b.start, b.end) not in originals for p in parts for b in p)
    return parts, split_sentences
