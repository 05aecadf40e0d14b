"""The enrichment-quality bench (bench/enrichment_quality.py): its scorer, its entity-typing rule,
and floors just under what the recorded answers reach today, so a regression fails here.

The floors are the measured figures of the cassettes in ``cassettes/`` against the hand-made gold
in ``bench/gold/``; raise them when a better recording lands, never lower them to make a change
pass.  The replay needs no model and no network (about 3 s per letter).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import pytest

from letterchunk.contract.vocabulary import load_concepts
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter
from replayed import replay_letter

pytest.importorskip("vcr")

ROOT = Path(__file__).resolve().parents[1]


def _load_bench():
    spec = importlib.util.spec_from_file_location(
        "enrichment_quality", ROOT / "bench" / "enrichment_quality.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


eq = _load_bench()


# -- the replayed letters against their floors ---------------------------------------------------

# figure -> lowest acceptable value for OURS, per letter recorded today
FLOORS = {
    1977: {  # measured: 5/5 confessions in 2 tagged chunks, people 8/8, companies 15/15
        "confession_recall": 1.0,
        "confession_precision": 1.0,
        "principle_coverage": 1.0,
        "principle_coverage_grounded": 1.0,
        "people_precision": 1.0,
        "companies_precision": 1.0,
        "entity_grounding": 1.0,
        "concept_precision": 0.47,  # 0.48
        "concept_recall": 0.42,  # 0.43
    },
    1995: {  # measured: 12/14 confessions, 3 of 5 tagged chunks right, companies 38/38
        "confession_recall": 0.85,  # 0.8571
        "confession_precision": 0.6,
        "principle_coverage": 1.0,
        "principle_coverage_grounded": 1.0,
        "people_precision": 1.0,
        "companies_precision": 1.0,
        "entity_grounding": 1.0,
        "concept_precision": 0.16,  # 0.17
        "concept_recall": 0.29,  # 0.30
    },
    2016: {  # measured: 9/9 confessions, 3 of 3 tagged chunks right, companies 43/45
        "confession_recall": 1.0,
        "confession_precision": 1.0,
        "principle_coverage": 1.0,
        "principle_coverage_grounded": 1.0,
        "people_precision": 1.0,
        "companies_precision": 0.95,  # 0.9556
        "entity_grounding": 1.0,
        "concept_precision": 0.43,  # 0.44
        "concept_recall": 0.66,  # 0.67
    },
}
# pooled over the three letters: 26/28 confessions, 8 of 10 tagged chunks right, F1 0.86 (the
# confession questions in-chunk gave 25/28 and 0.89, an earlier prompt 0.93; the threshold is
# chosen on the dev letters, not these: see docs/benchmarks.md, enrichment quality)
POOLED_FLOORS = {"confession_recall": 0.92, "confession_precision": 0.8, "confession_f1": 0.85}
MAX_CALLS_PER_CHUNK = 1.3  # one structured call per chunk, re-asks included, stays under this
# with the one-token yes/no questions of enrich.judges (each ~157 prompt tokens, 1
# generated): a chunk's confession questions and one per candidate rule sentence (up to 25);
# 1995 asks most, 18.89 requests a chunk
MAX_REQUESTS_PER_CHUNK = 19.0


def _shared_replay(year: int, out: Path | None):
    """The bench's Replay of ``year`` from the replay test_cassettes checks (tests/replayed.py:
    once a test run); test_keyword_rule_on_1977... below runs the bench's own replay."""
    replayed = replay_letter(year)
    with tempfile.TemporaryDirectory() as tmp:
        folder = replayed.write(Path(tmp))
        unplayed = replayed.recorded - replayed.played
        return eq.replayed(year, replayed.outcome, folder, replayed.usage, unplayed, out)


def test_recorded_gold_letters_meet_their_floors(tmp_path):
    recorded = [y for y in eq.gold_years() if (eq.CASSETTES / f"{y}.yaml").is_file()]
    assert set(FLOORS) <= set(recorded), "a letter with floors lost its cassette"
    results = eq.measure(out=tmp_path, replay=_shared_replay)
    by_year = {r.year: r for r in results}
    assert sorted(by_year) == eq.gold_years()
    for year in recorded:
        result = by_year[year]
        assert result.recorded and result.unplayed == 0 and result.failed == 0, year
        ours = result.ours.figures()
        for key, floor in FLOORS.get(year, {}).items():
            assert ours[key] is not None and ours[key] >= floor, (year, key, ours[key], floor)
        assert ours["llm_calls_per_chunk"] <= MAX_CALLS_PER_CHUNK
        assert ours["requests_per_chunk"] <= MAX_REQUESTS_PER_CHUNK
        assert ours["prompt_tokens_per_chunk"] > 0 and ours["completion_tokens_per_chunk"] > 0
        assert (tmp_path / f"{year}.jsonl").is_file()  # --out writes the canonical output
    for year in set(eq.gold_years()) - set(recorded):
        assert not by_year[year].recorded
    assert "not recorded" in eq.render(results) or len(recorded) == len(eq.gold_years())
    if len(recorded) == len(eq.gold_years()):
        pooled = eq.pooled(results)[0].figures()
        for key, floor in POOLED_FLOORS.items():
            assert pooled[key] is not None and pooled[key] >= floor, (key, pooled[key], floor)
    json.dumps(eq.as_json(results))  # --json output is plain JSON


def test_keyword_rule_on_1977_matches_the_graders_scorer(tmp_path):
    # score_enrichment.py --keyword-baseline on the segmenter's 1977 chunks: 3/5, 1 tagged, F1 0.75
    [result] = eq.measure([1977])
    kw = result.keyword.figures()
    assert (kw["confessions_found"], kw["tagged_confession_chunks"]) == ("3/5", 1)
    assert (kw["confession_recall"], kw["confession_precision"], kw["confession_f1"]) == (
        0.6,
        1.0,
        0.75,
    )


# -- the entity-typing rule ---------------------------------------------------------------------

LETTER = (
    "Mr. Chace ran the mills. Blue Chip Stamps Inc. reported. Our management and textile "
    "operations in New Bedford were discussed with Susan Jacques."
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Mr. Robert H. Bird", "person"),
        ("Warren E. Buffett", "person"),
        ("Susan Jacques", "person"),
        ("Chace", "person"),  # written "Mr. Chace" in the letter
        ("Berkshire Hathaway Inc", "organisation"),
        ("National Indemnity Company", "organisation"),
        ("Ogilvy & Mather International", "organisation"),
        ("Knight-Ridder Newspapers", "organisation"),
        ("GEICO", "organisation"),
        ("See’s Candies", "organisation"),
        ("Blue Chip Stamps", "organisation"),  # written with "Inc." in the letter
        ("Management", "generic"),  # a word the letter uses in lower case
        ("Textile Operations", "generic"),
        ("New Bedford", "unknown"),  # a place: neither, left out of the judged share
        ("Rockford", "unknown"),
    ],
)
def test_entity_type(name, expected):
    assert eq.entity_type(name, LETTER) == expected


def test_entity_type_without_letter_context_stays_unknown():
    assert eq.entity_type("Chace") == "unknown"
    assert eq.entity_type("Blue Chip Stamps") == "unknown"


# -- sentences ----------------------------------------------------------------------------------


def test_sentences_do_not_split_at_abbreviations_or_initials():
    text = (
        "Mr. Buffett met Ms. Jacques in the U.S. last year. Warren E. Buffett was pleased.\n Yes!"
    )
    assert eq.sentences(text) == [
        "Mr. Buffett met Ms. Jacques in the U.S. last year.",
        "Warren E. Buffett was pleased.",
        "Yes!",
    ]


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        ("Warren E. Buffett was pleased.", True),
        ("Warren E. Buffett was pleased", True),  # final punctuation left out
        ("Mr. Buffett met Ms. Jacques in the U.S. last year. Warren E. Buffett was pleased.", True),
        ("Buffett met Ms. Jacques in the U.S. last year.", False),  # starts mid-sentence
        ("Mr. Buffett met Ms.", False),  # cut at an abbreviation
        ("Warren E. Buffett was delighted.", False),  # not in the chunk
    ],
)
def test_is_sentence_of(quote, expected):
    content = "Mr. Buffett met Ms. Jacques in the U.S.\nlast year. Warren E. Buffett was pleased."
    assert eq.is_sentence_of(quote, content) is expected


# -- the scorer on a tiny hand-made letter ------------------------------------------------------


def _record(chunk_id, content, tier=1, content_type="narrative", principles=(), **entities):
    return {
        "chunk_id": chunk_id,
        "content": content,
        "metadata": {
            "chunk_tier": tier,
            "content_type": content_type,
            "principles": list(principles),
            "entities": {
                "people": entities.get("people", []),
                "companies": entities.get("companies", []),
            },
            "temporal_references": {"comparison_years": entities.get("years", [])},
            "buffett_concepts": entities.get("concepts", []),
        },
    }


GOLD = {
    "mistake_confessions": [
        {"quote": "We made a big mistake buying the mill."},
        {"quote": "I was wrong about the airline."},
        {"quote": "This quote is in no chunk at all."},
    ],
    "principles": [{"quote": "You should never buy a business you do not understand."}],
}
RECORDS = [
    _record(
        "A",
        "We made a big mistake buying the mill. It was Mr. Smith's idea.",
        content_type="mistake_confession",
        people=["Mr. Smith"],
        companies=["Smith"],
    ),
    _record(
        "B",
        "I was wrong about the\nairline. You should never buy a business you do not understand.",
        principles=["Buy what you understand."],
        companies=["Acme Corp"],
        years=[1990],
    ),
    _record(
        "C",
        "Float grew at Acme Corp. Costs rose. We made a profit.",
        content_type="mistake_confession",
        concepts=["float economics", "mistake accounting"],
    ),
]
EVIDENCE = {"B": {"principle_evidence": ["You should never buy a business you do not understand."]}}
LABELS = {"C": {"opening": "Float grew", "concepts": {"float economics": "float grew"}}}


def test_scores_on_a_hand_made_letter():
    s = eq.score_letter(GOLD, RECORDS, EVIDENCE, concept_labels=LABELS).figures()
    # confessions: quotes in A and B (the third is in no chunk); A and C tagged, A holds a quote
    assert (s["confessions_found"], s["confession_recall"]) == ("1/2", 0.5)
    assert (s["tagged_confession_chunks"], s["confession_precision"]) == (2, 0.5)
    assert s["confession_f1"] == 0.5
    assert s["principle_coverage"] == s["principle_coverage_grounded"] == 1.0
    assert (s["principles_extracted"], s["principles_on_gold"]) == (1, 1.0)
    assert s["people"] == {"persons": 1, "judged": 1, "all": 1}
    # "Smith" is a person by the letter ("Mr. Smith"): wrong under companies; Acme Corp right
    assert s["companies"] == {"organisations": 1, "judged": 2, "all": 2}
    assert s["companies_precision"] == 0.5
    # "Acme Corp" is not written in chunk B, nor 1990: 2 of 3 entities and 0 of 1 year grounded
    assert s["entity_grounding"] == 0.6667 and s["comparison_year_grounding"] == 0.0
    assert (s["concept_precision"], s["concept_recall"], s["concept_f1"]) == (0.5, 1.0, 0.6667)


def test_principle_evidence_cut_mid_sentence_is_not_grounded():
    cut = {"B": {"principle_evidence": ["never buy a business you do not understand"]}}
    s = eq.score_letter(GOLD, RECORDS, cut).figures()
    assert s["principle_coverage"] == 1.0
    assert s["principle_coverage_grounded"] == 0.0


def test_keyword_rule_replaces_content_types_and_principles():
    records, evidence = eq.keyword_records(RECORDS)
    types = [r["metadata"]["content_type"] for r in records]
    assert types == ["mistake_confession", "mistake_confession", "narrative"]
    assert evidence["B"]["principle_evidence"] == [
        "You should never buy a business you do not understand."
    ]
    assert RECORDS[2]["metadata"]["content_type"] == "mistake_confession"  # input untouched


def test_stale_concept_label_is_left_out():
    stale = {"C": {"opening": "Something else", "concepts": {"float economics": "x"}}}
    s = eq.score_letter(GOLD, RECORDS, concept_labels=stale).figures()
    assert (s["concept_chunks"], s["concept_labels_stale"], s["concept_f1"]) == (0, 1, None)


def test_concept_labels_use_only_the_vocabulary():
    vocabulary = set(load_concepts())
    labels = eq.load_concept_labels()
    assert len(labels) >= 15
    for label in labels.values():
        assert set(label["concepts"]) <= vocabulary, label["chunk_id"]
        assert all(reason.strip() for reason in label["concepts"].values())
        assert label["concepts"] or label["why_none"].strip()


def test_concept_labels_split_test_on_gold_letters_dev_on_others():
    gold = set(eq.gold_years())
    test, dev = eq.load_concept_labels("test"), eq.load_concept_labels("dev")
    assert len(test) + len(dev) == len(eq.load_concept_labels())  # every label has a split
    assert {int(chunk_id[:4]) for chunk_id in test} <= gold
    assert not {int(chunk_id[:4]) for chunk_id in dev} & gold
    assert len(dev) >= 60 and len({chunk_id[:4] for chunk_id in dev}) >= 6


def test_concept_labels_match_the_segmented_chunks():
    labels = eq.load_concept_labels()
    years = sorted({int(chunk_id[:4]) for chunk_id in labels})
    contents = {
        c.chunk_id: eq.norm(c.content)
        for year in years
        for c in segment_letter(load_letter(eq.LETTERS / f"{year}.txt"))
    }
    for chunk_id, label in labels.items():
        assert contents.get(chunk_id, "").startswith(eq.norm(label["opening"])), chunk_id


def test_hand_labels_judge_entities_before_the_rule():
    labels = {"Smith": "organisation", "Mr. Smith": "other"}
    s = eq.score_letter(GOLD, RECORDS, EVIDENCE, entity_labels=labels).figures()
    # labelled: "Mr. Smith" is no person, "Smith" an organisation; "Acme Corp" by the rule
    assert s["people"] == {"persons": 0, "judged": 1, "all": 1}
    assert s["companies"] == {"organisations": 2, "judged": 2, "all": 2}
    assert s["entities_judged"] == {"by label": 2, "by rule": 1, "all": 3}


def test_entity_labels_load_per_gold_letter():
    labels = eq.load_entity_labels(1977)
    assert labels["Ken Chace"] == "person" and labels["Management"] == "other"
    assert eq.load_entity_labels(1900) == {}
