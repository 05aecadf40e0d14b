"""The rules over one letter's chunks (corpus rules): one letter per file, completeness, unique
ids, reading order, parent/child links and nesting, Tier-1 tiling and overlaps, numbered lists,
id sequences, orphan evidence.  Every chunk's own rules run first (:mod:`chunk_checks`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise

from letterchunk.contract.chunk_checks import check_chunk
from letterchunk.contract.predicates import LIST_ITEM, list_item_value, parse_id, short
from letterchunk.contract.schema import Chunk
from letterchunk.contract.violations import (
    CheckContext,
    LetterContext,
    Violation,
    check_stage,
    placed,
    violation,
)
from letterchunk.layout import is_compilation_source
from letterchunk.tokens import count_tokens, span_counter

__all__ = ["check_letter", "token_counts"]


class _Letter:
    """The chunks of one letter under check, the file lines they came from, what was found."""

    def __init__(
        self, chunks: Sequence[Chunk], lines: Sequence[int | None] | None, file: str | None
    ) -> None:
        self.chunks = chunks
        self.lines = lines
        self.file = file
        self.out: list[Violation] = []

    def place(self, i: int, found: Iterable[Violation]) -> None:
        """Record violations of chunk ``i``, with its file and line when they are known."""
        line = self.lines[i] if self.lines is not None else None
        for v in found:
            self.out.append(
                placed(v, file=self.file, line=line) if (self.file or self.lines) else v
            )

    def add(self, i: int, code: str, message: str, fld: str | None = None) -> None:
        self.place(i, [violation(code, message, chunk_id=self.chunks[i].chunk_id, field=fld)])

    def span(self, i: int) -> tuple[int, int]:
        s = self.chunks[i].metadata.source_span
        return s.start_char, s.end_char_exclusive


def check_letter(
    chunks: Sequence[Chunk],
    stage: str,
    context: LetterContext | None,
    lines: Sequence[int | None] | None = None,
    file: str | None = None,
    complete: bool = True,
) -> list[Violation]:
    """Every chunk rule for each chunk, then the corpus rules over the letter.  O(n log n).

    ``lines``/``file`` place each violation in the file the chunks were read from.
    ``complete=False``: some lines of the file could not be parsed into chunks, so rules that
    need every chunk (missing links, tiling, sequences) are skipped instead of cascading.
    """
    check_stage(stage)
    ctx = CheckContext(context, chunks)
    letter = _Letter(chunks, lines, file)
    for i, (chunk, ntokens) in enumerate(
        zip(chunks, token_counts(chunks, ctx.cleaned), strict=True)
    ):
        letter.place(i, check_chunk(chunk, stage, ctx, ntokens))
    if not chunks:
        return letter.out
    _consistency(letter)
    if stage == "enriched":
        _incomplete(letter)
    index = _unique_ids(letter)
    _reading_order(letter)
    for i in range(len(chunks)):
        _parent_link(letter, i, index, complete)
        _child_links(letter, i, index, complete)
    t1 = sorted(
        (i for i in range(len(chunks)) if chunks[i].metadata.chunk_tier == 1), key=letter.span
    )
    _tiling(letter, t1, ctx.cleaned if complete else None, complete)
    _list_split(letter, t1)
    _sibling_overlap(letter)
    # a chunk that failed to parse would shift every number after it
    _section_sequence(letter, t1 if complete else [])
    if complete:
        _id_sequences(letter, index)
    if stage == "enriched" and ctx.evidence:
        for cid in ctx.evidence:
            if cid not in index:
                letter.out.append(
                    violation(
                        "evidence.orphan",
                        f"evidence record for {cid} names no chunk of this letter",
                        chunk_id=cid,
                        file=file,
                    )
                )
    return letter.out


def _consistency(letter: _Letter) -> None:
    """Rule letter.inconsistent: every chunk has the first chunk's year, date and source file."""
    chunks = letter.chunks
    first = chunks[0].metadata
    for i, chunk in enumerate(chunks[1:], start=1):
        md = chunk.metadata
        for fld in ("letter_year", "letter_date", "source_file"):
            if getattr(md, fld) != getattr(first, fld):
                letter.add(
                    i,
                    "letter.inconsistent",
                    f"{fld} is {getattr(md, fld)!r} but the letter's "
                    f"first chunk has {getattr(first, fld)!r}",
                    f"metadata.{fld}",
                )


def _incomplete(letter: _Letter) -> None:
    """Rule letter.incomplete: a stopped run kept chunks as segmented; one clear message on top
    of the per-chunk summary.missing errors."""
    chunks = letter.chunks
    bare = [i for i, c in enumerate(chunks) if not c.metadata.contextual_summary.strip()]
    if bare:
        letter.add(
            bare[0],
            "letter.incomplete",
            f"{len(bare)} of {len(chunks)} chunk(s) are not "
            "enriched yet (empty contextual_summary), first this one: a halted, skipped, "
            "budget-capped or interrupted run keeps them as segmented; run `letterchunk "
            "enrich DIR` on this folder to finish the letter",
            "metadata.contextual_summary",
        )


def _unique_ids(letter: _Letter) -> dict[str, int]:
    """Rule corpus.duplicate_id; returns chunk id -> position of its first chunk."""
    index: dict[str, int] = {}
    for i, chunk in enumerate(letter.chunks):
        if chunk.chunk_id in index:
            letter.add(
                i,
                "corpus.duplicate_id",
                f"chunk_id also used by the chunk at position "
                f"{index[chunk.chunk_id] + 1}; ids must be unique",
                "chunk_id",
            )
        else:
            index[chunk.chunk_id] = i
    return index


def _reading_order(letter: _Letter) -> None:
    """Rule corpus.order: chunks sorted by (start_char, tier, chunk_id); reported once."""
    chunks = letter.chunks
    keys = [
        (letter.span(i)[0], chunks[i].metadata.chunk_tier, chunks[i].chunk_id)
        for i in range(len(chunks))
    ]
    for i in range(1, len(chunks)):
        if keys[i] < keys[i - 1]:
            letter.add(
                i,
                "corpus.order",
                "chunks must be in reading order (start_char, chunk_tier, chunk_id); sort the file",
                "metadata.source_span.start_char",
            )
            break


def _parent_link(letter: _Letter, i: int, index: dict[str, int], complete: bool) -> None:
    """Rules link.parent_missing, link.parent_tier, link.child_asymmetry, link.nesting and
    id.section_mismatch for chunk ``i``'s parent."""
    chunk = letter.chunks[i]
    parent = chunk.metadata.parent_chunk_id
    if parent is None or parent == chunk.chunk_id or not parse_id(parent):
        return
    j = index.get(parent)
    if j is None:
        if complete:
            letter.add(
                i,
                "link.parent_missing",
                f"parent {parent} is not in this letter",
                "metadata.parent_chunk_id",
            )
        return
    pmd = letter.chunks[j].metadata
    if pmd.chunk_tier != 1:
        letter.add(
            i,
            "link.parent_tier",
            f"parent {parent} is Tier-{pmd.chunk_tier}; parents are Tier-1",
            "metadata.parent_chunk_id",
        )
    if chunk.chunk_id not in pmd.child_chunk_ids:
        letter.add(
            i,
            "link.child_asymmetry",
            f"parent {parent} does not list this chunk in child_chunk_ids; add it there",
            "metadata.parent_chunk_id",
        )
    ps, pe = letter.span(j)
    cs, ce = letter.span(i)
    if not (ps <= cs and ce <= pe):
        letter.add(
            i,
            "link.nesting",
            f"span [{cs}, {ce}) is not inside parent {parent}'s [{ps}, {pe})",
            "metadata.source_span",
        )
    pid, cid_ = parse_id(parent), parse_id(chunk.chunk_id)
    if pid and cid_ and pid[1] != cid_[1]:
        letter.add(
            i,
            "id.section_mismatch",
            f"chunk is in section S{cid_[1]} but its parent is in S{pid[1]}",
            "chunk_id",
        )


def _child_links(letter: _Letter, i: int, index: dict[str, int], complete: bool) -> None:
    """Rules link.child_missing, link.child_asymmetry for chunk ``i``'s children."""
    chunks = letter.chunks
    chunk = chunks[i]
    for child in chunk.metadata.child_chunk_ids:
        if child == chunk.chunk_id or not parse_id(child):
            continue
        k = index.get(child)
        if k is None:
            if complete:
                letter.add(
                    i,
                    "link.child_missing",
                    f"child {child} is not in this letter",
                    "metadata.child_chunk_ids",
                )
        elif chunks[k].metadata.parent_chunk_id != chunk.chunk_id:
            letter.add(
                i,
                "link.child_asymmetry",
                f"child {child} names "
                f"{chunks[k].metadata.parent_chunk_id!r} as parent, not this chunk",
                "metadata.child_chunk_ids",
            )


def _tiling(letter: _Letter, t1: list[int], cleaned: str | None, complete: bool) -> None:
    """Rules corpus.no_t1, corpus.overlap, corpus.tiling_gap over the Tier-1 chunks ``t1``
    (sorted by span); gaps only when the cleaned text is known."""
    if not t1 and complete:
        letter.add(
            0, "corpus.no_t1", "the letter has no Tier-1 chunk; Tier-1 chunks must tile the letter"
        )
    prev_end = 0
    prev: int | None = None
    for i in t1:
        s, e = letter.span(i)
        if e <= s:
            continue  # span.order already reported
        if prev is not None and s < prev_end:
            letter.add(
                i,
                "corpus.overlap",
                f"span [{s}, {e}) overlaps {letter.chunks[prev].chunk_id} (ends at {prev_end})",
                "metadata.source_span",
            )
        elif cleaned is not None and cleaned[prev_end:s].strip():
            letter.add(
                i,
                "corpus.tiling_gap",
                f"cleaned text [{prev_end}, {s}) before this chunk is in no "
                f"Tier-1 chunk: {short(cleaned[prev_end:s].strip(), 50)}",
                "metadata.source_span",
            )
        if e > prev_end:
            prev_end, prev = e, i
    if t1 and cleaned is not None and prev_end <= len(cleaned) and cleaned[prev_end:].strip():
        letter.add(
            prev if prev is not None else t1[-1],
            "corpus.tiling_gap",
            f"cleaned text after "
            f"{prev_end} is in no Tier-1 chunk: {short(cleaned[prev_end:].strip(), 50)}",
            "metadata.source_span",
        )


def _list_split(letter: _Letter, t1: list[int]) -> None:
    """Rule boundary.list_split: numbered lists stay together (§6), so the next Tier-1 chunk
    must not continue a list of the previous one."""
    chunks = letter.chunks
    for a, b in pairwise(t1):
        m = LIST_ITEM.match(chunks[b].content)
        if m and list_item_value(m[1]) >= 2:
            previous = {list_item_value(x) for x in LIST_ITEM.findall(chunks[a].content)}
            if list_item_value(m[1]) - 1 in previous:
                letter.add(
                    b,
                    "boundary.list_split",
                    f"starts with item {m[1]} of a list whose item "
                    f"{list_item_value(m[1]) - 1} is in {chunks[a].chunk_id}; keep numbered lists "
                    "in one chunk",
                    "content",
                )


def _sibling_overlap(letter: _Letter) -> None:
    """Rule corpus.overlap for same-tier siblings under one parent."""
    siblings: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, chunk in enumerate(letter.chunks):
        md = chunk.metadata
        if md.parent_chunk_id and md.chunk_tier == 2:
            siblings[(md.parent_chunk_id, md.chunk_tier)].append(i)
    for group in siblings.values():
        group.sort(key=letter.span)
        for a, b in pairwise(group):
            if letter.span(b)[0] < letter.span(a)[1]:
                letter.add(
                    b,
                    "corpus.overlap",
                    f"overlaps sibling {letter.chunks[a].chunk_id}",
                    "metadata.source_span",
                )


def _section_sequence(letter: _Letter, t1: list[int]) -> None:
    """Rule id.sequence on sections: the Tier-1 chunks ``t1`` number sections S1, S2, ... in
    reading order.  A compilation's letter (``YYYY-Lk_cleaned.txt``) goes on from the sections of
    its year's earlier letters, so its first section may be any number."""
    last_section: int | None = None
    if t1 and is_compilation_source(letter.chunks[t1[0]].metadata.source_file):
        first = parse_id(letter.chunks[t1[0]].chunk_id)
        last_section = first[1] - 1 if first is not None else None
    for i in t1:
        p = parse_id(letter.chunks[i].chunk_id)
        if p is None:
            continue
        section = p[1]
        ok = section <= 1 if last_section is None else section in (last_section, last_section + 1)
        if not ok:
            letter.add(
                i,
                "id.sequence",
                f"section S{section} follows S{last_section}; number sections "
                "S1, S2, ... in reading order",
                "chunk_id",
            )
        last_section = section if last_section is None else max(last_section, section)


def _id_sequences(letter: _Letter, index: dict[str, int]) -> None:
    """Rule id.sequence on sequences: 001, 002, ... per (section, tier) in reading order."""
    chunks = letter.chunks
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    seq: dict[int, int] = {}  # the sequence number in the id of each grouped chunk
    for i in range(len(chunks)):
        p = parse_id(chunks[i].chunk_id)
        if p is not None and index.get(chunks[i].chunk_id) == i:
            groups[(p[1], p[2])].append(i)
            seq[i] = p[3]
    for (section, tier), members in groups.items():
        members.sort(key=lambda i: (letter.span(i), seq[i]))
        for n, i in enumerate(members, start=1):
            if seq[i] != n:
                letter.add(
                    i,
                    "id.sequence",
                    f"expected S{section}-T{tier}-{n:03d} here (sequences run "
                    "001, 002, ... in reading order)",
                    "chunk_id",
                )
                break


def token_counts(chunks: Sequence[Chunk], cleaned: str | None) -> list[int]:
    """``count_tokens(chunk.content)`` for every chunk.  A chunk whose span holds its content in
    the cleaned text is counted from one tokenizer pass over that text (exact: see
    :class:`letterchunk.tokens.SpanCounter`); any other chunk is encoded on its own."""
    spans: list[tuple[int, int] | None] = []
    for chunk in chunks:
        s = chunk.metadata.source_span
        a, b = s.start_char, s.end_char_exclusive
        ok = (
            cleaned is not None
            and 0 <= a < b <= len(cleaned)
            and b - a == len(chunk.content)
            and cleaned.startswith(chunk.content, a)  # cleaned[a:b] == content, no copy
        )
        spans.append((a, b) if ok else None)
    counter = None
    if cleaned is not None and any(spans):
        counter = span_counter(cleaned)
    return [
        counter.count(*sp) if sp and counter is not None else count_tokens(chunk.content)
        for chunk, sp in zip(chunks, spans, strict=True)
    ]
