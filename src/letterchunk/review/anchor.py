"""Where a review applies now: its chunk found again, or the review listed as stale.

A review is anchored on the chunk it was made on (:mod:`letterchunk.review.records`: letter,
chunk id, SHA-256 of the content, quoted evidence).  After a re-segmentation the same text may
carry another id, or the chunk's text may have changed.  In that order:

1. **anchored**: a chunk of the letter has the review's id and the same content hash;
2. **re-anchored by text**: exactly one chunk of the letter has the same content (hash), under
   another id;
3. **re-anchored by quote**: the review's quote (else its target) is in exactly one chunk of
   the letter of the same tier (Tier-2 sub-chunks repeat their Tier-1 parent's text, so a
   quote is unique among the chunks of one tier), compared with whitespace collapsed;
4. otherwise the review is **stale**, with the reason: never applied to different text, never
   dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from letterchunk.contract.predicates import normalise_ws
from letterchunk.contract.schema import Chunk
from letterchunk.review.records import ReviewRecord, text_sha256

__all__ = ["How", "Placed", "Stale", "anchor_reviews"]

How = Literal["anchored", "re-anchored"]
_TIER = re.compile(r"-T([123])-")


@dataclass(frozen=True)
class Placed:
    """A review and the chunk of this folder it applies to."""

    record: ReviewRecord
    chunk_id: str
    how: How


@dataclass(frozen=True)
class Stale:
    """A review that is not applied, and why (anchor lost, refused by the validator, chunk not
    enriched yet)."""

    record: ReviewRecord
    reason: str
    kind: Literal["stale", "refused", "waiting"] = "stale"

    def to_dict(self) -> dict[str, object]:
        r = self.record
        return {
            "id": r.id,
            "letter": r.letter,
            "chunk_id": r.chunk_id,
            "field": r.field,
            "target": r.target,
            "reviewer": r.reviewer,
            "time": r.time,
            "kind": self.kind,
            "reason": self.reason,
        }


def _tier(chunk_id: str) -> str | None:
    found = _TIER.search(chunk_id)
    return found.group(1) if found else None


def _place(record: ReviewRecord, chunks: Sequence[Chunk], hashes: list[str]) -> Placed | Stale:
    for c, h in zip(chunks, hashes, strict=True):
        if c.chunk_id == record.chunk_id and h == record.text_sha256:
            return Placed(record, c.chunk_id, "anchored")
    same = [c for c, h in zip(chunks, hashes, strict=True) if h == record.text_sha256]
    if len(same) == 1:
        return Placed(record, same[0].chunk_id, "re-anchored")
    quote = record.quote or record.target
    known = any(c.chunk_id == record.chunk_id for c in chunks)
    changed = (
        "the chunk's text changed since the review"
        if known
        else f"chunk {record.chunk_id} is not in this folder"
    )
    if not quote or not quote.strip():
        return Stale(record, f"{changed}, and the review quotes no text to find it by")
    wanted = normalise_ws(quote)
    tier = _tier(record.chunk_id)
    hits = [
        c
        for c in chunks
        if (tier is None or _tier(c.chunk_id) == tier) and wanted in normalise_ws(c.content)
    ]
    if len(hits) == 1:
        return Placed(record, hits[0].chunk_id, "re-anchored")
    where = "is in no chunk of the letter" if not hits else f"is in {len(hits)} chunks"
    return Stale(record, f"{changed}, and its quote {where}; review it again")


def anchor_reviews(
    records: Iterable[ReviewRecord], letter: str, chunks: Sequence[Chunk]
) -> tuple[list[Placed], list[Stale]]:
    """The reviews of ``letter`` placed on its ``chunks`` (in the records' order), and those
    that could not be (see the module docstring)."""
    hashes = [text_sha256(c.content) for c in chunks]
    placed: list[Placed] = []
    stale: list[Stale] = []
    for r in records:
        if r.letter != letter:
            continue
        found = _place(r, chunks, hashes)
        (placed if isinstance(found, Placed) else stale).append(found)  # type: ignore[arg-type]
    return placed, stale
