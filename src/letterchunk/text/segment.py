"""Rule-based pre-segmenter: a :class:`~letterchunk.text.clean.CleanedLetter` -> canonical chunks.

Pipeline (deterministic; no LLM):

1. :func:`letterchunk.text.blocks.detect_blocks` finds paragraphs, headers, tables, lists,
   separators, salutations and sign-offs.
2. **Sections.**  A new semantic section starts at every header, at every table with a
   detached caption, at every asterisk separator (the separator opens the new section), and at
   a salutation that follows content (front matter such as the performance table ends there;
   a letterhead directly above the salutation moves into the body).  A letter's opening
   (a ``letterhead`` block: letterhead, label, date line) is never a header: it rides with
   what follows, so a letter whose opening has no header starts with an untitled section.
   A header directly under another header forms one section titled by the second (the first
   is its parent).  A section's title is its header; a section opened by a separator or
   with no header gets :data:`UNTITLED`, except one that opens with a captioned table, which
   takes the caption.
   Hierarchy: ``["Front Matter", t]`` before the salutation, ``["Letter Body", t]``
   (``["Letter Body", parent header, t]`` for a separator part of a headed section or a
   header under a header), ``["Appendix", t]`` after the first sign-off or from a header
   starting with "Appendix".
3. **Rules B / 6 / 7 (short sections).**  Sections under :data:`T1_MIN` tokens are merged
   forward or backward by :func:`letterchunk.text.merge.merge_short` (see there), never over a
   header: a section that no merge can join without putting a header mid-chunk stands alone as
   a ``standalone_exception`` when it is more than micro-content (:data:`T2_MIN` tokens).
   ``merged_from`` names each absorbed section and ``boundary_note`` says what was merged,
   which way and why (rule 8), on the Tier-1 chunk that holds the absorbed passage.
4. **Splitting (rule C, rules 1/2/3/5/6).**  A section over :data:`T1_MAX` tokens is split at
   unit boundaries into ``-001``, ``-002``…  A unit never splits: a header is glued to the block
   after it; a paragraph ending in a colon or a one-sentence transition (under 60 tokens) is
   glued forward; a table is glued to its lead-in paragraph and to one paragraph of
   interpretation; a sign-off is glued backward.  Split points are chosen by dynamic
   programming for even parts, every part at least :data:`T1_MIN` tokens, so no tail fragment
   exists.  A part still over the maximum is split again by :mod:`letterchunk.text.bounds`.
5. **Tier 3.**  Every table lies in a ``financial_table`` chunk inside its Tier-1 parent, from
   its lead-in (nearest paragraph before it, across directly preceding tables, with the
   header above it) to its interpretation (nearest paragraph after it, across directly
   following tables); adjacent tables share that span and so share one Tier-3 chunk whose
   ``table_data`` lists each.  ``table_data`` is parsed by
   :func:`letterchunk.text.tables.parse_table`; the name is the caption, else the lead-in's last
   sentence when it ends in a colon ("Here's the final scorecard for the bet"), else what the
   lead-in says the table shows ("We show below our 1985 yearend net holdings in marketable
   equities." -> "Our 1985 yearend net holdings in marketable equities"), else
   ``"<section title> – table N"`` (``"Table N"`` in an untitled section).
6. **Tier 2** (``tier2=True``): within a Tier-1 chunk, runs of blocks broken at tables (Tier 3)
   and headers; a header/separator rides with the next block; short paragraphs pair forward
   (greedy, until :data:`T2_MIN` tokens), a short tail pairs backward; a run under the
   minimum gives no Tier-2 chunk, nor does a group equal to the whole Tier-1 chunk.

Tier-1 chunks tile the letter: each spans its first block's first character to its last
block's last character, so only whitespace lies between neighbours.  Token counts: one
tokenizer pass per letter gives exact counts of any span
(:class:`letterchunk.tokens.SpanCounter`) for the decisions and for each chunk's
``token_count`` (equal to ``count_tokens(content)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterchunk.contract.rules import T1_MAX_TOKENS, T1_MIN_TOKENS, T2_MIN_TOKENS
from letterchunk.contract.schema import (
    UNTITLED,
    Chunk,
    Metadata,
    SourceSpan,
    TableData,
    TemporalReferences,
)
from letterchunk.errors import InputError
from letterchunk.text.blocks import Block, detect_blocks
from letterchunk.text.bounds import bounded_parts, kept_whole_note, split_note
from letterchunk.text.clean import CleanedLetter, load_letter
from letterchunk.text.merge import EXCEPTION_REASON, Section, merge_short
from letterchunk.text.tables import parse_table
from letterchunk.tokens import SpanCounter, span_counter

__all__ = [
    "UNTITLED",
    "T1_MIN",
    "T1_MAX",
    "T2_MIN",
    "segment_letter",
    "section_titles",
    "load_letters",
]

# the sizes the validator checks (rules size.t1_min, size.t1_max, size.t2_min), and the
# segmenter's own targets
T1_MIN, T1_MAX, T2_MIN = T1_MIN_TOKENS, T1_MAX_TOKENS, T2_MIN_TOKENS
T1_IDEAL, T2_MAX = 1200, 500

_SENT_END = re.compile(r"[.?!][\"'”’)\]]*\s")


@dataclass
class _Unit:
    blocks: list[Block]
    tokens: int


def load_letters(paths: Iterable[Path]) -> Iterator[tuple[Path, CleanedLetter | InputError]]:
    """``load_letter`` over ``paths`` in order, one letter ahead: while the caller segments a
    letter, the tokenizer pass over the next one (:func:`letterchunk.tokens.span_counter`, in a
    worker thread) is already running.  A letter that cannot be used comes as its
    :class:`InputError`, so the caller can report it and go on."""
    ahead: tuple[Path, CleanedLetter | InputError] | None = None
    for path in paths:
        letter: CleanedLetter | InputError
        try:
            letter = load_letter(path)
        except InputError as exc:
            letter = exc
        else:
            span_counter(letter.text)
        if ahead is not None:
            yield ahead
        ahead = (path, letter)
    if ahead is not None:
        yield ahead


def section_titles(chunks: list[Chunk]) -> list[str]:
    """Distinct Tier-1 section titles, in reading order."""
    seen: list[str] = []
    for c in chunks:
        if c.metadata.chunk_tier == 1 and c.metadata.section_title not in seen:
            seen.append(c.metadata.section_title)
    return seen


# --------------------------------------------------------------------------------------------
# exact token counts of spans from one tokenizer pass: tokens.SpanCounter

_SpanCounter = SpanCounter  # the name tests/test_segment.py imports


# --------------------------------------------------------------------------------------------
# sections


def _sections(text: str, blocks: list[Block]) -> list[Section]:
    sections: list[Section] = []
    has_salutation = any(b.kind == "salutation" for b in blocks)
    part = "Front Matter" if has_salutation else "Letter Body"
    signed = False
    cur: Section | None = None
    last_header: str | None = None

    def open_(title: str, titled: bool, parent: str | None) -> Section:
        s = Section(blocks=[], title=title, part=part, parent_title=parent, titled=titled)
        sections.append(s)
        return s

    for b in blocks:
        if b.kind == "salutation" and part == "Front Matter":
            part = "Letter Body"
            if cur is not None and cur.blocks:
                # a letterhead (short lines directly above the salutation) opens the body
                head: list[Block] = []
                while cur.blocks and _letterhead(cur.blocks[-1], text):
                    head.insert(0, cur.blocks.pop())
                if not cur.blocks:
                    sections.remove(cur)
                cur = open_(UNTITLED, False, None)
                cur.blocks.extend(head)
                last_header = None
        if signed and b.kind not in ("signature",) and part != "Appendix":
            part = "Appendix"
            cur = None
            last_header = None
        if b.kind == "header" and re.match(r"(?i)appendix\b", b.title) and part != "Appendix":
            part = "Appendix"  # a titled appendix opens the appendix part even before a sign-off
            cur = None
        if b.kind == "header" and cur is not None and [x.kind for x in cur.blocks] == ["header"]:
            # a header directly under another: the first is the parent ("Appendix" over
            # "Acquisition Criteria"); one section titled by the second
            cur.parent_title = cur.title if part == "Letter Body" else None
            cur.title = b.title
            last_header = b.title
        elif b.kind == "header" or (
            b.kind == "table" and b.meta.get("detached_caption") and b.title.strip()
        ):
            cur = open_(b.title, True, None)
            last_header = b.title
        elif b.kind == "separator":
            cur = open_(UNTITLED, False, last_header)
        elif cur is None:
            cur = open_(UNTITLED, False, None)
        cur.blocks.append(b)
        if b.kind == "signature":
            signed = True
    # a section opened and then left at once (a salutation after a sign-off) holds nothing
    sections = [s for s in sections if s.blocks]
    for s in sections:
        if not s.titled:
            first = next((b for b in s.blocks if b.kind != "separator"), None)
            if first is not None and first.kind == "table" and first.title:
                s.title, s.titled = first.title, True
    return sections


def _letterhead(b: Block, text: str) -> bool:
    return b.kind == "letterhead" or (
        b.kind in ("paragraph", "header") and len(text[b.start : b.end].split()) <= 8
    )


def _hierarchy(s: Section) -> list[str]:
    if s.part != "Letter Body":
        return [s.part, s.title]
    if s.parent_title and s.parent_title != s.title:
        return ["Letter Body", s.parent_title, s.title]
    return ["Letter Body", s.title]


# --------------------------------------------------------------------------------------------
# units and splitting


def _one_sentence(t: str) -> bool:
    return len(_SENT_END.findall(t.strip() + " ")) <= 1


def _units(s: Section, text: str, tok: dict[int, int]) -> list[_Unit]:
    bl = s.blocks
    n = len(bl)
    glue_next = [False] * n  # block i is glued to block i+1
    for i, b in enumerate(bl[:-1]):
        nxt = bl[i + 1]
        body = text[b.start : b.end]
        if b.kind in ("header", "separator", "salutation", "letterhead") or nxt.kind == "signature":
            glue_next[i] = True
        elif b.kind == "table" and nxt.kind == "paragraph":
            glue_next[i] = True  # interpretation
        elif nxt.kind in ("table", "list") and b.kind == "paragraph":
            glue_next[i] = True  # lead-in
        elif b.kind in ("paragraph", "list") and body.rstrip().endswith(":"):
            glue_next[i] = True
        elif b.kind == "paragraph" and _one_sentence(body) and tok[i] < 60:
            glue_next[i] = True  # rule 6: one-sentence transitions go forward
    units: list[_Unit] = []
    cur: list[int] = []
    for i in range(n):
        cur.append(i)
        if not glue_next[i]:
            units.append(_Unit([bl[k] for k in cur], sum(tok[k] for k in cur)))
            cur = []
    if cur:
        units.append(_Unit([bl[k] for k in cur], sum(tok[k] for k in cur)))
    return units


def _split(units: list[_Unit]) -> list[list[_Unit]]:
    total = sum(u.tokens for u in units)
    if total <= T1_MAX or len(units) == 1:
        return [units]
    k = math.ceil(total / T1_MAX)
    ideal = max(T1_MIN, total / k)
    n = len(units)
    pre = [0]
    for u in units:
        pre.append(pre[-1] + u.tokens)
    inf = float("inf")
    best = [inf] * (n + 1)
    back = [0] * (n + 1)
    best[0] = 0.0
    for j in range(1, n + 1):
        for i in range(j - 1, -1, -1):
            t = pre[j] - pre[i]
            if t > 3 * T1_MAX and j - i > 1:
                break
            if best[i] == inf:
                continue
            cost = (t - ideal) ** 2
            if t < T1_MIN:
                cost += 1e12
            if t > T1_MAX and j - i > 1:
                cost += 1e9 + (t - T1_MAX) * 1e6
            c = best[i] + cost + 1e5  # each extra part costs a little: prefer fewer, larger
            if c < best[j]:
                best[j], back[j] = c, i
    parts = []
    j = n
    while j > 0:
        i = back[j]
        parts.append(units[i:j])
        j = i
    return parts[::-1]


def _parts(
    s: Section, text: str, tok_of: _LazyCounts, counter: _SpanCounter
) -> tuple[list[list[_Unit]], bool]:
    """The section's Tier-1 parts, and whether a paragraph was split at sentence ends."""
    if s.tokens <= T1_MAX:
        return [[_Unit(list(s.blocks), s.tokens)]], False  # fits: one Tier-1 chunk
    toks = {i: tok_of[b] for i, b in enumerate(s.blocks)}
    units = _units(s, text, toks)
    parts = _fix_short_parts(_split(units), counter)
    if not any(_splittable_over(p, counter) for p in parts):
        return parts, False
    bounded, by_sentence = bounded_parts([u.blocks for u in units], text, counter)
    return [[_Unit(p, 0)] for p in bounded], by_sentence


def _splittable_over(part: list[_Unit], counter: _SpanCounter) -> bool:
    """A part over the maximum that is more than one table unit (so it can be split)."""
    blocks = [b for u in part for b in u.blocks]
    over = counter.count(blocks[0].start, blocks[-1].end) > T1_MAX
    return over and not (len(part) == 1 and any(b.kind == "table" for b in blocks))


def _fix_short_parts(parts: list[list[_Unit]], counter: _SpanCounter) -> list[list[_Unit]]:
    """The split works on block sums, which leave out the whitespace between blocks; recount
    each part exactly and join a part under :data:`T1_MIN` to its smaller neighbour."""

    def exact(part: list[_Unit]) -> int:
        return counter.count(part[0].blocks[0].start, part[-1].blocks[-1].end)

    parts = list(parts)
    while len(parts) > 1:
        sizes = [exact(p) for p in parts]
        short = next((i for i, t in enumerate(sizes) if t < T1_MIN), None)
        if short is None:
            break
        if short == 0:
            j = 0
        elif short == len(parts) - 1:
            j = short - 1
        else:
            j = short - 1 if sizes[short - 1] <= sizes[short + 1] else short
        parts[j : j + 2] = [parts[j] + parts[j + 1]]
    return parts


# --------------------------------------------------------------------------------------------
# chunk construction


def _meta(letter: CleanedLetter, **kw: Any) -> Metadata:
    note = kw.pop("boundary_note", None)
    for extra in (letter.date_note, letter.clean_note):  # an unknown date, furniture removed
        if extra:
            note = f"{note} {extra}".strip() if note else extra
    content = kw.pop("content")
    return Metadata(
        letter_year=letter.year,
        letter_date=letter.date,
        source_file=letter.cleaned_name,
        temporal_references=TemporalReferences(primary_year=letter.year),
        char_count=len(content),
        boundary_note=note,
        **kw,
    )


_WHOLE_LETTER_NOTE = "The whole letter is shorter than the Tier-1 minimum; kept as one chunk."


def _exception_fields(s: Section) -> dict[str, Any]:
    """A short section kept on its own (spec §2.4 allowed exceptions): the flag, its reason
    and a high retrieval priority; nothing for any other section."""
    if s.standalone is None:
        return {}
    return {
        "standalone_exception": True,
        "exception_reason": EXCEPTION_REASON,
        "retrieval_priority": "high",
    }


def segment_letter(letter: CleanedLetter, *, tier2: bool = False) -> list[Chunk]:
    """Canonical chunks of ``letter`` (Tier 1 and 3; Tier 2 too when ``tier2``).

    Output order: by ``(start_char, chunk_tier, chunk_id)``.  Semantic fields keep the schema
    defaults; they are for the LLM stage to fill.
    """
    text = letter.text
    counter = span_counter(text)  # starts the tokenizer pass; blocks are found meanwhile
    blocks = detect_blocks(text)
    if not blocks:
        return []
    tok_of = _LazyCounts(counter)  # block counts, only for blocks that need them
    sections = _sections(text, blocks)
    for s in sections:
        s.tokens = counter.count(s.blocks[0].start, s.blocks[-1].end)  # exact, gaps included
    sections = merge_short(sections, text, counter)
    year = letter.year
    out: list[Chunk] = []
    for n_sec, s in enumerate(sections, start=letter.first_section):
        parts, by_sentence = _parts(s, text, tok_of, counter)
        hierarchy = _hierarchy(s)
        t3_seq = t2_seq = t3_done = 0
        for n_part, part in enumerate(parts, start=1):
            pblocks = [b for u in part for b in u.blocks]
            start, end = pblocks[0].start, pblocks[-1].end
            content = text[start:end]
            t1_id = f"{year}-S{n_sec}-T1-{n_part:03d}"
            mine = [x for x in s.notes if start <= x[0] < end or (n_part == 1 and x[0] < start)]
            notes = [x[1] for x in mine]
            if len(parts) > 1:
                notes.append(split_note(n_part, len(parts), by_sentence))
            if counter.count(start, end) > T1_MAX:
                notes.append(kept_whole_note(pblocks, counter.count(start, end)))
            if len(sections) == 1 and len(parts) == 1 and counter.count(start, end) < T1_MIN:
                notes.append(_WHOLE_LETTER_NOTE)
            if s.standalone is not None:
                notes.append(s.standalone)
            tables, children = _table_chunks(
                letter, s, n_sec, t1_id, pblocks, counter, t3_done, t3_seq
            )
            t3_done += len(tables)
            t3_seq += len(children)
            if tier2:
                t2 = _tier2_chunks(
                    letter, s, n_sec, t1_id, pblocks, hierarchy, tok_of, counter, t2_seq
                )
                t2_seq += len(t2)
                children += t2
            out.append(
                Chunk(
                    chunk_id=t1_id,
                    content=content,
                    metadata=_meta(
                        letter,
                        content=content,
                        token_count=counter.count(start, end),
                        section_title=s.title,
                        section_hierarchy=hierarchy,
                        chunk_tier=1,
                        child_chunk_ids=[c.chunk_id for c in children],
                        content_type="narrative",
                        has_table=bool(tables),
                        table_data=tables,
                        has_financial_data=bool(tables),
                        boundary_note=" ".join(notes) or None,
                        merged_from=list(dict.fromkeys(x[2] for x in mine)),
                        source_span=SourceSpan(start_char=start, end_char_exclusive=end),
                        **_exception_fields(s),
                    ),
                )
            )
            out.extend(children)
    out.sort(key=lambda c: (c.metadata.source_span.start_char, c.metadata.chunk_tier, c.chunk_id))
    return out


def _table_chunks(
    letter: CleanedLetter,
    s: Section,
    n_sec: int,
    t1_id: str,
    pblocks: list[Block],
    counter: _SpanCounter,
    t3_done: int,
    t3_seq: int,
) -> tuple[list[TableData], list[Chunk]]:
    """The tables of one Tier-1 chunk (``pblocks``) and its Tier-3 chunks.  ``t3_done`` tables
    and ``t3_seq`` Tier-3 chunks of the section came before (they number the new ones)."""
    text = letter.text
    children: list[Chunk] = []
    tables: list[TableData] = []
    # tables sharing one context span (a run of adjacent tables) share one Tier-3 chunk
    groups: dict[tuple[int, int], list[TableData]] = {}
    for bi, b in enumerate(pblocks):
        if b.kind != "table":
            continue
        span = _table_context(pblocks, bi)
        columns, rows = parse_table(text[b.meta["line_start"] : b.end], b.title, b.meta.get("rows"))
        name = (
            b.title
            or _lead_in_name(pblocks, bi, text)
            or (f"{s.title} – table " if s.titled else "Table ") + str(len(tables) + t3_done + 1)
        )
        td = TableData(table_name=name, summary="", columns=columns, rows=rows, row_count=len(rows))
        tables.append(td)
        groups.setdefault(span, []).append(td)
    for (tstart, tend), tds in groups.items():
        t3_seq += 1
        tcontent = text[tstart:tend]
        children.append(
            Chunk(
                chunk_id=f"{letter.year}-S{n_sec}-T3-{t3_seq:03d}",
                content=tcontent,
                metadata=_meta(
                    letter,
                    content=tcontent,
                    token_count=counter.count(tstart, tend),
                    section_title=s.title,
                    section_hierarchy=["Tables", s.title],
                    chunk_tier=3,
                    parent_chunk_id=t1_id,
                    content_type="financial_table",
                    has_table=True,
                    table_data=tds,
                    has_financial_data=True,
                    retrieval_priority="high",
                    abstraction_level="low",
                    source_span=SourceSpan(start_char=tstart, end_char_exclusive=tend),
                ),
            )
        )
    return tables, children


def _tier2_chunks(
    letter: CleanedLetter,
    s: Section,
    n_sec: int,
    t1_id: str,
    pblocks: list[Block],
    hierarchy: list[str],
    tok_of: _LazyCounts,
    counter: _SpanCounter,
    t2_seq: int,
) -> list[Chunk]:
    """The Tier-2 chunks of one Tier-1 chunk (``pblocks``), numbered after the section's
    ``t2_seq`` earlier ones; none that would repeat the Tier-1 chunk."""
    text = letter.text
    start, end = pblocks[0].start, pblocks[-1].end
    children: list[Chunk] = []
    for gstart, gend, gnote in _tier2_groups(pblocks, tok_of, counter):
        if gstart == start and gend == end:
            continue
        t2_seq += 1
        c2 = text[gstart:gend]
        children.append(
            Chunk(
                chunk_id=f"{letter.year}-S{n_sec}-T2-{t2_seq:03d}",
                content=c2,
                metadata=_meta(
                    letter,
                    content=c2,
                    token_count=counter.count(gstart, gend),
                    section_title=s.title,
                    section_hierarchy=hierarchy,
                    chunk_tier=2,
                    parent_chunk_id=t1_id,
                    content_type="narrative",
                    boundary_note=gnote,
                    source_span=SourceSpan(start_char=gstart, end_char_exclusive=gend),
                ),
            )
        )
    return children


# a lead-in sentence that says what the table below shows: "We show below X", "Below we list
# X", "The table that follows shows X", "the following table, which illustrates X", "Here's X"
_SHOW_VERB = (
    r"(?:show|list|present|give|summarize|set forth|display|detail|update|trace|tabulate"
    r"|illustrate|compare)"
)
_DESCRIBES = re.compile(
    rf"(?:\b(?:we|I) {_SHOW_VERB}(?: below| here)?,?"
    rf"|\b(?:below|here),? (?:we|I) {_SHOW_VERB}"
    rf"|\btables?(?: that follows| below| following)?,?(?: which)? {_SHOW_VERB}s?"
    r"|^(?:below|here) (?:is|are)|^here[’']s)"
    r" (?P<what>.+)",
    re.IGNORECASE,
)
# where the thing shown ends: a clause or a parenthesis starts
_WHAT_END = re.compile(
    r"[.;:,(]|\s[–—-]\s|\s(?:since|which|that|though|because|for which|where|as|so|and then)\s"
)
# words before the thing itself: where it is shown, or "the usual table detailing"
_NOT_WHAT = re.compile(
    r"^(?:(?:on (?:the )?(?:next|following) page|in (?:the|this) table(?: below)?|below|here"
    r"|you)"
    r",? |(?:the |a |our )?(?:usual |following )?table (?:detailing |of |showing )?)+",
    re.IGNORECASE,
)
_TRAILING_MINOR = frozenset("a an and at by for from in of on or the to with".split())


def _lead_in_name(pblocks: list[Block], bi: int, text: str) -> str:
    """A name for an uncaptioned table from its lead-in (the paragraphs right before it):

    * the last sentence before it when that ends in a colon ("Here's a recap of pre-tax
      underwriting earnings and float by division:"), whitespace collapsed, if not too long;
    * else what one of the last six sentences of the (at most two) paragraphs before it says
      the table shows, the nearest first: "We show below our 1985 yearend net holdings in
      marketable equities." -> "Our 1985 yearend net holdings in marketable equities" (cut
      where a clause starts, at most 12 words);
    * else "".
    """
    sentences: list[str] = []
    k = bi - 1
    while k >= 0 and bi - k <= 2 and pblocks[k].kind == "paragraph":
        lead = " ".join(text[pblocks[k].start : pblocks[k].end].split())
        sentences[:0] = re.split(r"(?<=[.?!])\s+(?=[A-Z“\"(])", lead)
        if k == bi - 1 and lead.endswith(":"):
            sentence = sentences[-1].rstrip(":").strip()
            if 3 <= len(sentence) <= 160:
                return sentence
        k -= 1
    for sentence in reversed(sentences[-6:]):
        m = _DESCRIBES.search(sentence)
        if m is None:
            continue
        what = _NOT_WHAT.sub("", m.group("what"))
        cut = _WHAT_END.search(what)
        words = (what[: cut.start()] if cut else what).split()[:12]
        while words and words[-1].lower() in _TRAILING_MINOR:
            words.pop()
        bare = words[1:] if words and words[0].lower() in ("the", "a", "an", "our") else words
        if len(bare) >= 2 and words[0].lower() not in ("is", "are", "was", "were"):
            name = " ".join(words)
            return name[0].upper() + name[1:]
    return ""


def _table_context(pblocks: list[Block], bi: int) -> tuple[int, int]:
    """Span of table ``pblocks[bi]`` with its lead-in and interpretation (rules 3 and 5).

    Lead-in: the nearest paragraph/list before the table, reached across tables that directly
    precede it (a run of tables shares one lead-in), plus a header directly above that lead-in.
    Interpretation: the nearest paragraph after the table, reached across directly following
    tables.  Never across a header, a separator or the Tier-1 chunk's edges.
    """
    start, end = pblocks[bi].start, pblocks[bi].end
    k = bi - 1
    while k >= 0 and pblocks[k].kind == "table":
        k -= 1
    if k >= 0 and pblocks[k].kind in ("paragraph", "list"):
        start = pblocks[k].start
        if k > 0 and pblocks[k - 1].kind == "header":
            start = pblocks[k - 1].start
    elif k >= 0 and pblocks[k].kind == "header":
        start = pblocks[k].start
    k = bi + 1
    while k < len(pblocks) and pblocks[k].kind == "table":
        k += 1
    if k < len(pblocks) and pblocks[k].kind == "paragraph":
        end = pblocks[k].end
    return start, end


class _LazyCounts:
    """``counts[block]``: the block's exact token count, computed on first use."""

    def __init__(self, counter: _SpanCounter) -> None:
        self.counter = counter
        self.cache: dict[int, int] = {}

    def __getitem__(self, b: Block) -> int:
        n = self.cache.get(b.start)
        if n is None:
            n = self.cache[b.start] = self.counter.count(b.start, b.end)
        return n


def _tier2_groups(
    pblocks: list[Block], tok_of: _LazyCounts, counter: _SpanCounter
) -> list[tuple[int, int, str | None]]:
    """Pairing rule (§2.2) over the non-table blocks of one Tier-1 chunk."""
    runs: list[list[Block]] = [[]]
    for b in pblocks:  # tables (Tier 3) and headers (a new section) break the runs
        if b.kind == "table":
            runs.append([])
        elif b.kind == "header" and runs[-1] and runs[-1][-1].kind != "header":
            runs.append([b])
        else:
            runs[-1].append(b)
    groups: list[tuple[int, int, str | None]] = []
    for run in runs:
        # a header/separator never stands alone: it rides with the next block
        items: list[list[Block]] = []
        carry: list[Block] = []
        for b in run:
            carry.append(b)
            if b.kind not in ("header", "separator", "salutation", "letterhead"):
                items.append(carry)
                carry = []
        if carry:
            if items:
                items[-1].extend(carry)
            else:
                items.append(carry)
        cur: list[Block] = []
        cur_tok = 0
        merged: list[tuple[list[Block], int, bool]] = []
        for it in items:
            cur.extend(it)
            cur_tok += sum(tok_of[b] for b in it)
            if cur_tok >= T2_MIN:
                cur_tok = counter.count(cur[0].start, cur[-1].end)  # exact, gaps included
            if cur_tok >= T2_MIN:
                merged.append((cur, cur_tok, len(cur) > len(it)))
                cur, cur_tok = [], 0
        if cur:
            if merged:  # concluding short paragraph(s): pair backward
                last, lt, _ = merged[-1]
                merged[-1] = (last + cur, lt + cur_tok, True)
            else:
                continue  # the whole run is under the minimum: no Tier-2 chunk
        for grp, _, paired in merged:
            note = "Short paragraph paired with its neighbour (pairing rule)." if paired else None
            groups.append((grp[0].start, grp[-1].end, note))
    return groups
