"""Properties of the concept candidates (``letterchunk.enrich.concept_candidates``)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from letterchunk.contract.vocabulary import load_concepts, load_cues, load_meanings
from letterchunk.enrich.concept_candidates import (
    MAX_CONCEPT_CANDIDATES,
    concept_candidates,
    concept_scores,
)
from letterchunk.enrich.context import PromptContext

CTX = PromptContext.for_letter(2000, [])
VOCAB = sorted(load_concepts())
FILLER = (
    "the company reported its results for the year and the figures appear in the tables below "
    "as in earlier reports to the readers of this letter"
).split()

texts = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz ABCDEFG.,'-\n"), max_size=400
) | st.lists(st.sampled_from(FILLER + [w for c in VOCAB for w in c.split()]), max_size=120).map(
    " ".join
)


def test_every_concept_has_a_meaning_and_cues() -> None:
    assert set(load_meanings()) == set(VOCAB)
    assert all(load_cues().get(c) for c in VOCAB)
    assert dict(CTX.meanings) == load_meanings()


@settings(max_examples=60, deadline=None)
@given(text=texts, k=st.integers(min_value=0, max_value=15))
def test_candidates_are_vocabulary_at_most_k_distinct_and_deterministic(text: str, k: int) -> None:
    got = concept_candidates(text, CTX, k)
    assert len(got) <= k
    assert set(got) <= set(CTX.vocabulary)
    assert len(set(got)) == len(got)
    assert got == concept_candidates(text, CTX, k)
    scores = concept_scores(text, CTX)
    assert [scores[c] for c in got] == sorted((scores[c] for c in got), reverse=True)
    assert all(scores[c] > 0 for c in got)
    # the top k are a prefix of the top k + 1
    assert concept_candidates(text, CTX, k + 1)[:k] == got


@settings(max_examples=60, deadline=None)
@given(
    concept=st.sampled_from(VOCAB),
    before=st.lists(st.sampled_from(FILLER), max_size=80),
    after=st.lists(st.sampled_from(FILLER), max_size=80),
)
def test_a_chunk_that_names_a_concept_gets_it(
    concept: str, before: list[str], after: list[str]
) -> None:
    text = " ".join([*before, concept, *after])
    assert concept in concept_candidates(text, CTX, MAX_CONCEPT_CANDIDATES)


def _words_of(concept: str) -> list[str]:
    """Cue phrases and meaning words of ``concept`` (not its own name)."""
    meaning = re.findall(r"[a-z][a-z-]+", dict(CTX.meanings)[concept].lower())
    return [*dict(CTX.cues)[concept], *(w for w in meaning if len(w) >= 6)]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), concept=st.sampled_from(VOCAB))
def test_text_of_a_concepts_cues_and_meaning_ranks_it_near_the_top(
    data: st.DataObject, concept: str
) -> None:
    words = _words_of(concept)
    picked = data.draw(st.lists(st.sampled_from(words), min_size=6, max_size=12))
    # every cue of the concept at least once, so the chunk carries all of its evidence
    filler = data.draw(st.lists(st.sampled_from(FILLER), max_size=40))
    text = " ".join([*dict(CTX.cues)[concept], *picked, *filler])
    assert concept in concept_candidates(text, CTX, 3)


def test_empty_text_has_no_candidates() -> None:
    assert concept_candidates("", CTX) == []
    assert concept_candidates("the and of", CTX, 5) == []
