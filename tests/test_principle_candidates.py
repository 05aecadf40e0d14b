"""Principle candidates (``enrich.principle_candidates``): properties on generated text and on
the shared letters' own chunks."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from letterchunk.contract.validate import normalise_ws
from letterchunk.enrich.candidates import sentence_choices
from letterchunk.enrich.principle_candidates import (
    MAX_PRINCIPLE_CANDIDATES,
    principle_candidates,
    principle_score,
)
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter

SHARED = Path(__file__).resolve().parents[2] / "shared" / "letters"
LETTERS = sorted(SHARED.glob("*.txt")) or sorted(
    (Path(__file__).resolve().parents[1] / "corpus" / "letters").glob("*.txt")
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SUBJECTS = ("investors", "managers", "a business", "owners", "one", "you", "companies")
_MODALS = ("should", "must", "should never", "must always")
_VERBS = ("avoid", "prefer", "judge", "value", "favour", "distrust")
_OBJECTS = (
    "businesses whose economics are poor",
    "managers who talk of synergy",
    "debt that can be called at the worst moment",
    "earnings that depend on accounting choices",
    "prices that assume perfection",
    "growth that consumes more capital than it makes",
)
_NAMES = ("Acme Corporation", "Blue Chip Stamps", "Wesco Financial", "Kingsley Mills")
_PAST = ("earned", "lost", "sold", "bought")


@cache
def _body_chunks(path: Path) -> tuple[str, ...]:
    chunks = segment_letter(load_letter(path), tier2=True)
    return tuple(c.content for c in chunks if c.metadata.chunk_tier in (1, 2))


def _ends(paragraph: str) -> bool:
    return paragraph.rstrip()[-1:] in tuple('.!?"\u201d\u2019)')


@st.composite
def _general(draw: st.DrawFn) -> tuple[str, str]:
    """(general rule, the same object turned into a dated report with figures)."""
    subject, modal = draw(st.sampled_from(_SUBJECTS)), draw(st.sampled_from(_MODALS))
    verb, obj = draw(st.sampled_from(_VERBS)), draw(st.sampled_from(_OBJECTS))
    year = draw(st.integers(1965, 2023))
    amount = draw(st.integers(1, 999))
    share = draw(st.integers(1, 99))
    general = f"{subject.capitalize()} {modal} {verb} {obj}."
    report = (
        f"In {year}, {draw(st.sampled_from(_NAMES))} {draw(st.sampled_from(_PAST))} "
        f"{obj} for ${amount}.{share % 10} million, {share}% more than in {year - 1}."
    )
    return general, report


@st.composite
def _chunk(draw: st.DrawFn) -> str:
    """A chunk of generated sentences: rules, reports and plain prose, in paragraphs."""
    pieces: list[str] = []
    for _ in range(draw(st.integers(0, 14))):
        general, report = draw(_general())
        plain = draw(st.sampled_from(("We visited the plant in the spring and met the staff.", "")))
        pieces.append(draw(st.sampled_from((general, report, plain or general))))
        if draw(st.booleans()):
            pieces.append("\n\n")
    return " ".join(pieces)


@SETTINGS
@given(text=_chunk(), k=st.integers(0, 12))
def test_candidates_are_sentence_choices_at_most_k_ordered_by_score(text: str, k: int) -> None:
    choices = sentence_choices(text)
    got = principle_candidates(text, k)
    assert len(got) == min(k, len(choices))
    assert len(set(got)) == len(got)
    assert all(c in choices for c in got)
    assert principle_candidates(text, k) == got  # deterministic
    scores = [principle_score(c) for c in got]
    assert scores == sorted(scores, reverse=True)
    # ties keep text order, and nothing left out scores above the last one taken
    for a, b in zip(got, got[1:], strict=False):
        if principle_score(a) == principle_score(b):
            assert choices.index(a) < choices.index(b)
    left_out = [c for c in choices if c not in got]
    if got and left_out:
        assert max(principle_score(c) for c in left_out) <= scores[-1]
    # a larger k extends the list: the first k candidates stay the same
    assert principle_candidates(text, k + 3)[:k] == got


@SETTINGS
@given(pair=_general())
def test_a_rule_turned_into_a_dated_report_with_figures_scores_lower(pair: tuple[str, str]) -> None:
    general, report = pair
    assert principle_score(report) < principle_score(general)


@SETTINGS
@given(
    path=st.sampled_from(LETTERS),
    pick=st.integers(0, 10_000),
    where=st.floats(0, 1),
    pair=_general(),
    reason=st.sampled_from(
        (
            "over time, price is what you pay and value is what you get",
            "in the long run, the market is a weighing machine",
            "if the price is wrong, the best business is a poor investment",
        )
    ),
)
def test_a_rule_inserted_into_a_letter_chunk_is_a_candidate(
    path: Path, pick: int, where: float, pair: tuple[str, str], reason: str
) -> None:
    chunks = _body_chunks(path)
    text = chunks[pick % len(chunks)]
    paragraphs = text.split("\n\n")
    # at a paragraph boundary after a finished sentence (a heading ending in ":" runs on)
    spots = [i for i in range(len(paragraphs) + 1) if i == 0 or _ends(paragraphs[i - 1])]
    at = spots[round(where * (len(spots) - 1))]
    rule = f"{pair[0][:-1]}; it is folly to forget that {reason}, which is far better than hope."
    inserted = "\n\n".join([*paragraphs[:at], rule, *paragraphs[at:]])
    # the property holds for a rule the splitter keeps as its own sentence (a next paragraph
    # that opens in lower case or with a digit runs on from it)
    assume(normalise_ws(rule) in sentence_choices(inserted))
    assert normalise_ws(rule) in [normalise_ws(c) for c in principle_candidates(inserted)]


def test_default_k_is_the_module_constant() -> None:
    text = " ".join(f"Investors should avoid debt number {i} always." for i in range(20))
    assert len(principle_candidates(text)) == MAX_PRINCIPLE_CANDIDATES
