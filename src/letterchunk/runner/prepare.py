"""Getting letters ready to be asked about: each letter of the given paths (a compilation gives
several) with its chunks, the per-letter context every chunk's request is built from, and the
check that each request fits the model's context window.  ``run`` and ``batch submit`` both
start here, so a batch asks exactly what a live run would."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.validate import LetterContext
from letterchunk.contract.vocabulary import concepts_for, cues_for
from letterchunk.enrich import PromptContext, build_messages
from letterchunk.errors import InputError
from letterchunk.layout import LetterKey, find_letters, same_key_message, stem_year
from letterchunk.llm.client import CompletionClient, estimate_tokens, grammar_backed
from letterchunk.text.clean import CleanedLetter
from letterchunk.text.compilation import Profile, load_document, segment_letters
from letterchunk.text.segment import section_titles

__all__ = [
    "LetterJob",
    "check_one_letter_per_key",
    "check_prompt_sizes",
    "letter_job",
    "prepare_letters",
]


@dataclass(frozen=True)
class LetterJob:
    """Everything the per-chunk work needs about its letter (shared, read-only)."""

    year: LetterKey
    cleaned_text: str
    prompt: PromptContext
    context: LetterContext  # without evidence (each chunk adds its own)


def letter_job(
    year: LetterKey, cleaned_text: str, chunks: Sequence[Chunk], *, grounded_choices: bool = True
) -> LetterJob:
    """``year``: the letter's key (a compilation's YYYY-Lk has its profile's concepts)."""
    titles = [t for t in section_titles(list(chunks)) if t != UNTITLED]
    vocab = concepts_for(year)
    prompt = PromptContext.for_letter(
        stem_year(year), titles, vocab, grounded_choices=grounded_choices, cues=cues_for(year)
    )
    context = LetterContext(
        cleaned_text=cleaned_text, section_titles=list(titles), vocabulary=vocab
    )
    return LetterJob(year=year, cleaned_text=cleaned_text, prompt=prompt, context=context)


def prepare_letters(
    paths: Sequence[str | Path],
    client: CompletionClient,
    *,
    profile: Profile = "auto",
    tier2: bool = False,
    context_tokens: int | None = None,
) -> list[tuple[Path, CleanedLetter, list[Chunk]]]:
    """Every letter in ``paths`` (a compilation gives several) with its chunks, as ``run`` and
    ``batch submit`` ask about them; a chunk whose prompt cannot fit the context window stops
    this before the first request."""
    loaded = [(p, letter) for p in find_letters(paths) for letter in load_document(p, profile)]
    check_one_letter_per_key(loaded)
    segmented = segment_letters([letter for _, letter in loaded], tier2=tier2)
    if context_tokens:
        for (path, letter), chunks in zip(loaded, segmented, strict=True):
            check_prompt_sizes(path, letter.key, letter.text, chunks, client, context_tokens)
    return [(p, letter, chunks) for (p, letter), chunks in zip(loaded, segmented, strict=True)]


def check_one_letter_per_key(loaded: Sequence[tuple[Path, CleanedLetter]]) -> None:
    """Raise InputError when two letters would be written to one output file (two letters of
    one year, e.g. ``1977.txt`` and ``1977 (copy).txt``): the second would replace the first's
    paid answers, so nothing is asked until the user keeps one."""
    first: dict[LetterKey, Path] = {}
    for path, letter in loaded:
        if letter.key in first:
            raise InputError(path, same_key_message(letter.key, first[letter.key]))
        first[letter.key] = path


def check_prompt_sizes(
    path: str | Path,
    year: LetterKey,
    text: str,
    chunks: Sequence[Chunk],
    client: CompletionClient,
    context_tokens: int,
) -> None:
    """Raise InputError naming the letter when a chunk's request (prompt + answer allowance,
    counted as :func:`~letterchunk.llm.client.estimate_tokens` does) exceeds ``context_tokens``."""
    job = letter_job(year, text, chunks, grounded_choices=grammar_backed(client))
    max_tokens = int(getattr(getattr(client, "settings", None), "max_tokens", 0) or 0)
    for chunk in chunks:
        need = estimate_tokens(
            {"messages": build_messages(chunk, job.prompt), "max_tokens": max_tokens}
        )
        if need > context_tokens:
            raise InputError(
                path,
                (
                    f"chunk {chunk.chunk_id} ({chunk.metadata.token_count:,} tokens) needs a "
                    f"{need:,}-token request, more than the model's "
                    f"{context_tokens:,}-token context, "
                    "so the letter cannot be enriched as is and nothing was sent; split the letter "
                    "into paragraphs and sections (blank lines, headers), or pass --context-tokens "
                    "if the model has a larger context"
                ),
            )
