"""The chat messages for one chunk: the rendered prompt files plus the chunk's cue lines."""

from __future__ import annotations

from typing import get_args

from letterchunk.contract.schema import (
    UNTITLED,
    Chunk,
    PrincipleCategory,
)
from letterchunk.enrich.answers import _is_table
from letterchunk.enrich.candidates import confession_sentences, cued_concepts
from letterchunk.enrich.context import PromptContext
from letterchunk.llm import prompts

# --------------------------------------------------------------------------------------------
# Messages


def _kind(chunk: Chunk) -> str:
    tier = chunk.metadata.chunk_tier
    if tier == 3:
        n = len(chunk.metadata.table_data)
        return f"table chunk with {n} table(s) (answer tables; no content_type, no principles)"
    what = "section" if tier == 1 else "paragraph"
    ask = "; also give section_title" if chunk.metadata.section_title == UNTITLED else ""
    return f"narrative {what} chunk{ask}"


def build_messages(chunk: Chunk, ctx: PromptContext) -> list[dict]:
    """The chat messages for one chunk: fixed instructions first, the chunk text last."""
    system = prompts.render(
        "enrich_system",
        concepts="\n".join(f"  {c}" for c in ctx.vocabulary),
        categories=", ".join(get_args(PrincipleCategory)),
    )
    titles = "\n".join(f"- {t}" for t in ctx.section_titles) or "- (none)"
    user = prompts.render(
        "enrich_user",
        year=ctx.year,
        section_titles=titles,
        kind=_kind(chunk),
        # never show the placeholder: the model copied it back as the title
        section_title=(
            "(untitled: answer section_title with a new title)"
            if chunk.metadata.section_title == UNTITLED
            else chunk.metadata.section_title
        ),
        hints=_hints(chunk, ctx),
        content=chunk.content,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


MAX_HINT_SENTENCES = 3


def _hints(chunk: Chunk, ctx: PromptContext) -> str:
    """The chunk-specific cue lines of the user prompt (concepts; confession sentences)."""
    concepts = cued_concepts(chunk.content, ctx)
    if ctx.grounded_choices:
        lines = [
            "Concepts cued in this chunk (buffett_concepts: choose 0-3 only from these): "
            + ", ".join(concepts)
            if concepts
            else "Concepts cued in this chunk: none (buffett_concepts: [])"
        ]
    else:
        lines = [
            "Suggested concepts (cued in this chunk, most first): " + ", ".join(concepts)
            if concepts
            else "Suggested concepts: none cued in this chunk"
        ]
    if not _is_table(chunk):
        confessions = confession_sentences(chunk.content)
        if confessions:
            lines.append(
                "Possible confession sentences (if one admits a mistake of Buffett's or "
                "Berkshire's, answer mistake_confession and quote it):"
            )
            lines += [f"- {s}" for s in confessions[:MAX_HINT_SENTENCES]]
        else:
            lines.append("Possible confession sentences: none (not a mistake_confession)")
    return "\n".join(lines)
