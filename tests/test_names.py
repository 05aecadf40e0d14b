"""Name typing (letterchunk.contract.names), the two validator rules built on it and their fixer,
and its agreement with the hand labels of bench/gold/entities.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from letterchunk.contract.names import name_kind
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import validate_chunk
from letterchunk.enrich.answers import MAX_PEOPLE
from letterchunk.enrich.candidates import name_candidates
from letterchunk.repair.fixers import mechanical_fixes
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter

ROOT = Path(__file__).resolve().parents[1]
TEXT = (
    "Acme Widget Corporation had a fine year. Its chairman, Mr. Carl Vole, told us so, and "
    "Helen Ostrow, who runs sales, agreed. Our plant in Springfield, Illinois was busy, and "
    "the Kestrel Fire and Marine Insurance Company paid claims. Management and Textile "
    "Operations improved. Zanthor, Inc. grew too. We bought "
    "Quell & Sons in Boston, and GAAP earnings rose."
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Acme Widget Corporation", "organisation"),  # a legal form last
        ("Mr. Carl Vole", "person"),  # a title first
        ("Vole", "person"),  # "Mr. ... Vole" in the text
        ("Helen Ostrow", "person"),  # a common given name first
        ("Illinois", "place"),
        ("Boston", "place"),
        ("Kestrel Fire and Marine Insurance Company", "organisation"),
        ("Marine Insurance Company", "unknown"),  # the tail of a longer name
        ("Zanthor", "organisation"),  # "Zanthor, Inc." in the text
        ("Quell & Sons", "organisation"),
        ("GAAP", "unknown"),  # an abbreviation of prose
        ("Management", "unknown"),
        ("Textile Operations", "unknown"),
        ("Chairman", "unknown"),
        ("Helen Ostrow and Carl Vole", "person"),
        ("Helen Ostrow and Zanthor", "unknown"),
    ],
)
def test_name_kind(name, kind):
    assert name_kind(name, TEXT) == kind


def test_name_kind_without_text_uses_the_name_alone():
    assert name_kind("Berkshire Hathaway Inc.") == "organisation"
    assert name_kind("Ken Smith") == "person"
    assert name_kind("Kansas City") == "place"
    assert name_kind("Zanthor") == "unknown"
    assert name_kind("") == "unknown"


def _chunk(good_letter, companies, people):
    data = good_letter.chunks[0].model_dump(mode="json")
    data["content"] = TEXT
    data["metadata"]["entities"] = {"companies": companies, "people": people, "metrics": []}
    return Chunk.model_validate(data)


def _codes(chunk):
    return [(v.code, v.field) for v in validate_chunk(chunk) if v.code.startswith("entity.")]


def test_validator_flags_mistyped_entities_and_the_fixer_moves_them(good_letter):
    chunk = _chunk(good_letter, ["Helen Ostrow", "Zanthor", "Textile Operations"], ["Boston"])
    assert _codes(chunk) == [
        ("entity.person_in_companies", "metadata.entities.companies.0"),
        ("entity.organisation_in_people", "metadata.entities.people.0"),
    ]
    fixed, changes = mechanical_fixes(chunk)
    # the person moves to people, the place is dropped, unknown names stay where they are
    assert fixed.metadata.entities.companies == ["Zanthor", "Textile Operations"]
    assert fixed.metadata.entities.people == ["Helen Ostrow"]
    assert _codes(fixed) == []
    assert {"metadata.entities.companies", "metadata.entities.people"} <= {c.field for c in changes}
    assert mechanical_fixes(fixed)[1] == []  # idempotent


def test_fixer_moves_an_organisation_and_drops_what_has_no_room(good_letter):
    people = ["Zanthor", "Acme Widget Corporation"]
    chunk = _chunk(good_letter, ["Helen Ostrow"], people)
    fixed, _ = mechanical_fixes(chunk)
    assert fixed.metadata.entities.companies == ["Zanthor", "Acme Widget Corporation"]
    assert fixed.metadata.entities.people == ["Helen Ostrow"]
    full = ["Carl Vole", "Vole", "Helen Ostrow"][:MAX_PEOPLE]
    crowded = _chunk(good_letter, ["Mr. Carl Vole"], full)
    fixed, _ = mechanical_fixes(crowded)
    assert fixed.metadata.entities.companies == []  # people is full: the name is dropped
    assert fixed.metadata.entities.people == full


# -- agreement with the hand labels --------------------------------------------------------------

LABELS = json.loads((ROOT / "bench" / "gold" / "entities.json").read_text(encoding="utf-8"))


def _gold_chunks(year: str):
    return segment_letter(load_letter(ROOT / "corpus" / "letters" / f"{year}.txt"))


@pytest.mark.parametrize("year", sorted(LABELS))
def test_every_name_candidate_of_the_gold_letters_is_labelled(year):
    labelled = {n for names in LABELS[year].values() for n in names}
    assert set(LABELS[year]) <= {"person", "organisation", "place", "other"}
    candidates = {n for c in _gold_chunks(year) for n in name_candidates(c.content)}
    assert candidates - labelled == set(), "label the new candidates in bench/gold/entities.json"


def test_name_kind_agrees_with_the_hand_labels():
    # measured on the chunks' own text: person 100/102, organisation 180/186
    typed = {"person": [0, 0], "organisation": [0, 0]}
    for year in LABELS:
        label = {n: k for k, names in LABELS[year].items() for n in names}
        for chunk in _gold_chunks(year):
            for name in name_candidates(chunk.content):
                kind = name_kind(name, chunk.content)
                if kind in typed:
                    typed[kind][0] += label[name] == kind
                    typed[kind][1] += 1
    for kind, (right, total) in typed.items():
        assert right / total >= 0.95, (kind, right, total)
