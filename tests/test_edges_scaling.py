"""Work that must grow linearly with a letter gives exactly the answers it gave before.

The sentence splitter once copied and scanned everything before each period to find the word it
closes, and concept scoring ran every cue's regex over every chunk; both are now linear or cheap
per character (bench/scaling.py times them at 1x..8x a letter).  These properties pin that the
faster forms answer exactly as the plain ones below, kept here as the reference.
"""

from __future__ import annotations

import math
import re
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.contract.vocabulary import concepts_for, cues_for
from letterchunk.enrich import PromptContext
from letterchunk.enrich import concept_candidates as cc
from letterchunk.text import sentences as sn

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("LC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def reference_abbreviation_before(text: str, dot: int) -> bool:
    """The splitter's first form: quadratic in a paragraph's length, plainly right."""
    head = text[:dot]
    if not head.strip():
        return False
    word = head.rsplit(None, 1)[-1].lstrip(sn._OPENERS)
    return word.lower() in sn.ABBREVIATIONS or bool(sn._INITIALS.fullmatch(word))


# text made of what moves the answer: abbreviations, initials, openers, every kind of blank
PIECES = [
    "Mr.",
    "U.S.",
    "Inc.",
    "e.g.",
    "E.",
    "R.C.",
    "Co.",
    "word.",
    "Berkshire",
    "1977.",
    "(Mr.",
    "\u201cInc.",
    ".",
    "..",
    "?",
    "!",
    "A",
    "The",
    "\u0130nc.",
    "\u017ft.",
]
BLANKS = [" ", "  ", "\n", "\t", "\u00a0", "\u2028", "\x1c", "\u3000", ""]
texts = st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(BLANKS)), max_size=40).map(
    lambda parts: "".join(p + b for p, b in parts)
)


@SETTINGS
@given(texts)
def test_abbreviation_before_answers_as_the_quadratic_form(text: str) -> None:
    for dot in [i for i, ch in enumerate(text) if ch == "."] + [0, len(text)]:
        assert sn._abbreviation_before(text, dot) == reference_abbreviation_before(text, dot)


@SETTINGS
@given(st.text(alphabet=".!? \n\tMrU.SAbc\u00a0(\u201c", max_size=60))
def test_abbreviation_before_on_any_text(text: str) -> None:
    for dot in range(len(text) + 1):
        assert sn._abbreviation_before(text, dot) == reference_abbreviation_before(text, dot)


def reference_concept_scores(text: str, ctx: PromptContext) -> dict[str, float]:
    """Concept scoring's first form: every cue's regex over the whole text."""
    cues = dict(ctx.cues)
    meanings = dict(ctx.meanings)
    sharing = cc._cue_sharing((c, (c, *cues.get(c, ()))) for c in ctx.vocabulary)
    words = max(1, len(text.split()))
    stems = cc._text_stems(text)
    scores: dict[str, float] = {}
    for concept in ctx.vocabulary:
        evidence = hits = 0.0
        for cue in dict.fromkeys((concept, *cues.get(concept, ()))):
            count = len(cc._compiled(cue).findall(text))
            if count:
                weight = (cc.NAME_WEIGHT if cue == concept else len(cue.split())) / sharing[
                    cue.lower()
                ]
                evidence += weight * math.log1p(count)
                hits += weight * count
        evidence += cc.DENSITY_WEIGHT * 1000.0 * hits / words
        meaning = cc._meaning_stems(f"{concept} {meanings.get(concept, '')}")
        if meaning:
            evidence += cc.MEANING_WEIGHT * len(meaning & stems) / len(meaning)
        scores[concept] = evidence
    return scores


CTX = PromptContext.for_letter(
    1977, [], concepts_for(1977), grounded_choices=False, cues=cues_for(1977)
)
CUE_WORDS = sorted({w for _, own in CTX.cues for cue in own for w in cue.split()})
# cue words as a letter may spell them: capitals, the characters case-insensitive matching folds
# to an ASCII letter (dotless i, long s, Kelvin sign), glued to letters, hyphens and quotes
SPELLINGS = st.sampled_from(CUE_WORDS).flatmap(
    lambda w: st.sampled_from(
        [
            w,
            w.upper(),
            w.title(),
            w.replace("i", "\u0131"),
            w.replace("s", "\u017f"),
            w.replace("k", "\u212a"),
            w.replace("i", "\u0130"),
            "x" + w,
            w + "s",
            "-" + w,
        ]
    )
)
cue_texts = st.lists(
    st.tuples(SPELLINGS, st.sampled_from([" ", "\n", "  ", ", ", "."])), max_size=30
)


@SETTINGS
@given(cue_texts)
def test_concept_scores_answer_as_every_cue_searched(parts: list[tuple[str, str]]) -> None:
    text = "".join(w + b for w, b in parts)
    assert cc.concept_scores(text, CTX) == reference_concept_scores(text, CTX)


def test_concept_scores_of_a_letter_unchanged() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "corpus" / "letters" / "1977.txt").read_text()
    assert cc.concept_scores(text, CTX) == reference_concept_scores(text, CTX)


def test_fold_table_is_every_non_ascii_match_of_an_ascii_letter() -> None:
    """The characters ``re.IGNORECASE`` matches to an ASCII letter, found over every code point,
    are exactly those concept scoring folds before its substring test."""
    every = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    found = {}
    for m in re.finditer(r"[a-z0-9'\-]", every, re.IGNORECASE):
        ch = m.group()
        letters = [a for a in string.ascii_lowercase if re.fullmatch(a, ch, re.IGNORECASE)]
        assert len(letters) == 1, (hex(ord(ch)), letters)
        found[ch] = letters[0]
    assert {ch: cc._folded(ch) for ch in found} == found
