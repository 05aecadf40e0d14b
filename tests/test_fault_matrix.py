"""The fault matrix: every fault a backend can throw at `letterchunk run`, end to end.

Each row starts a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/fake_openai.py),
points the real CLI at it (``OPENAI_BASE_URL``, a dummy key) and runs
``letterchunk run corpus/letters/1977.txt``.  The server answers every request with a valid,
grounded enrichment built from the request's own response schema, except the requests the row
scripts for the *target* chunk (the letter's second chunk, so one valid chunk is already done
when a halting row stops).

Asserted for every row:
* the exit code and the target chunk's outcome (valid / repaired within N model calls with the
  right answer fields changed / halted or skipped with the report naming the chunk);
* transport faults (429 with Retry-After, 500, a hang past the timeout, a reset) are retried
  below the repair loop and never show up as repair attempts;
* token usage in DIR/1977.report.jsonl equals what the server itself says it served, summed
  over every attempt, failed ones included;
* no invalid enrichment reached the output and no chunk was lost: every enriched chunk passes
  the validator, a halted or skipped chunk (and after a halt every later one) is written as
  segmented, and the file validates at stage segmented.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from answers import request_chunk
from fake_openai import (
    FakeOpenAI,
    Reply,
    answer,
    hang,
    malformed,
    rate_limited,
    refusal,
    reset,
    response_schema,
    server_error,
    truncated,
)
from letterchunk.cli import main
from letterchunk.contract.validate import (
    LetterContext,
    read_evidence,
    validate_chunk,
    validate_path,
)

LETTER = Path(__file__).resolve().parents[1] / "corpus" / "letters" / "1977.txt"
TIMEOUT_S = 1.0  # LETTERCHUNK_TIMEOUT_S for the run: the "hang" row waits past it


# ----------------------------------------------------------------- the scripted backend


def _chunk_word(request: dict) -> str:
    """A word of the chunk the request quotes (the longest of its first words: a content word),
    so the scripted summaries name something of their chunk, as a real summary does."""
    try:
        quoted = request_chunk(request)
    except (ValueError, KeyError, IndexError):  # a request that quotes no chunk
        quoted = " ".join(str(m.get("content") or "") for m in request.get("messages", []))
    return max(re.findall(r"[A-Za-z]+", quoted)[:20] or ["Berkshire"], key=len)


def valid_for(request: dict) -> dict:
    """A valid, grounded answer to whatever fields the request's schema asks for."""
    schema = response_schema(request) or {}
    word = _chunk_word(request)
    props = schema.get("properties", {})
    tables = props.get("tables", {})
    n_tables = tables.get("minItems", 1)
    values = {
        "contextual_summary": f"Buffett reports on Berkshire's business in 1977: {word}.",
        "themes": ["berkshire"],
        "buffett_concepts": [],
        "entities": {"companies": [], "people": [], "metrics": []},
        "principles": [],
        "content_type": "narrative",
        "content_type_evidence": [],
        "has_financial_data": False,
        "retrieval_priority": "medium",
        "abstraction_level": "medium",
        "comparison_years": [],
        "future_outlook": False,
        "related_sections_same_letter": [],
        "related_years": [],
        "section_title": "Letter Opening",
        "tables": [
            {"table_name": f"Table {i + 1}", "summary": f"Figures the letter reports: {word}."}
            for i in range(n_tables)
        ],
    }
    principles = props.get("principles", {})
    if principles.get("minItems"):  # the grammar asks for a principle: quote its first choice
        item = principles["items"]
        if "$ref" in item:
            item = schema["$defs"][item["$ref"].rsplit("/", 1)[-1]]
        evidence = item["properties"]["evidence"]
        quote = evidence.get("enum", [evidence.get("const")])[0]
        values["principles"] = [
            {"evidence": quote, "statement": "Report results plainly.", "category": "general"}
        ]
    unknown = set(props) - set(values)
    assert not unknown, f"the fake backend does not know how to answer {unknown}"
    return {k: values[k] for k in props}


def with_(**over) -> Callable[[dict], Reply]:
    """A schema-valid JSON answer for the request, with some fields replaced."""
    return lambda req: answer({**valid_for(req), **over})


UNGROUNDED = with_(
    principles=[
        {
            "statement": "Buy cheap stocks.",
            "category": "valuation",
            "evidence": "Buffett never wrote this sentence in 1977.",
        }
    ]
)
OUT_OF_VOCABULARY = with_(buffett_concepts=["dividend magic"])
WRONG_ENUM = with_(retrieval_priority="urgent")
# a confession/principle tag without the quote behind it: no list item code could drop
UNQUOTED_TAG = with_(content_type="principle_statement", content_type_evidence=[])


def truncated_answer(req: dict) -> Reply:
    return truncated(valid_for(req))


class Script:
    """Default responder: call N of the run gets ``steps[N]`` (a Reply or a function of the
    request), every other call a valid answer."""

    def __init__(self, steps: dict[int, Reply | Callable[[dict], Reply]]) -> None:
        self.steps = steps
        self.calls = 0

    def __call__(self, request: dict) -> Reply:
        self.calls += 1
        step = self.steps.get(self.calls)
        if step is None:
            return answer(valid_for(request))
        return step(request) if callable(step) else step


# ----------------------------------------------------------------- the matrix

# Call 1 is chunk 1's enrichment; call 2 is the target's (chunk 2); calls 3.. are the target's
# re-asks (or, for transport faults, the retried HTTP request).
# JS = LETTERCHUNK_INSTRUCTOR_MODE JSON_SCHEMA (grammar-backed: names, quotes, concepts and
# enums are schema choices, so a bad one fails the schema); TOOLS = tool calling as with hosted
# OpenAI (free strings: the validator finds an ungrounded quote in a schema-valid answer).
JS, TOOLS = "JSON_SCHEMA", "TOOLS"
MATRIX = [
    # id, mode, scripted calls, --on-failure, exit, target outcome, model calls for the target,
    # answer fields the re-ask names (None: all of them), rule recorded on the first answer,
    # extra HTTP requests (transport retries)
    (
        "429-retry-after",
        JS,
        {2: rate_limited(retry_after=0.05)},
        "halt",
        0,
        "valid",
        1,
        [],
        None,
        1,
    ),
    ("500", JS, {2: server_error(500)}, "halt", 0, "valid", 1, [], None, 1),
    ("hang-past-timeout", JS, {2: hang(TIMEOUT_S + 2)}, "halt", 0, "valid", 1, [], None, 1),
    ("connection-reset", JS, {2: reset()}, "halt", 0, "valid", 1, [], None, 1),
    (
        "malformed-json",
        JS,
        {2: malformed()},
        "halt",
        0,
        "repaired",
        2,
        None,
        "response.malformed",
        0,
    ),
    (
        "truncated-json",
        JS,
        {2: truncated_answer},
        "halt",
        0,
        "repaired",
        2,
        None,
        "response.truncated",
        0,
    ),
    (
        "refusal-then-answer",
        JS,
        {2: refusal()},
        "halt",
        0,
        "repaired",
        2,
        None,
        "response.refused",
        0,
    ),
    (
        "ungrounded-quote",
        TOOLS,
        {2: UNGROUNDED},
        "halt",
        0,
        "repaired",
        2,
        ["principles"],
        "evidence.principle_not_found",
        0,
    ),
    (
        "ungrounded-quote-grammar",
        JS,
        {2: UNGROUNDED},
        "halt",
        0,
        "repaired",
        2,
        ["principles"],
        "response.schema",
        0,
    ),
    (
        "out-of-vocabulary-concept",
        JS,
        {2: OUT_OF_VOCABULARY},
        "halt",
        0,
        "repaired",
        2,
        ["buffett_concepts"],
        "response.schema",
        0,
    ),
    (
        "wrong-enum",
        JS,
        {2: WRONG_ENUM},
        "halt",
        0,
        "repaired",
        2,
        ["retrieval_priority"],
        "response.schema",
        0,
    ),
    (
        "refusal-persists-halt",
        JS,
        {2: refusal(), 3: refusal(), 4: refusal()},
        "halt",
        3,
        "failed",
        3,
        None,
        "response.refused",
        0,
    ),
    (
        "unquoted-tag-persists-halt",
        TOOLS,
        {2: UNQUOTED_TAG, 3: UNQUOTED_TAG, 4: UNQUOTED_TAG},
        "halt",
        3,
        "failed",
        3,
        ["content_type", "content_type_evidence"],
        "evidence.missing",
        0,
    ),
    (
        "wrong-enum-persists-skip",
        JS,
        {2: WRONG_ENUM, 3: WRONG_ENUM, 4: WRONG_ENUM},
        "skip",
        1,
        "failed",
        3,
        ["retrieval_priority"],
        "response.schema",
        0,
    ),
]


@pytest.fixture
def chunk_ids() -> list[str]:
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    return [c.chunk_id for c in segment_letter(load_letter(LETTER))]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.mark.parametrize(
    (
        "mode",
        "steps",
        "on_failure",
        "exit_code",
        "outcome",
        "calls",
        "asked",
        "rule",
        "transport_retries",
    ),
    [row[1:] for row in MATRIX],
    ids=[row[0] for row in MATRIX],
)
def test_fault_matrix(
    tmp_path,
    monkeypatch,
    capsys,
    chunk_ids,
    mode,
    steps,
    on_failure,
    exit_code,
    outcome,
    calls,
    asked,
    rule,
    transport_retries,
):
    out = tmp_path / "out"
    script = Script(steps)
    with FakeOpenAI(default=script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        monkeypatch.setenv("LETTERCHUNK_TIMEOUT_S", str(TIMEOUT_S))
        monkeypatch.setenv("LETTERCHUNK_TRANSPORT_RETRIES", "2")
        monkeypatch.setenv("LETTERCHUNK_INSTRUCTOR_MODE", mode)
        code = main(
            [
                "run",
                str(LETTER),
                "--out",
                str(out),
                "--cache",
                "off",
                "--quiet",
                "--max-attempts",
                "2",
                "--on-failure",
                on_failure,
            ]
        )
        served = server.answers_usage_total  # the report records structured calls only
        http_requests = server.chat_count
        used_tools = ["tools" in r.body for r in server.chat_requests]
    err = capsys.readouterr().err
    target = chunk_ids[1]
    assert code == exit_code, err
    assert set(used_tools) == {mode == TOOLS}  # the backend really spoke this mode

    # ---- the report: one record per model call of the target, usage = what was served
    records = _jsonl(out / "1977.report.jsonl")
    mine = [r for r in records if r["chunk_id"] == target]
    assert [r["attempt"] for r in mine] == list(range(1, calls + 1))
    assert mine[-1]["outcome"] == outcome
    assert [r["kind"] for r in mine] == ["enrich"] + ["reask"] * (calls - 1)
    assert sum(r["usage"]["prompt_tokens"] for r in records) == served.prompt_tokens
    assert sum(r["usage"]["completion_tokens"] for r in records) == served.completion_tokens
    model_calls = sum(1 for r in records if r["kind"] in ("enrich", "reask"))
    # transport faults are retried below the loop: one extra HTTP request, no extra attempt
    assert http_requests == model_calls + transport_retries
    assert script.calls == http_requests
    first_rules = {v["code"] for v in mine[0]["violations"]}
    assert first_rules == ({rule} if rule else set()), mine[0]
    for r in mine[1:]:
        assert r["asked_fields"], r
        if asked is not None:
            assert r["asked_fields"] == asked  # only the failing fields were asked again
    if outcome == "repaired":
        changed = {c["field"] for c in mine[-1]["changes"] if c["by"] == "llm"}
        if asked is not None:
            assert changed == {f"answer.{f}" for f in asked}
        else:
            assert changed  # the unusable answer was replaced
    if outcome == "failed":
        assert mine[-1]["violations"] and mine[-1]["content"]
        assert target in err  # the message names the chunk (and the rule)
        assert any(v["code"] in err for v in mine[-1]["violations"])

    # ---- the analysts' page is built from the same report and names the chunk
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f'"chunk_id":"{target}"' in page and f'"outcome":"{outcome}"' in page

    # ---- no invalid enrichment reached the output, and no chunk was lost
    written = _jsonl(out / "1977.jsonl")
    ids = [c["chunk_id"] for c in written]
    assert ids == chunk_ids
    if outcome == "failed":  # the target (and after a halt every later chunk) as segmented
        bare = [c["chunk_id"] for c in written if not c["metadata"]["contextual_summary"]]
        assert bare == (chunk_ids[1:] if exit_code == 3 else [target])
        assert not [v for v in validate_path(out) if v.severity == "error"]
        written = [c for c in written if c["chunk_id"] not in bare]
    else:
        assert ids == chunk_ids
        assert not [v for v in validate_path(out, stage="enriched") if v.severity == "error"]
    cleaned = (out / "1977_cleaned.txt").read_text(encoding="utf-8")
    evidence, bad = read_evidence(out / "1977.evidence.jsonl")
    assert not bad
    ctx = LetterContext(cleaned_text=cleaned, evidence=evidence)
    from letterchunk.contract.schema import Chunk

    for data in written:
        errors = [
            v
            for v in validate_chunk(Chunk.model_validate(data), stage="enriched", context=ctx)
            if v.severity == "error"
        ]
        assert not errors, errors
