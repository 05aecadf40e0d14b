"""repair: mechanical fixes by code, and re-asks that name only the failing fields.

The re-ask tests talk to a real local HTTP server (tests/fake_openai.py) through the real
LLMClient, and assert on the request bodies the server recorded.
"""

from __future__ import annotations

import copy
import json

import pytest

from answers import QUOTE, narrative_answer
from fake_openai import FakeOpenAI, answer
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import LetterContext, Violation, validate_chunk
from letterchunk.enrich import PromptContext, build_messages, response_model_for
from letterchunk.errors import RepairExhausted
from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.repair.fixers import mechanical_fixes
from letterchunk.repair.normalise import normalize_record
from letterchunk.repair.reask import (
    fields_for,
    partial_model,
    reask_messages,
    repair_enriched,
)
from letterchunk.report.records import AttemptRecord, RepairReport

VOCAB = frozenset(
    {"float economics", "circle of competence", "intrinsic value", "underwriting discipline"}
)
TITLES = ["Performance", "Insurance Operations"]
S1 = "1987-S1-T1-001"
T3 = "1987-S2-T3-001"


def _enriched_errors(result, letter) -> list:
    """Error-level violations of a repaired chunk at stage enriched, its evidence included."""
    context = LetterContext(
        cleaned_text=letter.text,
        section_titles=list(TITLES),
        vocabulary=VOCAB,
        evidence={S1: result.evidence},
    )
    return [
        v
        for v in validate_chunk(result.chunk, stage="enriched", context=context)
        if v.severity == "error"
    ]


def vctx(letter, evidence=None) -> LetterContext:
    return LetterContext(
        cleaned_text=letter.text,
        section_titles=list(TITLES),
        vocabulary=VOCAB,
        evidence=letter.evidence if evidence is None else evidence,
    )


def codes(chunk: Chunk, ctx: LetterContext) -> set[str]:
    return {v.code for v in validate_chunk(chunk, stage="enriched", context=ctx)}


def mutate(chunk: Chunk, edit) -> Chunk:
    data = chunk.model_dump(mode="json")
    edit(data["metadata"])
    return Chunk.model_validate(data)


# ----------------------------------------------------------------- mechanical fixes


def _shift_span(md):
    md["source_span"]["start_char"] += 3
    md["source_span"]["end_char_exclusive"] += 3


MECHANICAL = [
    # (case, chunk, edit, rule the validator raises, fields the fix changes, fix restores original)
    (
        "char-count",
        S1,
        lambda md: md.update(char_count=7),
        "count.chars",
        {"metadata.char_count"},
        True,
    ),
    (
        "token-count",
        S1,
        lambda md: md.update(token_count=9),
        "count.tokens",
        {"metadata.token_count"},
        True,
    ),
    (
        "tier-vs-id",
        S1,
        lambda md: md.update(chunk_tier=2),
        "id.tier_mismatch",
        {"metadata.chunk_tier"},
        True,
    ),
    (
        "has-table-flag",
        S1,
        lambda md: md.update(has_table=True),
        "table.has_table_mismatch",
        {"metadata.has_table"},
        True,
    ),
    (
        "row-count",
        T3,
        lambda md: md["table_data"][0].update(row_count=5),
        "table.row_count",
        {"metadata.table_data"},
        True,
    ),
    (
        "t3-content-type",
        T3,
        lambda md: md.update(content_type="narrative"),
        "content_type.t3_not_table",
        {"metadata.content_type"},
        True,
    ),
    (
        "exception-priority",
        S1,
        lambda md: md.update(
            standalone_exception=True,
            exception_reason="A compact principle.",
            retrieval_priority="low",
        ),
        "exception.priority",
        {"metadata.retrieval_priority"},
        False,
    ),
    (
        "concept-case",
        S1,
        lambda md: md.update(buffett_concepts=["Intrinsic  Value", "circle of competence"]),
        "concept.case",
        {"metadata.buffett_concepts"},
        True,
    ),
    (
        "primary-year",
        S1,
        lambda md: md["temporal_references"].update(primary_year=1990),
        "year.primary_mismatch",
        {"metadata.temporal_references.primary_year"},
        True,
    ),
    ("span", S1, _shift_span, "span.content_mismatch", {"metadata.source_span"}, True),
    (
        "blank-note",
        S1,
        lambda md: md.update(boundary_note=""),
        "note.blank",
        {"metadata.boundary_note"},
        True,
    ),
    (
        "t1-parent",
        S1,
        lambda md: md.update(parent_chunk_id="1987-S2-T1-001"),
        "link.t1_parent",
        {"metadata.parent_chunk_id"},
        True,
    ),
    (
        "leaf-children",
        T3,
        lambda md: md.update(child_chunk_ids=["1987-S1-T1-001"]),
        "link.leaf_children",
        {"metadata.child_chunk_ids"},
        True,
    ),
    (
        "duplicate-theme",
        S1,
        lambda md: md.update(themes=["performance", "performance", "investment philosophy"]),
        "list.duplicate",
        {"metadata.themes"},
        True,
    ),
    (
        "financial-flag",
        T3,
        lambda md: md.update(has_financial_data=False),
        "table.financial_flag",
        {"metadata.has_financial_data"},
        True,
    ),
    (
        "unknown-date",
        S1,
        lambda md: md.update(letter_date="0000-00-00"),
        "date.unknown",
        {"metadata.boundary_note"},
        False,
    ),
]


@pytest.mark.parametrize(
    ("chunk_id", "edit", "rule", "changed", "restores"),
    [c[1:] for c in MECHANICAL],
    ids=[c[0] for c in MECHANICAL],
)
def test_mechanical_fix(enriched_letter, chunk_id, edit, rule, changed, restores):
    ctx = vctx(enriched_letter)
    good = enriched_letter.chunk(chunk_id)
    assert not {c for c in codes(good, ctx)} & {rule}
    broken = mutate(good, edit)
    before = broken.model_dump(mode="json")
    assert rule in codes(broken, ctx)  # the validator sees the problem ...

    fixed, changes = mechanical_fixes(broken, ctx)

    assert {c.field for c in changes} == changed  # ... code fixes exactly those fields ...
    assert all(c.by == "code" and c.before != c.after for c in changes)
    assert rule not in codes(fixed, ctx)
    if restores:
        assert fixed == good
    assert broken.model_dump(mode="json") == before  # pure: the input is untouched
    assert mechanical_fixes(fixed, ctx) == (fixed, [])  # idempotent


def test_mechanical_fix_leaves_judgement_alone(enriched_letter):
    """Unknown concepts and a table type on a Tier-1 chunk need the model: code keeps them."""
    ctx = vctx(enriched_letter)
    broken = mutate(
        enriched_letter.chunk(S1),
        lambda md: md.update(
            buffett_concepts=["intrinsic value", "dividend magic"], content_type="financial_table"
        ),
    )
    fixed, changes = mechanical_fixes(broken, ctx)
    assert changes == [] and fixed == broken
    assert {"concept.unknown", "content_type.table_outside_t3"} <= codes(fixed, ctx)


def test_span_is_not_moved_when_the_content_is_ambiguous(good_letter, make_chunk):
    text = "Same words here. " * 40
    chunk = make_chunk("1987-S1-T1-001", text[:17], 5)  # the content occurs 40 times
    ctx = LetterContext(cleaned_text=text)
    fixed, changes = mechanical_fixes(chunk, ctx)
    assert "metadata.source_span" not in {c.field for c in changes}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["metadata"].pop("themes"), {"metadata.themes": []}),
        (lambda d: d["metadata"].update(table_data=None), {"metadata.table_data": []}),
        (lambda d: d["metadata"].update(has_table="false"), {"metadata.has_table": False}),
        (lambda d: d["metadata"].update(char_count="12"), {"metadata.char_count": 12}),
        (lambda d: d.update(score=0.9), {"score": None}),
        (
            lambda d: d["metadata"].pop("letter_date"),
            {"metadata.letter_date": "0000-00-00", "metadata.boundary_note": "letter date unknown"},
        ),
    ],
    ids=["missing-list", "null-list", "string-bool", "string-int", "extra-key", "missing-date"],
)
def test_normalize_record_fixes_shape_and_records_it(enriched_letter, edit, expected):
    raw = enriched_letter.chunk(S1).model_dump(mode="json")
    edit(raw)
    snapshot = copy.deepcopy(raw)
    fixed, changes = normalize_record(raw)
    assert {c.field: c.after for c in changes} == expected
    assert raw == snapshot
    Chunk.model_validate(fixed)  # loads in the strict schema again


# ----------------------------------------------------------------- fields and models


@pytest.mark.parametrize(
    ("code", "fld", "expected"),
    [
        ("concept.unknown", "metadata.buffett_concepts.1", ["buffett_concepts"]),
        ("entity.not_found", "metadata.entities.companies.0", ["entities"]),
        (
            "year.comparison_not_found",
            "metadata.temporal_references.comparison_years.0",
            ["comparison_years"],
        ),
        (
            "xref.unknown_section",
            "metadata.cross_references.related_sections_same_letter.0",
            ["related_sections_same_letter"],
        ),
        ("evidence.principle_not_found", "evidence.principle_evidence.1", ["principles"]),
        ("evidence.not_found", "evidence.content_type_evidence.0", ["content_type_evidence"]),
        ("evidence.missing", "metadata.content_type", ["content_type", "content_type_evidence"]),
        ("summary.sentences", "metadata.contextual_summary", ["contextual_summary"]),
        ("count.chars", "metadata.char_count", []),
    ],
)
def test_violation_maps_to_the_answer_fields_behind_it(code, fld, expected):
    from letterchunk.enrich import Enrichment

    v = Violation(code=code, severity="error", message="m", chunk_id=S1, field=fld)
    assert fields_for(v, Enrichment) == expected


def test_partial_model_keeps_the_per_chunk_narrowing(good_letter):
    s1 = good_letter.chunk(S1)
    model = response_model_for(s1, PromptContext.for_letter(1987, TITLES, VOCAB))
    part = partial_model(["buffett_concepts", "retrieval_priority"], model)
    schema = part.model_json_schema()
    assert set(schema["properties"]) == {"buffett_concepts", "retrieval_priority"}
    assert set(schema["required"]) == {"buffett_concepts", "retrieval_priority"}
    with pytest.raises(ValueError):
        part.model_validate({"buffett_concepts": ["dividend magic"], "retrieval_priority": "high"})


def test_reask_messages_is_a_deep_copy():
    caller = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    snapshot = copy.deepcopy(caller)
    v = Violation(
        code="concept.unknown",
        severity="error",
        message="not listed",
        chunk_id=S1,
        field="metadata.buffett_concepts.0",
    )
    out = reask_messages(caller, '{"x": 1}', ["buffett_concepts"], [v])
    out[0]["content"] = "changed"
    assert caller == snapshot
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[2]["content"] == '{"x": 1}'


# ----------------------------------------------------------------- re-ask over HTTP


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def client_for(server) -> LLMClient:
    settings = LLMSettings.from_env(
        env={},
        base_url=server.base_url,
        model="fake-model",
        mode="JSON_SCHEMA",
        timeout_s=2,
        transport_retries=2,
        backoff_base_s=0.01,
        backoff_cap_s=0.02,
    )
    return LLMClient(settings, sleep=lambda s: None)


def start(good_letter, server, first_answer, *, grounded=False):
    """Send the real first request for S1; return what repair_enriched needs.

    ``grounded=False`` is the hosted (tool-calling) prompt: names and quotes are free strings,
    so the validator is what finds an ungrounded one.  ``True`` is the grammar-backed prompt,
    where they are enums and an ungrounded one fails the schema.
    """
    chunk = good_letter.chunk(S1)
    pctx = PromptContext.for_letter(1987, TITLES, VOCAB, grounded_choices=grounded)
    model = response_model_for(chunk, pctx)
    messages = build_messages(chunk, pctx)
    client = client_for(server)
    server.enqueue(answer(first_answer))
    first = client.complete(messages, model, chunk_id=S1)
    ctx = LetterContext(
        cleaned_text=good_letter.text, section_titles=list(TITLES), vocabulary=VOCAB
    )
    return chunk, messages, model, first, client, ctx


ENRICHMENT_FIELDS = set(narrative_answer())


def mentioned_fields(text: str) -> set[str]:
    return {f for f in ENRICHMENT_FIELDS if f in text}


def test_reask_names_only_the_failing_fields(good_letter, server, tmp_path):
    bad = narrative_answer(
        principles=[
            {
                "statement": "Invest only in businesses you understand.",
                "category": "valuation",
                "evidence": "We always buy whatever is cheapest.",
            }
        ],
        entities={"companies": [], "people": ["Ben Graham"], "metrics": []},  # not in the text
    )
    chunk, messages, model, first, client, ctx = start(good_letter, server, bad)
    caller_messages = copy.deepcopy(messages)
    server.enqueue(
        answer(
            {
                "principles": [
                    {
                        "statement": "Invest only in businesses you understand.",
                        "category": "valuation",
                        "evidence": QUOTE,
                    }
                ],
                "entities": {"companies": [], "people": ["Charlie Munger"], "metrics": []},
                "themes": ["must not be taken"],  # an extra key is ignored, never applied
            }
        )
    )
    report = RepairReport(tmp_path / "1987.report.jsonl")

    result = repair_enriched(
        chunk,
        messages=messages,
        first=first,
        context=ctx,
        client=client,
        model=model,
        report=report,
    )

    assert result.outcome == "repaired" and result.attempts == 2
    assert messages == caller_messages  # the caller's conversation is untouched
    # the re-ask request, as the server received it
    body = server.chat_requests[1].body
    sent = body["messages"]
    assert sent[: len(messages)] == messages  # the original conversation, unchanged
    assert sent[len(messages)] == {"role": "assistant", "content": first.raw_text}
    reask = sent[-1]
    assert reask["role"] == "user" and len(sent) == len(messages) + 2
    assert mentioned_fields(reask["content"]) == {"principles", "entities"}
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"principles", "entities"}
    # only those fields were taken from the answer
    md = result.chunk.metadata
    assert md.entities.people == ["Charlie Munger"]
    assert md.themes == ["performance"]
    assert result.evidence["principle_evidence"] == [QUOTE]
    assert _enriched_errors(result, good_letter) == []
    # the report: one record per model call, usage summed over both = what the server served
    lines = [json.loads(x) for x in (tmp_path / "1987.report.jsonl").read_text().splitlines()]
    assert [r["attempt"] for r in lines] == [1, 2]
    assert [r["outcome"] for r in lines] == ["retry", "repaired"]
    assert {v["code"] for v in lines[0]["violations"]} == {
        "evidence.principle_not_found",
        "entity.not_found",
    }
    assert {c["field"] for c in lines[1]["changes"]} == {"answer.principles", "answer.entities"}
    served = server.usage_total
    assert sum(r["usage"]["prompt_tokens"] for r in lines) == served.prompt_tokens
    assert sum(r["usage"]["completion_tokens"] for r in lines) == served.completion_tokens
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (
        served.prompt_tokens,
        served.completion_tokens,
    )


def test_grammar_mode_ungrounded_name_fails_the_schema_and_only_it_is_asked(good_letter, server):
    ghost = {"companies": [], "people": ["Ben Graham"], "metrics": []}
    chunk, messages, model, first, client, ctx = start(
        good_letter, server, narrative_answer(entities=ghost), grounded=True
    )
    assert first.value is None and first.error
    server.enqueue(
        answer({"entities": {"companies": [], "people": ["Charlie Munger"], "metrics": []}})
    )
    result = repair_enriched(
        chunk, messages=messages, first=first, context=ctx, client=client, model=model
    )
    assert result.outcome == "repaired" and result.chunk.metadata.entities.people == [
        "Charlie Munger"
    ]
    assert [v.code for v in result.records[0].violations] == ["response.schema"]
    assert result.records[0].violations[0].field == "entities"
    body = server.chat_requests[1].body
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {"entities"}
    # the answer's other fields were kept from the first, schema-invalid answer
    assert (
        result.chunk.metadata.principles[0].statement == "Invest only in businesses you understand."
    )


@pytest.mark.parametrize("grounded", [False, True], ids=["hosted", "grammar"])
def test_schema_invalid_field_is_salvaged_and_only_it_is_asked(good_letter, server, grounded):
    chunk, messages, model, first, client, ctx = start(
        good_letter, server, narrative_answer(retrieval_priority="urgent"), grounded=grounded
    )
    assert first.value is None and first.error
    server.enqueue(answer({"retrieval_priority": "high"}))
    result = repair_enriched(
        chunk, messages=messages, first=first, context=ctx, client=client, model=model
    )
    assert result.outcome == "repaired" and result.chunk.metadata.retrieval_priority == "high"
    body = server.chat_requests[1].body
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {
        "retrieval_priority"
    }
    assert mentioned_fields(body["messages"][-1]["content"]) == {"retrieval_priority"}


def test_exhausted_halts_with_the_records_and_skip_returns_nothing(good_letter, server, tmp_path):
    # a tag without the quote behind it: no list item to drop, only the model can fix it
    unquoted = {"content_type": "principle_statement", "content_type_evidence": []}
    bad = narrative_answer(**unquoted)
    for on_failure in ("halt", "skip"):
        chunk, messages, model, first, client, ctx = start(good_letter, server, bad)
        server.enqueue(answer(unquoted), answer(unquoted))
        report = RepairReport(tmp_path / f"{on_failure}.report.jsonl")
        kwargs = dict(
            messages=messages,
            first=first,
            context=ctx,
            client=client,
            model=model,
            max_attempts=2,
            on_failure=on_failure,
            report=report,
        )
        if on_failure == "halt":
            with pytest.raises(RepairExhausted) as err:
                repair_enriched(chunk, **kwargs)
            assert err.value.chunk_id == S1 and err.value.attempts == 3
            assert {v.code for v in err.value.violations} == {"evidence.missing"}
            assert [r.outcome for r in err.value.records] == ["retry", "retry", "failed"]
        else:
            result = repair_enriched(chunk, **kwargs)
            assert result.outcome == "failed" and result.chunk is None and result.evidence is None
        lines = [json.loads(x) for x in report.path.read_text().splitlines()]
        assert lines[-1]["outcome"] == "failed" and lines[-1]["content"] == chunk.content
    assert server.pending == 0


# ----------------------------------------------------------------- letterchunk repair FILE


def _break_file(enriched_letter, write_letter, folder):
    """1987 files with one mechanical break (S2 char_count) and one semantic break (S1 entity)."""
    letter = copy.deepcopy(enriched_letter)
    letter.chunks[1] = mutate(letter.chunks[1], lambda md: md.update(char_count=1))
    letter.chunks[0] = mutate(
        letter.chunks[0], lambda md: md["entities"].update(people=["Charlie Munger", "Ben Graham"])
    )
    return write_letter(letter, folder)


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_repair_file_without_backend_fixes_code_and_lists_what_needs_the_llm(
    enriched_letter, write_letter, tmp_path, capsys
):
    from letterchunk.cli import main

    path = _break_file(enriched_letter, write_letter, tmp_path)
    assert main(["repair", str(path)]) == 1
    chunks = {c["chunk_id"]: c for c in _lines(path)}
    assert chunks["1987-S2-T1-001"]["metadata"]["char_count"] == len(
        chunks["1987-S2-T1-001"]["content"]
    )
    assert "Ben Graham" in chunks[S1]["metadata"]["entities"]["people"]  # kept, not dropped
    records = {r["chunk_id"]: r for r in _lines(tmp_path / "1987.report.jsonl")}
    assert records["1987-S2-T1-001"]["outcome"] == "repaired"
    assert [c["field"] for c in records["1987-S2-T1-001"]["changes"]] == ["metadata.char_count"]
    assert records[S1]["outcome"] == "needs-llm" and records[S1]["asked_fields"] == ["entities"]
    assert records[T3]["outcome"] == "valid"
    err = capsys.readouterr().err
    assert f"{S1}: needs the LLM for entities" in err and "OPENAI_BASE_URL" in err


def test_repair_file_with_backend_reasks_only_the_failing_field(
    enriched_letter, write_letter, tmp_path, server, monkeypatch
):
    from letterchunk.cli import main
    from letterchunk.contract.validate import validate_path

    path = _break_file(enriched_letter, write_letter, tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-dummy")
    monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
    server.enqueue(
        answer(
            {"entities": {"companies": [], "people": ["Charlie Munger"], "metrics": ["book value"]}}
        )
    )
    assert main(["repair", str(path), "--cache", "off", "--quiet"]) == 0
    assert server.chat_count == 1 and server.pending == 0
    body = server.chat_requests[0].body
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {"entities"}
    assert mentioned_fields(body["messages"][-1]["content"]) == {"entities"}
    chunks = {c["chunk_id"]: c for c in _lines(path)}
    assert chunks[S1]["metadata"]["entities"]["people"] == ["Charlie Munger"]
    assert not [v for v in validate_path(path, stage="enriched") if v.severity == "error"]
    records = [r for r in _lines(tmp_path / "1987.report.jsonl") if r["chunk_id"] == S1]
    assert [(r["kind"], r["outcome"]) for r in records] == [
        ("file", "retry"),
        ("reask", "repaired"),
    ]
    served = server.usage_total
    assert records[1]["usage"] == {
        "prompt_tokens": served.prompt_tokens,
        "completion_tokens": served.completion_tokens,
    }


def test_write_letter_report_counts_every_chunk_and_the_halting_one(enriched_letter, tmp_path):
    from letterchunk.llm.client import Usage
    from letterchunk.report.records import write_letter_report
    from letterchunk.runner.pipeline import ChunkOutcome, LetterOutcome

    live = ChunkOutcome(S1, enriched_letter.chunk(S1), {}, Usage(10, 2, 1), 1, 0)
    cached = ChunkOutcome(T3, enriched_letter.chunk(T3), {}, Usage(), 1, 1)
    halt = RepairExhausted("1987-S2-T1-001", 3, [], Usage(7, 1, 3))
    halt.records = [
        AttemptRecord(
            "1987-S2-T1-001",
            1987,
            a,
            "enrich" if a == 1 else "reask",
            o,
            source="live",
            prompt_tokens=7,
            completion_tokens=1,
        )
        for a, o in ((1, "retry"), (2, "retry"), (3, "failed"))
    ]
    outcome = LetterOutcome(1987, [live.chunk, cached.chunk], [live, cached], [])

    path = write_letter_report(tmp_path, 1987, outcome, halt, source="cassette")

    assert path == tmp_path / "1987.report.jsonl"
    lines = _lines(path)
    assert [(r["chunk_id"], r["attempt"], r["outcome"], r["source"]) for r in lines] == [
        (S1, 1, "valid", "cassette"),
        (T3, 1, "valid", "cache"),
        ("1987-S2-T1-001", 1, "retry", "cassette"),
        ("1987-S2-T1-001", 2, "retry", "cassette"),
        ("1987-S2-T1-001", 3, "failed", "cassette"),
    ]
    assert sum(r["usage"]["prompt_tokens"] for r in lines) == 10 + 3 * 7


# ----------------------------------------------------------------- property: fixes settle

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SEMANTIC_KEYS = (
    "contextual_summary",
    "themes",
    "entities",
    "principles",
    "abstraction_level",
    "cross_references",
    "temporal_references",
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk_id=st.sampled_from([S1, T3]),
    char_count=st.integers(0, 10_000),
    token_count=st.integers(0, 5_000),
    tier=st.sampled_from([1, 2, 3]),
    has_table=st.booleans(),
    exception=st.booleans(),
    priority=st.sampled_from(["low", "medium", "high"]),
    note=st.sampled_from([None, "", " "]),
    shift=st.integers(-5, 5),
)
def test_mechanical_fixes_settle_in_one_pass(
    enriched_letter,
    chunk_id,
    char_count,
    token_count,
    tier,
    has_table,
    exception,
    priority,
    note,
    shift,
):
    ctx = vctx(enriched_letter)
    good = enriched_letter.chunk(chunk_id)

    def edit(md):
        md.update(
            char_count=char_count,
            token_count=token_count,
            chunk_tier=tier,
            has_table=has_table,
            standalone_exception=exception,
            exception_reason="A compact unit." if exception else None,
            retrieval_priority=priority,
            boundary_note=note,
        )
        md["source_span"]["start_char"] = max(0, md["source_span"]["start_char"] + shift)
        md["source_span"]["end_char_exclusive"] = max(
            1, md["source_span"]["end_char_exclusive"] + shift
        )

    broken = mutate(good, edit)
    fixed, _ = mechanical_fixes(broken, ctx)
    assert mechanical_fixes(fixed, ctx) == (fixed, [])
    left = {
        v.code
        for v in validate_chunk(fixed, stage="enriched", context=ctx)
        if v.severity == "error" and v.kind == "mechanical"
    }
    assert not left
    md, gm = fixed.metadata, good.metadata
    for key in SEMANTIC_KEYS:  # code never touches what the model answered
        assert getattr(md, key) == getattr(gm, key)


# ------------------------------------------------------------- rejected values leave the grammar


def _insisting(favourite: dict):
    """A model under a grammar that insists on its favourite values: it answers a favourite
    while the request's schema still offers it, else the first value the schema offers."""
    from fake_openai import response_schema

    def respond(request: dict) -> dict:
        schema = response_schema(request)
        out = {}
        for name, prop in schema["properties"].items():
            choices = prop.get("items", {}).get("enum") or (
                [prop["items"]["const"]] if "const" in prop.get("items", {}) else []
            )
            want = favourite.get(name, narrative_answer()[name])
            out[name] = [v for v in want if v in choices] or choices[:1]
        return out

    return respond


def test_reask_grammar_no_longer_offers_a_rejected_value(good_letter):
    # the prompt offers a section the validator does not know (a stale title list): the model
    # picks it, the validator rejects it, and the re-ask's enum must leave it out
    chunk = good_letter.chunk(S1)
    stale = "Textile Operations"
    pctx = PromptContext.for_letter(1987, [*TITLES, stale], VOCAB)
    model = response_model_for(chunk, pctx)
    messages = build_messages(chunk, pctx)
    favourite = {"related_sections_same_letter": [stale]}
    with FakeOpenAI(default=_insisting(favourite)) as server:
        server.enqueue(answer(narrative_answer(related_sections_same_letter=[stale])))
        client = client_for(server)
        first = client.complete(messages, model, chunk_id=S1)
        ctx = LetterContext(
            cleaned_text=good_letter.text, section_titles=list(TITLES), vocabulary=VOCAB
        )
        result = repair_enriched(
            chunk, messages=messages, first=first, context=ctx, client=client, model=model
        )
        first_schema = server.chat_requests[0].body["response_format"]["json_schema"]["schema"]
        reask_schema = server.chat_requests[1].body["response_format"]["json_schema"]["schema"]
    assert stale in json.dumps(first_schema)
    assert set(reask_schema["properties"]) == {"related_sections_same_letter"}
    assert stale not in json.dumps(reask_schema)
    assert result.outcome == "repaired" and result.attempts == 2
    assert result.chunk.metadata.cross_references.related_sections_same_letter == [
        "Insurance Operations"
    ]


def test_partial_model_excludes_rejected_values_everywhere_in_a_field(good_letter):
    chunk = good_letter.chunk(S1)
    model = response_model_for(chunk, PromptContext.for_letter(1987, TITLES, VOCAB))
    names = model.model_fields["entities"].annotation.model_fields["people"].annotation
    offered = set(names.__args__[0].__args__)
    assert "Charlie Munger" in offered
    part = partial_model(
        ["entities", "principles"], model, {"entities": {"Charlie Munger"}, "principles": {QUOTE}}
    )
    defs = part.model_json_schema()["$defs"]
    assert "Charlie Munger" not in json.dumps(defs["EnrichedEntities"])  # companies and people
    assert QUOTE in json.dumps(model.model_json_schema()["$defs"]["EnrichedPrinciple"])
    assert QUOTE not in json.dumps(defs["EnrichedPrinciple"])
    with pytest.raises(ValueError):
        part.model_validate(
            {
                "entities": {"companies": [], "people": ["Charlie Munger"], "metrics": []},
                "principles": [],
            }
        )


def test_items_still_rejected_after_the_reasks_are_dropped_and_recorded(
    good_letter, server, tmp_path
):
    ghost = {"companies": [], "people": ["Ben Graham", "Charlie Munger"], "metrics": []}
    chunk, messages, model, first, client, ctx = start(
        good_letter, server, narrative_answer(entities=ghost)
    )
    server.enqueue(answer({"entities": ghost}), answer({"entities": ghost}))
    report = RepairReport(tmp_path / "1987.report.jsonl")
    result = repair_enriched(
        chunk,
        messages=messages,
        first=first,
        context=ctx,
        client=client,
        model=model,
        max_attempts=2,
        on_failure="halt",
        report=report,
    )
    assert result.outcome == "repaired" and result.attempts == 3
    assert result.chunk.metadata.entities.people == ["Charlie Munger"]  # only the bad one went
    assert _enriched_errors(result, good_letter) == []
    last = [json.loads(x) for x in report.path.read_text().splitlines()][-1]
    assert last["outcome"] == "repaired"
    assert {
        "field": "metadata.entities.people",
        "before": ["Ben Graham", "Charlie Munger"],
        "after": ["Charlie Munger"],
        "by": "code",
    } in last["changes"]
    assert [v["code"] for v in last["violations"]] == ["entity.not_found"]
    assert all(v["fixed"] for v in last["violations"])
