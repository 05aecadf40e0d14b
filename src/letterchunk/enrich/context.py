"""What the prompt needs about a whole letter: :class:`PromptContext`, built once per letter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from letterchunk.contract.schema import UNTITLED
from letterchunk.contract.vocabulary import load_concepts, load_cues, load_meanings

# --------------------------------------------------------------------------------------------
# Prompt context


@dataclass(frozen=True)
class PromptContext:
    """What the prompt needs about the whole letter; build one per letter."""

    year: int
    section_titles: tuple[str, ...]
    vocabulary: tuple[str, ...]
    # entity names and evidence quotes as enums of the chunk's own names/sentences: right for a
    # grammar-constrained server (JSON_SCHEMA mode); off for hosted tool calls, where the enum
    # would repeat the chunk in the request and double its prompt tokens
    grounded_choices: bool = True
    # concept -> its textual cues, for the concepts of ``vocabulary`` (see module docstring)
    cues: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # concept -> its one-line meaning, for the concepts of ``vocabulary`` that have one: the
    # system prompt defines each concept by it and the concept candidates count its words
    meanings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_letter(
        cls,
        year: int,
        section_titles: list[str],
        vocabulary: frozenset[str] | None = None,
        *,
        grounded_choices: bool = True,
        cues: Mapping[str, Sequence[str]] | None = None,
        meanings: Mapping[str, str] | None = None,
    ) -> PromptContext:
        vocab = load_vocabulary() if vocabulary is None else vocabulary
        titles = tuple(dict.fromkeys(t for t in section_titles if t and t != UNTITLED))
        if cues is None:
            cues = load_cues()
        if meanings is None:
            meanings = load_meanings()
        # sorted: a frozenset's iteration order changes with PYTHONHASHSEED, and the prompt
        # bytes must not (cache keys, cassettes)
        ordered = tuple(sorted(vocab))
        return cls(
            year=year,
            section_titles=titles,
            vocabulary=ordered,
            grounded_choices=grounded_choices,
            cues=tuple((c, tuple(cues.get(c, ()))) for c in ordered),
            meanings=tuple((c, meanings[c]) for c in ordered if c in meanings),
        )


def load_vocabulary() -> frozenset[str]:
    """The controlled ``buffett_concepts`` vocabulary (``vocabulary.load_concepts``)."""
    return load_concepts()
