"""The rule table (letterchunk.contract.rules) names real fixers, real response fields and
well-formed rows; repair and the report read it rather than tables of their own."""

from __future__ import annotations

from letterchunk.contract.rules import (
    COUPLED,
    DROPPABLE,
    FATAL_CODES,
    RULES,
    VALIDATOR_RULES,
    rule_kind,
)
from letterchunk.enrich import EVIDENCE_FIELDS, FIELDS, Enrichment, TableEnrichment
from letterchunk.repair.fixers import FIXERS


def test_every_fixer_named_exists_and_every_fixer_is_named():
    fixers = {name for name, _ in FIXERS}
    named = {r.fixer for r in RULES.values() if r.fixer is not None}
    assert named <= fixers, f"unknown fixers: {named - fixers}"
    assert fixers <= named, f"fixers no rule names: {fixers - named}"


def test_fixers_repair_only_mechanical_rules():
    for code, rule in RULES.items():
        if rule.fixer is not None:
            assert rule.kind == "mechanical", code


def test_every_field_named_is_a_response_field():
    response_fields = set(Enrichment.model_fields) | set(TableEnrichment.model_fields)
    known = response_fields | set(FIELDS) | set(EVIDENCE_FIELDS.values())
    for code, rule in RULES.items():
        for name in rule.fields:
            assert name in known, (code, name)


def test_droppable_and_coupled_codes_are_rules_the_model_answers():
    assert DROPPABLE and COUPLED
    for code in [*DROPPABLE, *COUPLED]:
        assert code in RULES, code
        assert RULES[code].kind == "semantic", code


def test_rows_are_well_formed():
    for code, rule in RULES.items():
        assert rule.code == code
        assert rule.severity in ("error", "warning"), code
        assert rule.kind in ("input", "mechanical", "semantic", "corpus"), code
        assert rule.origin in ("validator", "response"), code
        assert rule.description, code
        assert code == code.lower() and "." in code, code
        assert (rule.origin == "response") == code.startswith("response."), code
    assert set(VALIDATOR_RULES) >= FATAL_CODES
    # the response rules come last, so the validator's rules keep their order
    codes = list(RULES)
    assert codes[: len(VALIDATOR_RULES)] == list(VALIDATOR_RULES)


def test_rule_kind():
    assert rule_kind("count.chars") == "mechanical"
    assert rule_kind("response.truncated") == "semantic"
    assert rule_kind("no.such_rule") == "semantic"
