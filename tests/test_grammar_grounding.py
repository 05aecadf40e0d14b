"""What the grammar offers the model must pass the validator, by construction.

Every candidate list the response schema turns into an enum (entity names, evidence sentences,
comparison years, section titles, concepts) is filtered through the validator's own predicate;
these tests put every offered value into a chunk and run the real validator over it, for every
chunk of the shipped corpus and for damaged re-extractions of it.  The schema rules table
lists which validator rules the grammar-mode response schema enforces and which it cannot.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.contract.rules import VALIDATOR_RULES
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import (
    RELATED_YEAR_RANGE,
    LetterContext,
    count_sentences,
    validate_chunk,
)
from letterchunk.contract.vocabulary import load_concepts
from letterchunk.enrich import (
    SUMMARY_PATTERN,
    PromptContext,
    name_candidates,
    response_model_for,
    sentence_choices,
    years_in_text,
)
from letterchunk.text.clean import CleanedLetter, clean_text, extract_date
from letterchunk.text.segment import section_titles, segment_letter
from test_segment_properties import damaged_excerpts

LETTERS = sorted((Path(__file__).resolve().parents[1] / "corpus" / "letters").glob("*.txt"))

# the validator rules a grounded value can break
GROUNDING = {
    "entity.not_found",
    "concept.unknown",
    "concept.case",
    "year.comparison_not_found",
    "xref.year_range",
    "xref.unknown_section",
    "xref.self_section",
    "evidence.not_found",
    "evidence.too_short",
    "evidence.principle_not_found",
}


def _enums(schema: dict) -> dict[str, list]:
    """Every enum of a response schema, by the property path that holds it ($refs followed)."""
    defs = schema.get("$defs", {})
    out: dict[str, list] = {}

    def walk(node, path):
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        if "enum" in node:
            out.setdefault(path, []).extend(node["enum"])
        if "const" in node:  # a one-value enum
            out.setdefault(path, []).append(node["const"])
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{name}" if path else name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path)

    walk(schema, "")
    return out


def _offered_chunk(chunk: Chunk, offered: dict[str, list]) -> tuple[Chunk, dict]:
    """``chunk`` holding every offered value at once, and its evidence record."""
    data = chunk.model_dump(mode="json")
    md = data["metadata"]
    names = list(
        dict.fromkeys(offered.get("entities.companies", []) + offered.get("entities.people", []))
    )
    md["entities"]["companies"] = names
    md["buffett_concepts"] = list(dict.fromkeys(offered.get("buffett_concepts", [])))
    md["temporal_references"]["comparison_years"] = list(offered.get("comparison_years", []))
    md["cross_references"]["related_sections_same_letter"] = list(
        offered.get("related_sections_same_letter", [])
    )
    quotes = list(
        dict.fromkeys(
            offered.get("content_type_evidence", []) + offered.get("principles.evidence", [])
        )
    )
    record = {
        "chunk_id": chunk.chunk_id,
        "content_type_evidence": quotes,
        "principle_evidence": quotes,
    }
    return Chunk.model_validate(data), record


def _grounding_errors(
    chunk: Chunk, offered: dict[str, list], text: str, titles: list[str], vocabulary
) -> list[str]:
    full, record = _offered_chunk(chunk, offered)
    ctx = LetterContext(
        cleaned_text=text,
        section_titles=titles,
        vocabulary=vocabulary,
        evidence={chunk.chunk_id: record},
    )
    return [
        f"{chunk.chunk_id} {v.code} {v.message}"
        for v in validate_chunk(full, stage="enriched", context=ctx)
        if v.code in GROUNDING
    ]


@cache
def _corpus() -> list[tuple[str, list[Chunk], list[str]]]:
    out = []
    for path in LETTERS:
        text = clean_text(path.read_text(encoding="utf-8"))
        date, note = extract_date(text)
        chunks = segment_letter(CleanedLetter(int(path.stem), date, note, path.name, text))
        out.append((text, chunks, section_titles(chunks)))
    return out


def test_every_value_offered_for_the_shipped_corpus_passes_the_validator():
    # the cheap candidate functions over every chunk (the concept cues, slow to scan and drawn
    # from the vocabulary itself, are covered through the full schema below)
    vocabulary = load_concepts()
    problems: list[str] = []
    for text, chunks, titles in _corpus():
        for chunk in chunks:
            own = chunk.metadata.section_title
            offered = {
                "entities.companies": name_candidates(chunk.content),
                "content_type_evidence": sentence_choices(chunk.content),
                "comparison_years": years_in_text(chunk.content),
                "related_sections_same_letter": [t for t in titles if t != own],
            }
            problems += _grounding_errors(chunk, offered, text, titles, vocabulary)
    assert problems == []


def test_every_enum_of_one_letters_response_schemas_passes_the_validator():
    vocabulary = load_concepts()
    text, chunks, titles = _corpus()[LETTERS.index(LETTERS[-1])]
    ctx = PromptContext.for_letter(chunks[0].metadata.letter_year, titles, vocabulary)
    problems: list[str] = []
    for chunk in chunks:
        offered = _enums(response_model_for(chunk, ctx).model_json_schema())
        assert offered  # the schema does offer choices
        problems += _grounding_errors(chunk, offered, text, titles, vocabulary)
    assert problems == []


@settings(
    max_examples=int(__import__("os").environ.get("LC_HYPOTHESIS_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(damaged_excerpts())
def test_every_enum_offered_for_a_damaged_letter_passes_the_validator(raw):
    text = clean_text(raw)
    if not text.strip():
        return
    date, note = extract_date(text)
    chunks = segment_letter(CleanedLetter(1990, date, note, "x", text), tier2=True)
    titles = section_titles(chunks)
    vocabulary = load_concepts()
    ctx = PromptContext.for_letter(1990, titles, vocabulary)
    problems: list[str] = []
    for chunk in chunks:
        offered = _enums(response_model_for(chunk, ctx).model_json_schema())
        problems += _grounding_errors(chunk, offered, text, titles, vocabulary)
    assert problems == []


@pytest.mark.parametrize(
    ("text", "offered", "not_offered"),
    [
        # the name that halted a run: the bracketed abbreviation is a name of its own
        (
            "We own Berkshire Hathaway Energy (\u201cBHE\u201d). It grew.",
            ["Berkshire Hathaway Energy", "BHE"],
            ["Berkshire Hathaway Energy BHE\u201d)"],
        ),
        (
            "Walter Schloss (\u201cWalter\u201d) ran a fund with Ajit Jain.",
            ["Walter Schloss", "Walter", "Ajit Jain"],
            ["Walter Schloss Walter"],
        ),
    ],
)
def test_name_candidates_are_names_the_text_holds(text, offered, not_offered):
    names = name_candidates(text)
    assert set(offered) <= set(names)
    assert not set(not_offered) & set(names)


# --------------------------------------------------------------------------------------------
# contextual_summary: the sentence limit as a grammar pattern


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(SUMMARY_PATTERN, fullmatch=True))
def test_any_summary_the_pattern_allows_is_one_to_three_sentences(summary):
    assert summary.strip()  # summary.missing
    assert 1 <= count_sentences(summary) <= 3  # summary.sentences


# the same text built from pieces that look like sentence ends to the validator
ENDS = st.sampled_from([". ", "! ", "? ", ".\u201d ", ".) ", "... ", ". \u201c", ".  "])
WORDS = st.sampled_from(
    ["Berkshire", "did well", "in 1987", "U.S.", "1.5", "Mr.", "e.g.,", "float", "A", "\u2019s"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(WORDS, ENDS), min_size=1, max_size=30).map(" ".join))
def test_the_pattern_never_allows_more_than_the_validator(text):
    if re.fullmatch(SUMMARY_PATTERN, text):
        assert 1 <= count_sentences(text) <= 3


@pytest.mark.parametrize(
    ("summary", "allowed"),
    [
        ("Berkshire's book value rose 19.5% in 1987.", True),
        ("Results fell. Textiles lost money. We expect a better year.", True),
        ("Results fell. Textiles lost money. We expect more. Insurance grew.", False),
        ("The U.S. economy grew 2.5% and Berkshire\u2019s float rose.", True),
        ("He called it \u201cfloat.\u201d Then he explained it.", True),
        ('He called it "float".', False),  # JSON's quote: curly quotes only
        (" Leading blank.", False),
        ("", False),
        ("Line\nbreak.", False),
    ],
)
def test_summary_pattern_examples(summary, allowed):
    assert bool(re.fullmatch(SUMMARY_PATTERN, summary)) is allowed


def test_summary_pattern_uses_only_syntax_llama_cpp_compiles():
    # llama.cpp's json-schema-to-grammar: anchored ^...$, no (?...) groups, no \s \d \w
    # shorthands (GBNF has none), no lookarounds, small {m,n} repetitions
    assert SUMMARY_PATTERN.startswith("^") and SUMMARY_PATTERN.endswith("$")
    assert "(?" not in SUMMARY_PATTERN
    assert not re.search(r"\\[sSdDwWbB]", SUMMARY_PATTERN)
    assert max(int(n) for n in re.findall(r"\{\d*,?(\d+)\}", SUMMARY_PATTERN)) <= 500
    # every whitespace character but the space is left out, so the validator's \s+ after an
    # end mark can only be the one space the pattern allows there
    for code in range(0x3001):
        ch = chr(code)
        if ch != " " and re.match(r"\s", ch):
            assert not re.fullmatch(SUMMARY_PATTERN, f"A{ch}B."), hex(code)


# --------------------------------------------------------------------------------------------
# which validator rules the response schema enforces


# rule -> (schema path, JSON-schema keyword that enforces it) in the grammar-mode schema of a
# narrative chunk (paths as in _enums: properties joined by '.', list items transparent)
SCHEMA_ENFORCED: dict[str, tuple[str, str]] = {
    "entity.not_found": ("entities.companies", "enum"),
    # the enums offer only names typed organisation / person by contract.names
    "entity.person_in_companies": ("entities.companies", "enum"),
    "entity.organisation_in_people": ("entities.people", "enum"),
    "concept.unknown": ("buffett_concepts", "enum"),
    "concept.case": ("buffett_concepts", "enum"),
    "year.comparison_not_found": ("comparison_years", "enum"),
    "xref.year_range": ("related_years", "minimum/maximum"),
    "xref.unknown_section": ("related_sections_same_letter", "enum"),
    "xref.self_section": ("related_sections_same_letter", "enum"),
    "evidence.not_found": ("content_type_evidence", "enum"),
    "evidence.too_short": ("content_type_evidence", "enum"),
    "evidence.principle_not_found": ("principles.evidence", "enum"),
    "evidence.principle_missing": ("principles.evidence", "required"),
    "summary.sentences": ("contextual_summary", "pattern"),
    "summary.missing": ("contextual_summary", "pattern"),
    "themes.missing": ("themes", "minItems"),
    "schema.enum": ("retrieval_priority", "enum"),
    "content_type.table_outside_t3": ("content_type", "enum"),
}
# rule -> why the response schema cannot rule it out (the validator and the repair loop do)
SCHEMA_NOT_ENFORCED: dict[str, str] = {
    "evidence.missing": "cross-field (a confession/principle tag needs >= 1 quote): would need "
    "if/then or a oneOf per tag, which the grammar converter handles poorly",
    "list.duplicate": "uniqueItems is not supported by llama.cpp's converter; "
    "apply_enrichment drops repeats instead",
    "title.untitled": "'not this one string' needs a negative lookahead, which llama.cpp "
    "patterns do not support",
    "title.empty": "minLength 1 rules out '' only; 'not blank' needs a pattern, and a pattern "
    "replaces maxLength in llama.cpp's converter (maxLength stops runaway titles)",
    "principle.empty": "as title.empty: minLength 1 is in the schema, whitespace-only is not "
    "ruled out",
    "table.summary_missing": "as title.empty (minLength 1 only)",
    "table.name_missing": "as title.empty (minLength 1 only; a blank name keeps the segmenter's)",
}


def _keyword_at(schema: dict, path: str, keyword: str) -> bool:
    """Whether the property at ``path`` (or its list items) carries every ``a/b`` keyword."""
    defs = schema.get("$defs", {})

    def deref(node: dict) -> dict:
        return defs[node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else node

    node = schema
    for part in path.split("."):
        node = deref(node)
        if "properties" not in node and isinstance(node.get("items"), dict):
            node = deref(node["items"])
        node = node["properties"][part]
    node = deref(node)
    items = deref(node["items"]) if isinstance(node.get("items"), dict) else {}
    if keyword == "enum" and (node.get("maxItems") == 0 or "const" in node or "const" in items):
        return True  # nothing valid to choose (the list is forced empty), or a one-value enum
    return all(k in node or k in items for k in keyword.split("/"))


def test_schema_rules_table_names_real_rules_once():
    assert set(SCHEMA_ENFORCED) <= set(VALIDATOR_RULES)
    assert set(SCHEMA_NOT_ENFORCED) <= set(VALIDATOR_RULES)
    assert not set(SCHEMA_ENFORCED) & set(SCHEMA_NOT_ENFORCED)
    # every semantic rule about a field the model fills is in one of the two tables
    model_filled = {
        "summary.",
        "themes.",
        "concept.",
        "entity.",
        "principle.",
        "evidence.",
        "xref.",
        "year.comparison",
        "title.",
        "table.name",
        "table.summary",
    }
    semantic = {
        c
        for c, rule in VALIDATOR_RULES.items()
        if rule.kind in ("semantic", "mechanical")
        and c.startswith(tuple(model_filled))
        and c != "evidence.orphan"
    }
    assert semantic <= set(SCHEMA_ENFORCED) | set(SCHEMA_NOT_ENFORCED)


def test_enforced_rules_appear_in_the_generated_schema(good_letter):
    chunk = good_letter.chunk("1987-S1-T1-001")
    ctx = PromptContext.for_letter(1987, ["Performance", "Insurance Operations"], load_concepts())
    schema = response_model_for(chunk, ctx).model_json_schema()
    defs = schema["$defs"]
    missing = []
    for rule, (path, keyword) in SCHEMA_ENFORCED.items():
        if keyword == "required":  # a principle model requires its evidence quote
            principle = defs[schema["properties"]["principles"]["items"]["$ref"].rsplit("/")[-1]]
            ok = "evidence" in principle["required"]
        else:
            ok = _keyword_at(schema, path, keyword)
        if not ok:
            missing.append(f"{rule}: {keyword} at {path} in {_enums(schema)}")
    assert missing == []
    years = schema["properties"]["related_years"]["items"]
    assert (years["minimum"], years["maximum"]) == RELATED_YEAR_RANGE
    assert schema["properties"]["contextual_summary"]["pattern"] == SUMMARY_PATTERN
