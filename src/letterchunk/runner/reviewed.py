"""The analysts' decisions in a run: read before the first request, applied when a letter's
files are written (:func:`letterchunk.runner.pipeline.write_letter`), and recorded in the repair
report as ``review`` records whose changes are ``by: "review"``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.validate import LetterContext
from letterchunk.contract.vocabulary import concepts_for
from letterchunk.layout import LetterKey
from letterchunk.report.records import review_records
from letterchunk.review.records import ReviewRecord, effective_reviews, read_reviews
from letterchunk.text.segment import section_titles

__all__ = ["letter_context", "review_records", "reviews_in_force"]


def letter_context(year: LetterKey, text: str, chunks: Sequence[Chunk]) -> LetterContext:
    """The context a letter's chunks are validated in when the decisions are applied."""
    titles = [t for t in section_titles(list(chunks)) if t != UNTITLED]
    return LetterContext(cleaned_text=text, section_titles=titles, vocabulary=concepts_for(year))


def reviews_in_force(out_dir: str | Path) -> list[ReviewRecord]:
    """The analysts' decisions in force in ``out_dir/reviews.jsonl`` ([] without one), read
    before any request: a corrupt line stops the run before a token is spent, nothing lost."""
    return list(effective_reviews(read_reviews(Path(out_dir))).values())
