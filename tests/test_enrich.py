"""enrich: narrowed response models, message layout, apply_enrichment, evidence records."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from answers import CLOSE, OPEN, QUOTE, narrative_answer, quoted_chunk
from letterchunk.contract.validate import LetterContext, validate_chunk
from letterchunk.enrich import (
    Enrichment,
    PromptContext,
    TableEnrichment,
    apply_enrichment,
    build_messages,
    confession_sentences,
    cued_concepts,
    evidence_record,
    response_model_for,
    years_in_text,
)
from letterchunk.enrich.answers import concept_choices, rule_checks
from letterchunk.text.segment import UNTITLED

VOCAB = frozenset(
    {"float economics", "circle of competence", "intrinsic value", "underwriting discipline"}
)
# explicit cues, so the tests do not follow edits of the shipped schemas/buffett_concepts.json
CUES = {
    "float economics": ["float"],
    "circle of competence": ["competence"],
    "underwriting discipline": ["underwrit"],
}


def ctx_for(letter) -> PromptContext:
    return PromptContext.for_letter(1987, ["Performance", "Insurance Operations"], VOCAB, cues=CUES)


def test_years_in_text():
    assert years_in_text("In 1986 and 2009, not 12345 or 19867; again 1986.") == [1986, 2009]


def test_response_model_narrows_to_vocabulary_titles_and_years(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    model = response_model_for(s1, ctx_for(good_letter))
    assert issubclass(model, Enrichment) and model.__name__ == "Enrichment"
    assert "section_title" not in model.model_fields  # the segmenter found a title
    model.model_validate(narrative_answer())
    for bad in (
        {"buffett_concepts": ["made-up concept"]},
        {"related_sections_same_letter": ["Performance"]},  # its own section
        {"comparison_years": [1990]},  # not written in the chunk
        {"themes": ["a", "b", "c", "d", "e", "f"]},  # capped list
        {"content_type": "financial_table"},  # T1 never a table
        {"extra_key": 1},
    ):
        with pytest.raises(ValidationError):
            model.model_validate(narrative_answer(**bad))
    schema = model.model_json_schema()
    # only the candidate concepts, best evidence first: the two the chunk names come before one
    # whose name's words it merely uses ("economic"), and one it gives no evidence for is out
    enum = schema["properties"]["buffett_concepts"]["items"]["enum"]
    assert enum == concept_choices(s1, ctx_for(good_letter))
    assert enum[:2] == ["circle of competence", "intrinsic value"]
    assert "underwriting discipline" not in enum
    with pytest.raises(ValidationError):  # in the vocabulary, but no candidate of this chunk
        model.model_validate(narrative_answer(buffett_concepts=["underwriting discipline"]))
    assert schema["required"] == list(model.model_fields)  # every key forced by the grammar


def test_untitled_sections_ask_for_a_title(make_chunk):
    chunk = make_chunk(
        "1987-S3-T1-001",
        "A short body from 1987.",
        0,
        section_title=UNTITLED,
        section_hierarchy=["Letter Body", UNTITLED],
    )
    ctx = PromptContext.for_letter(1987, ["Performance", UNTITLED], VOCAB, cues=CUES)
    assert ctx.section_titles == ("Performance",)
    model = response_model_for(chunk, ctx)
    assert "section_title" in model.model_fields
    answer = narrative_answer(
        section_title="Closing Remarks",
        comparison_years=[],
        buffett_concepts=[],
        related_sections_same_letter=["Performance"],
        # under a grammar a chunk with rule candidates states at least one principle (the
        # follow-up questions keep it or drop it): here its one sentence
        principles=[
            {"statement": "A rule.", "category": "general", "evidence": "A short body from 1987."}
        ],
        content_type="narrative",
        content_type_evidence=[],
        entities={"companies": [], "people": [], "metrics": []},
    )
    out = apply_enrichment(chunk, model.model_validate(answer))
    assert out.metadata.section_title == "Closing Remarks"
    assert out.metadata.section_hierarchy == ["Letter Body", "Closing Remarks"]
    user = build_messages(chunk, ctx)[1]["content"]
    assert "also give section_title" in user
    assert UNTITLED not in user  # the placeholder is never shown (the model copied it back)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Float grew; float is free money. Our underwriting discipline held.",
            ["float economics", "underwriting discipline"],
        ),  # 2 = 2 hits (name + cue): vocab order
        (
            "UNDERWRITING results; underwriters; the circle of competence.",
            ["circle of competence", "underwriting discipline"],
        ),  # case-insensitive; 2 = 2 hits
        ("A refloated boat and incompetence.", []),  # a cue matches only at a word start
        ("Nothing cued here at all.", []),
    ],
)
def test_cued_concepts_are_ordered_by_hits_then_vocabulary(text, expected):
    ctx = PromptContext.for_letter(1987, [], VOCAB, cues=CUES)
    assert cued_concepts(text, ctx) == expected


def test_no_cued_concept_forces_an_empty_list(good_letter, make_chunk):
    chunk = make_chunk(
        "1987-S1-T1-001",
        "Performance\n\nThe annual meeting is in Omaha in May.",
        0,
        section_title="Performance",
        section_hierarchy=["Letter Body", "Performance"],
    )
    model = response_model_for(chunk, ctx_for(good_letter))
    assert model.model_json_schema()["properties"]["buffett_concepts"]["maxItems"] == 0
    with pytest.raises(ValidationError):
        model.model_validate(narrative_answer(buffett_concepts=["intrinsic value"]))
    user = build_messages(chunk, ctx_for(good_letter))[1]["content"]
    # said after the quoted chunk, as what is asked of it
    asked = user.split(CLOSE)[1].splitlines()
    assert asked[-1] == "Candidate concepts: none (buffett_concepts: [])"


def test_hosted_mode_keeps_the_whole_vocabulary_and_names_the_candidate_concepts(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    ctx = PromptContext.for_letter(1987, ["Performance"], VOCAB, grounded_choices=False, cues=CUES)
    enum = response_model_for(s1, ctx).model_json_schema()["properties"]["buffett_concepts"]
    assert set(enum["items"]["enum"]) == VOCAB
    messages = build_messages(s1, ctx)
    assert all(c in messages[0]["content"] for c in VOCAB)
    checks = concept_choices(s1, ctx)
    assert checks[:2] == ["circle of competence", "intrinsic value"]
    # after the quoted chunk, best-ranked first (vocabulary names, not letter text)
    after = messages[1]["content"].split(CLOSE)[1]
    assert f"Candidate concepts (buffett_concepts: 0-3 of these): {'; '.join(checks)}" in after


def test_hosted_mode_quotes_titles_and_candidate_rule_sentences_inside_the_fence(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    titles = ["Performance", "Insurance Operations"]
    hosted = PromptContext.for_letter(1987, titles, VOCAB, grounded_choices=False, cues=CUES)
    user = build_messages(s1, hosted)[1]["content"]
    assert user.startswith(OPEN) and user.count(OPEN) == 1 and user.count(CLOSE) == 1
    quoted, after = user[len(OPEN) :].split(CLOSE)
    rules = rule_checks(s1)
    assert rules, "the chunk has candidate rule sentences"
    # everything taken from the letter is inside the fence: year, titles, own title, text, rules
    assert "Letter year: 1987" in quoted
    assert all(f"- {t}" in quoted for t in titles)
    assert "Section of this chunk: Performance" in quoted
    assert quoted_chunk(user) == s1.content
    listed = quoted.split("Candidate rule sentences (a principle's evidence is one of them):\n")[1]
    assert listed.strip().splitlines() == [f"- {r}" for r in rules]
    # after it only what is asked: the chunk's kind and the candidate concepts
    assert [line.split(":")[0] for line in after.strip().splitlines()] == [
        "Chunk kind",
        "Candidate concepts (buffett_concepts",
    ]
    assert not any(r in after for r in rules) and "Performance" not in after
    # under a grammar the schema offers the rules as evidence choices: the prompt lists none
    grounded = build_messages(s1, ctx_for(good_letter))[1]["content"]
    assert "Candidate rule sentences" not in grounded
    assert quoted_chunk(grounded) == s1.content


CONFESSION = "We have mistakenly predicted better results in each of the last two years."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Textiles\n\nThe mills ran at a loss again this year. {CONFESSION}", [CONFESSION]),
        (
            "I was wrong about the mills, and it cost us dearly. We should have sold the plant "
            "in 1980 when buyers were eager. Errors of omission hurt.",
            [
                "I was wrong about the mills, and it cost us dearly.",
                "We should have sold the plant in 1980 when buyers were eager.",
            ],
        ),  # 3 words: no choice
        (
            "The mills ran at a loss again this year. Terrors and mistakes of others aside, "
            "results were fine.",
            ["Terrors and mistakes of others aside, results were fine."],
        ),
        ("Terrors aside, the mills ran at a loss again this year.", []),  # word starts only
    ],
)
def test_confession_sentences(text, expected):
    assert confession_sentences(text) == expected


def test_confession_is_allowed_only_with_a_cue_sentence(good_letter, make_chunk):
    ctx = ctx_for(good_letter)
    plain = response_model_for(good_letter.chunk("1987-S1-T1-001"), ctx)
    types = plain.model_json_schema()["properties"]["content_type"]["enum"]
    assert types == ["narrative", "principle_statement"]
    with pytest.raises(ValidationError):
        plain.model_validate(narrative_answer(content_type="mistake_confession"))
    body = f"Textiles\n\nThe mills ran at a loss again this year, as they did before. {CONFESSION}"
    chunk = make_chunk(
        "1987-S1-T1-001",
        body,
        0,
        section_title="Textiles",
        section_hierarchy=["Letter Body", "Textiles"],
    )
    model = response_model_for(chunk, ctx)
    props = model.model_json_schema()["properties"]
    assert "mistake_confession" in props["content_type"]["enum"]
    assert props["content_type_evidence"]["items"]["enum"][0] == CONFESSION  # cue sentences first
    rule = rule_checks(chunk)[0]  # under a grammar at least one principle, on a candidate
    model.model_validate(
        narrative_answer(
            content_type="mistake_confession",
            content_type_evidence=[CONFESSION],
            principles=[{"statement": "A rule.", "category": "general", "evidence": rule}],
            buffett_concepts=[],
            comparison_years=[],
            related_sections_same_letter=[],
            entities={"companies": [], "people": [], "metrics": []},
        )
    )


def test_grounded_choices_offer_only_the_chunks_own_names_and_sentences(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    model = response_model_for(s1, ctx_for(good_letter))
    props = model.model_json_schema()
    defs = props["$defs"]
    items = defs["EnrichedEntities"]["properties"]["people"]["items"]
    people = items.get("enum", [items.get("const")])
    assert "Charlie Munger" in people and all(n in s1.content for n in people)
    quotes = props["properties"]["content_type_evidence"]["items"]["enum"]
    assert QUOTE in quotes
    flat = " ".join(s1.content.split())
    assert all(q in flat and len(q.split()) >= 5 for q in quotes)
    with pytest.raises(ValidationError):
        model.model_validate(
            narrative_answer(entities={"companies": ["Enron"], "people": [], "metrics": []})
        )
    with pytest.raises(ValidationError):
        model.model_validate(narrative_answer(content_type_evidence=["Not in the text at all."]))
    # without a grammar (hosted tool calls) names and quotes are free text, checked by validate
    free = response_model_for(
        s1,
        PromptContext.for_letter(
            1987, ["Performance", "Insurance Operations"], VOCAB, grounded_choices=False, cues=CUES
        ),
    )
    free.model_validate(
        narrative_answer(entities={"companies": ["Enron"], "people": [], "metrics": []})
    )


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "Textile Operations\n\nThe mills at New Bedford and Manchester were slow.",
            ["Textile Operations", "New Bedford and Manchester", "New Bedford", "Manchester"],
        ),
        (
            "Results at GEICO, led by Tony Nicely’s team, beat Phil Liesche. Recently we sold.",
            ["GEICO", "Tony Nicely", "Phil Liesche"],
        ),
        (
            "So Charlie and I met Warren E. Buffett\nin Omaha.",
            ["Charlie", "Warren E. Buffett", "Omaha"],
        ),
    ],
)
def test_name_candidates(text, names):
    from letterchunk.enrich import name_candidates

    assert name_candidates(text) == names


def test_table_model_has_one_entry_per_table(good_letter):
    t3 = good_letter.chunk("1987-S2-T3-001")
    model = response_model_for(t3, ctx_for(good_letter))
    assert issubclass(model, TableEnrichment)
    assert "content_type" not in model.model_fields and "principles" not in model.model_fields
    answer = {
        k: v
        for k, v in narrative_answer(
            buffett_concepts=["float economics"],
            related_sections_same_letter=["Performance"],
            entities={"companies": ["GEICO"], "people": [], "metrics": ["float"]},
        ).items()
        if k in model.model_fields
    }
    with pytest.raises(ValidationError):
        model.model_validate(answer | {"tables": []})
    e = model.model_validate(
        answer | {"tables": [{"table_name": "Insurance Results", "summary": "Results by unit."}]}
    )
    out = apply_enrichment(t3, e)
    table, old = out.metadata.table_data[0], t3.metadata.table_data[0]
    assert (table.table_name, table.summary) == ("Insurance Results", "Results by unit.")
    assert (table.columns, table.rows, table.row_count) == (old.columns, old.rows, old.row_count)
    assert out.metadata.content_type == "financial_table"
    assert evidence_record(t3.chunk_id, e) == {
        "chunk_id": t3.chunk_id,
        "content_type_evidence": [],
        "principle_evidence": [],
    }


def test_messages_put_fixed_instructions_first_and_the_quoted_letter_next(good_letter):
    ctx = ctx_for(good_letter)
    s1, s2 = good_letter.chunks[:2]
    m1, m2 = build_messages(s1, ctx), build_messages(s2, ctx)
    assert [m["role"] for m in m1] == ["system", "user"]
    assert m1[0] == m2[0]  # identical system prompt: the server reuses the cached prefix
    assert quoted_chunk(m1[1]["content"]) == s1.content
    for concept in VOCAB:
        assert concept in m1[0]["content"]
    assert "- Insurance Operations" in m1[1]["content"].split(CLOSE)[0]
    # letter-level lines come before anything chunk-specific
    prefix = m1[1]["content"].split("Section of this chunk:")[0]
    assert prefix.startswith(OPEN) and "Letter year: 1987" in prefix
    assert prefix == m2[1]["content"].split("Section of this chunk:")[0]


def test_vocabulary_order_does_not_depend_on_set_order(good_letter):
    a = PromptContext.for_letter(1987, ["X"], frozenset(["b", "a", "c"]))
    b = PromptContext.for_letter(1987, ["X"], frozenset(["c", "b", "a"]))
    assert a.vocabulary == b.vocabulary == ("a", "b", "c")


def test_apply_touches_only_semantic_fields_and_validates(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    model = response_model_for(s1, ctx_for(good_letter))
    e = model.model_validate(narrative_answer())
    out = apply_enrichment(s1, e)
    before, after = s1.metadata.model_dump(), out.metadata.model_dump()
    changed = {k for k in before if before[k] != after[k]}
    assert changed <= {
        "contextual_summary",
        "themes",
        "buffett_concepts",
        "entities",
        "principles",
        "content_type",
        "has_financial_data",
        "retrieval_priority",
        "abstraction_level",
        "temporal_references",
        "cross_references",
    }
    assert out.chunk_id == s1.chunk_id and out.content == s1.content
    assert after["temporal_references"]["primary_year"] == 1987
    assert after["principles"] == [
        {"statement": "Invest only in businesses you understand.", "category": "valuation"}
    ]
    record = evidence_record(s1.chunk_id, e)
    assert record == {
        "chunk_id": s1.chunk_id,
        "content_type_evidence": [QUOTE],
        "principle_evidence": [QUOTE],
    }
    json.dumps(record)
    ctx = LetterContext(
        cleaned_text=good_letter.text,
        section_titles=["Performance", "Insurance Operations"],
        vocabulary=VOCAB,
        evidence={s1.chunk_id: record},
    )
    errors = [
        v for v in validate_chunk(out, stage="enriched", context=ctx) if v.severity == "error"
    ]
    assert errors == []


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        (
            "Results fell. Textiles lost money. We expect a reasonably good year and its 1977,",
            "Results fell. Textiles lost money.",
        ),  # cut by the length cap: fragment dropped
        ("Results fell. Textiles lost money.", "Results fell. Textiles lost money."),
        ("Results fell in 1977", "Results fell in 1977"),  # nothing complete to keep
        ('He said "we erred." ', 'He said "we erred."'),
    ],
)
def test_apply_drops_an_unfinished_last_summary_sentence(good_letter, summary, expected):
    from letterchunk.enrich import complete_sentences

    assert complete_sentences(summary) == expected
    s1 = good_letter.chunk("1987-S1-T1-001")
    # the hosted model: without a grammar the summary is a free string (no sentence pattern)
    hosted = PromptContext.for_letter(
        1987, ["Performance", "Insurance Operations"], VOCAB, grounded_choices=False, cues=CUES
    )
    e = response_model_for(s1, hosted).model_validate(narrative_answer(contextual_summary=summary))
    assert apply_enrichment(s1, e).metadata.contextual_summary == expected


def test_apply_drops_repeated_concepts(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    e = response_model_for(s1, ctx_for(good_letter)).model_validate(
        narrative_answer(
            buffett_concepts=["intrinsic value", "intrinsic value", "circle of competence"]
        )
    )
    assert apply_enrichment(s1, e).metadata.buffett_concepts == [
        "intrinsic value",
        "circle of competence",
    ]


def test_apply_never_touches_mechanical_fields_even_for_a_repair_subset(good_letter):
    t3 = good_letter.chunk("1987-S2-T3-001")
    model = response_model_for(t3, ctx_for(good_letter))

    class Subset(model.__base__.__base__):  # a repair model with one field only
        themes: list[str]

    out = apply_enrichment(t3, Subset(themes=["insurance"]))
    assert out.metadata.themes == ["insurance"]
    assert out.model_dump(exclude={"metadata": {"themes"}}) == t3.model_dump(
        exclude={"metadata": {"themes"}}
    )


def test_apply_drops_repeats_in_every_list_field(good_letter):
    s1 = good_letter.chunk("1987-S1-T1-001")
    e = response_model_for(s1, ctx_for(good_letter)).model_validate(
        narrative_answer(
            themes=["performance", "performance"],
            related_sections_same_letter=["Insurance Operations", "Insurance Operations"],
            related_years=[1986, 1986],
            comparison_years=[1986, 1986],
        )
    )
    meta = apply_enrichment(s1, e).metadata
    assert meta.themes == ["performance"]
    assert meta.cross_references.related_sections_same_letter == ["Insurance Operations"]
    assert meta.cross_references.related_years == [1986]
    assert meta.temporal_references.comparison_years == [1986]
