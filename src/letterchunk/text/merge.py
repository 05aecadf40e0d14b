"""Semantic sections of a letter and the merges of short ones (spec §2.4 rules A/B, §3.1 rules
6, 7 and 8), for :mod:`letterchunk.text.segment`.

Sections under :data:`T1_MIN_TOKENS` tokens are merged, first one first, until none is left:
*forward* when the section opens the letter or its part, ends with a colon (lead-in), has a
header (a stub sets up what follows), or is a bridge (prose of at most two sentences, or under
100 tokens right before a header); *backward* when it closes the letter or its part, is a bridge
before a header (the header starts the next chunk) or an untitled passage (an afterthought).
The title joins titled parts ("A / B"); ``merged_from`` names each absorbed section (its title or
its opening words) and ``boundary_note`` says what was merged, which way and why (rule 8), on
the Tier-1 chunk that holds the absorbed passage.

**A merge never buries a header.**  Merging forward puts the next section's opening header (or
captioned table) mid-chunk; merging backward puts the short section's own header mid-chunk.
When the way chosen above would do that, the short section merges the other way, if that way
stays inside its part of the letter and buries no header; failing that, a section of at least
:data:`T2_MIN_TOKENS` tokens (more than micro-content: not "header + one line") stands alone
as a standalone exception (§2.4 "Allowed exceptions": a self-contained section with its own
header), with a boundary note and an exception reason.  Only micro-content under
:data:`T2_MIN_TOKENS` tokens, which may never stand alone, still merges over a header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from letterchunk.contract.rules import T1_MIN_TOKENS, T2_MIN_TOKENS
from letterchunk.contract.schema import UNTITLED
from letterchunk.text.blocks import Block
from letterchunk.tokens import SpanCounter

__all__ = ["Section", "merge_short", "EXCEPTION_REASON"]

_SENT_END = re.compile(r"[.?!][\"'”’)\]]*\s")

EXCEPTION_REASON = (
    "A self-contained short section: no merge with a neighbour in its part of the letter keeps "
    "every section header at the start of a chunk."
)


@dataclass
class Section:
    blocks: list[Block]
    title: str
    part: str  # "Front Matter" | "Letter Body" | "Appendix"
    parent_title: str | None = None
    titled: bool = False
    # (offset of the merged passage, note, merged_from descriptor): each goes to the part
    # (Tier-1 chunk) that holds the passage
    notes: list[tuple[int, str, str]] = field(default_factory=list)
    tokens: int = 0
    # the boundary note of a short section kept on its own (a standalone exception), else None
    standalone: str | None = None

    def descriptor(self, text: str) -> str:
        """How ``merged_from`` names this section: its title, or its opening words."""
        if self.titled:
            return f"section '{self.title}'"
        first = next((b for b in self.blocks if b.kind not in ("separator",)), self.blocks[0])
        words = text[first.start : first.end].split()
        opening = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
        return f"untitled passage '{opening}'"


def _is_setup(s: Section, text: str) -> bool:
    last = next((b for b in reversed(s.blocks) if b.kind != "separator"), None)
    return last is not None and text[last.start : last.end].rstrip().endswith(":")


def _is_transition(s: Section, text: str, header_follows: bool) -> bool:
    """A bridge: under 100 tokens of prose directly before a header ("Now, let's examine the
    four major sectors... We will look first at insurance."), or of at most two sentences."""
    body = [b for b in s.blocks if b.kind not in ("separator", "header")]
    if not body or s.tokens >= 100 or any(b.kind != "paragraph" for b in body):
        return False
    if header_follows:
        return True
    return len(_SENT_END.findall(" ".join(text[b.start : b.end] for b in body) + " ")) <= 2


def _opens_with_title(s: Section) -> bool:
    """The section starts with its header or captioned table (a chunk must start there)."""
    return s.titled and s.blocks[0].kind in ("header", "table")


def _direction(secs: list[Section], idx: int, text: str) -> tuple[bool, str]:
    """Which way short section ``secs[idx]`` merges by rule B (True: forward), and why."""
    s = secs[idx]
    has_prev, has_next = idx > 0, idx + 1 < len(secs)
    same_prev = has_prev and secs[idx - 1].part == s.part
    same_next = has_next and secs[idx + 1].part == s.part
    if not has_prev:
        return True, "it opens the letter"
    if not has_next:
        return False, "it closes the letter"
    if _is_setup(s, text):
        return True, "it is a lead-in ending in a colon"
    if same_next and not same_prev:
        return True, "it opens its part of the letter"
    if same_prev and not same_next:
        return False, "it closes its part of the letter"
    if s.titled:
        return True, "a header with a short body sets up what follows"
    if _is_transition(s, text, secs[idx + 1].titled):
        if same_prev and _opens_with_title(secs[idx + 1]):
            return False, "a bridge merged forward would bury the next header"
        return True, "a short bridge sets up what follows (rule 6)"
    return False, "an untitled short passage reads as an afterthought"


def _buries_header(secs: list[Section], idx: int, forward: bool) -> bool:
    """Whether merging ``secs[idx]`` that way puts a section's opening header mid-chunk:
    forward, the next section's; backward, its own."""
    return _opens_with_title(secs[idx + 1] if forward else secs[idx])


def _header_safe(secs: list[Section], idx: int, forward: bool, why: str) -> tuple[bool, str] | None:
    """The merge of ``secs[idx]`` that buries no header: rule B's way, else the other way
    within its part; None when neither exists (the section may stand alone)."""
    if not _buries_header(secs, idx, forward):
        return forward, why
    other = idx + 1 if not forward else idx - 1
    inside = 0 <= other < len(secs) and secs[other].part == secs[idx].part
    if inside and not _buries_header(secs, idx, not forward):
        way = "forward" if forward else "backward"
        return not forward, f"merging {way} would put a header mid-chunk"
    return None


def merge_short(sections: list[Section], text: str, counter: SpanCounter) -> list[Section]:
    """``sections`` with every one under the Tier-1 minimum merged or kept as an exception."""
    secs = list(sections)
    while len(secs) > 1:
        idx = next(
            (i for i, s in enumerate(secs) if s.tokens < T1_MIN_TOKENS and s.standalone is None),
            None,
        )
        if idx is None:
            break
        s = secs[idx]
        forward, why = _direction(secs, idx, text)
        safe = _header_safe(secs, idx, forward, why)
        if safe is None and s.tokens >= T2_MIN_TOKENS:
            s.standalone = (
                f"Short {s.descriptor(text)} ({s.tokens} tokens) kept as its own chunk: no "
                "merge within its part of the letter keeps every section header at a chunk start."
            )
            continue
        if safe is not None:
            forward, why = safe
        if forward:
            a, b = s, secs[idx + 1]
            j = idx
        else:
            a, b = secs[idx - 1], s
            j = idx - 1
        merged = _combine(a, b, s, forward, why, text)
        merged.tokens = counter.count(merged.blocks[0].start, merged.blocks[-1].end)
        secs[j : j + 2] = [merged]
    return secs


def _combine(a: Section, b: Section, short: Section, forward: bool, why: str, text: str) -> Section:
    titled_parts = [t for t, x in ((a.title, a), (b.title, b)) if x.titled]
    title = " / ".join(dict.fromkeys(titled_parts)) if titled_parts else UNTITLED
    s = Section(
        blocks=a.blocks + b.blocks,
        title=title,
        part=a.part,
        parent_title=a.parent_title if a.part == b.part else None,
        titled=bool(titled_parts),
        notes=a.notes + b.notes,
        tokens=a.tokens + b.tokens,  # the caller recounts the joined span exactly
    )
    direction = "forward" if forward else "backward"
    s.notes.append(
        (
            short.blocks[0].start,
            f"Short {short.descriptor(text)} ({short.tokens} tokens) merged {direction}: {why}.",
            short.descriptor(text),
        )
    )
    return s
