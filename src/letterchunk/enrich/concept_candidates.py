"""Candidate concepts of a chunk for a per-concept judgement: the concepts of the vocabulary
ranked by general textual evidence, the top ``k`` kept.

The model is asked about each candidate separately, so the list must hold nearly every concept a
reader would tag (recall) while staying short (each candidate costs a question).  A concept's
score adds three kinds of evidence, all computed from the chunk's text alone:

* its cues (``schemas/buffett_concepts.json``; the concept's own name is a cue too): each cue's
  hits count sublinearly (``log(1 + hits)``), weighted by the cue's length in words (a phrase is
  more specific than a word) and divided by the number of concepts sharing the cue (a word such
  as "manager" says less about any one of them);
* the same hits per thousand words of the chunk (a short chunk that names a concept twice is
  more about it than a long one with two passing mentions);
* the share of its meaning's content words (``"meanings"`` in the same file) that the chunk
  uses.

Ties keep vocabulary order, so the result is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from letterchunk.enrich.context import PromptContext

__all__ = ["MAX_CONCEPT_CANDIDATES", "concept_candidates", "concept_scores"]

# Chosen on the development labels by bench/concept_candidates.py (recall against mean
# candidates per chunk); see docs/benchmarks.md.
MAX_CONCEPT_CANDIDATES = 8

NAME_WEIGHT = 3.0  # the concept's own name, a cue of its own
DENSITY_WEIGHT = 0.02  # weight of the per-thousand-words hits (chosen on dev)
MEANING_WEIGHT = 2.0  # weight of the meaning-word coverage (a share, 0..1)
_STEM = 6  # a meaning word matches any text word sharing its first _STEM letters
_MIN_MEANING_WORD = 4

_STOP = frozenset(
    """
about above after again against also although among another because been before being below
between both but could does doing down during each either else even every from further have
having here into itself just less like made make many more most much must never none only
other others ought over same should since some such than that their them then there these
they this those through under until upon very were what when where whether which while with
within without would your yours itself rather
""".split()
)
_WORD = re.compile(r"[a-z][a-z'\u2019-]*")


def _cue_pattern(cue: str) -> re.Pattern[str]:
    """A cue matches case-insensitively at a word start; its inner spaces match any whitespace."""
    body = r"\s+".join(re.escape(part) for part in cue.split())
    return re.compile(r"(?<!\w)" + body, re.IGNORECASE)


@lru_cache(maxsize=4096)
def _compiled(cue: str) -> re.Pattern[str]:
    return _cue_pattern(cue)


# the non-ASCII characters ``re.IGNORECASE`` matches to an ASCII letter (found by trying every
# code point; tests/test_edges_scaling.py checks the table), mapped to that letter
_ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u212a": "k", "\u017f": "s"})


def _folded(text: str) -> str:
    """``text`` in which an ASCII cue word can be looked for with ``in``: every character
    ``re.IGNORECASE`` matches to an ASCII letter is that letter in lower case."""
    return text.translate(_ASCII_FOLDS).lower()


@lru_cache(maxsize=4096)
def _first_word(cue: str) -> str | None:
    """The cue's first word in lower case, which every match of the cue begins with; None for
    a cue that is not ASCII (or is blank), which is always searched for in full."""
    parts = cue.split()
    return parts[0].lower() if parts and cue.isascii() else None


def _cue_count(cue: str, text: str, folded: str) -> int:
    """Non-overlapping matches of ``cue`` in ``text``, as ``findall`` counts them.

    A cue's regex starts with a look-behind, so the regex engine tries it at every character;
    over several hundred cues and every chunk that was most of the time spent before a run's
    first request.  Every match begins where the folded text holds the cue's first word, so
    only those places are tried (``str.find`` runs at C speed), left to right, each search
    going on from the end of the last match as ``findall`` does.  ``folded`` must have one
    character per character of ``text``; otherwise the regex scans the text itself."""
    first = _first_word(cue)
    pattern = _compiled(cue)
    if first is None or len(folded) != len(text):
        return len(pattern.findall(text))
    count = pos = 0
    while (at := folded.find(first, pos)) >= 0:
        match = pattern.match(text, at)  # the look-behind still sees the text before ``at``
        if match is None:
            pos = at + 1
        else:
            count += 1
            pos = max(match.end(), at + 1)
    return count


def _meaning_stems(meaning: str) -> frozenset[str]:
    words = (w.strip("'\u2019-") for w in _WORD.findall(meaning.lower()))
    return frozenset(w[:_STEM] for w in words if len(w) >= _MIN_MEANING_WORD and w not in _STOP)


def _text_stems(text: str) -> frozenset[str]:
    return frozenset(w.strip("'\u2019-")[:_STEM] for w in _WORD.findall(text.lower()))


def _cue_sharing(cues: Iterable[tuple[str, tuple[str, ...]]]) -> Counter[str]:
    """How many concepts list each cue (case-folded)."""
    return Counter(cue.lower() for _, own in cues for cue in dict.fromkeys(own))


def concept_scores(text: str, ctx: PromptContext) -> dict[str, float]:
    """Each concept of ``ctx.vocabulary`` -> its evidence score in ``text`` (0 without any)."""
    cues = dict(ctx.cues)
    meanings = dict(ctx.meanings)
    sharing = _cue_sharing((c, (c, *cues.get(c, ()))) for c in ctx.vocabulary)
    words = max(1, len(text.split()))
    stems = _text_stems(text)
    folded = _folded(text)
    scores: dict[str, float] = {}
    for concept in ctx.vocabulary:
        evidence = 0.0
        hits = 0.0
        own = tuple(dict.fromkeys((concept, *cues.get(concept, ()))))
        for cue in own:
            count = _cue_count(cue, text, folded)
            if not count:
                continue
            weight = (NAME_WEIGHT if cue == concept else len(cue.split())) / sharing[cue.lower()]
            evidence += weight * math.log1p(count)
            hits += weight * count
        evidence += DENSITY_WEIGHT * 1000.0 * hits / words
        meaning = _meaning_stems(f"{concept} {meanings.get(concept, '')}")
        if meaning:
            evidence += MEANING_WEIGHT * len(meaning & stems) / len(meaning)
        scores[concept] = evidence
    return scores


def concept_candidates(text: str, ctx: PromptContext, k: int = MAX_CONCEPT_CANDIDATES) -> list[str]:
    """At most ``k`` concepts of ``ctx.vocabulary`` with evidence in ``text``, best first.

    A concept with no evidence at all (score 0) is never a candidate; ties keep vocabulary
    order.
    """
    scores = concept_scores(text, ctx)
    ranked = sorted(
        (c for c in ctx.vocabulary if scores[c] > 0),
        key=lambda c: (-scores[c], ctx.vocabulary.index(c)),
    )
    return ranked[: max(0, k)]
