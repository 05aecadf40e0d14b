"""bench/llm_cost.py rebuilds the requests a hosted OpenAI run would send for a recorded letter.

What the bench measures for the hosted run is the provider's prefix cache: it only pays off when
every chunk's structured call starts with the same tokens (tools block + system message), which
is why a hosted run sends the static schema and writes the per-chunk choices in the user
message.  These tests check that property on a real letter, with the grammar-narrowed (local)
schema as the control that breaks it, and how re-asks and questions are rebuilt.  No model, no
network, no cassette.
"""

from __future__ import annotations

import importlib.util
import sys
from itertools import combinations
from pathlib import Path

import pytest

from letterchunk.contract.schema import UNTITLED
from letterchunk.enrich import build_messages, judges

ROOT = Path(__file__).resolve().parents[1]
YEAR = 1977  # a small letter: seven chunks, narrative and table


def _load_bench():
    spec = importlib.util.spec_from_file_location("llm_cost", ROOT / "bench" / "llm_cost.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


lc = _load_bench()


@pytest.fixture(scope="module")
def letter():
    letter, chunks = lc.letter_of(YEAR)
    local, hosted = lc.jobs(letter, chunks)
    return chunks, local, hosted


def _structured(chunk, local, job):
    """The rebuilt structured call of ``chunk`` asked with ``job``'s prompt context."""
    group = [lc.Recorded("structured", {"messages": build_messages(chunk, local.prompt)}, {})]
    ((kind, body),) = lc.hosted_requests(chunk, local, job, group)
    assert kind == "structured"
    return body


def _narrative(chunks):
    # one response model shape: a table chunk asks TableEnrichment sized to its tables, an
    # untitled chunk also asks section_title
    return [
        c for c in chunks if c.metadata.chunk_tier != 3 and c.metadata.section_title != UNTITLED
    ]


def test_hosted_structured_prompts_share_tools_and_system(letter) -> None:
    chunks, local, hosted = letter
    assert hosted.prompt.grounded_choices is False  # the hosted run's job, as the runner builds it
    narrative = _narrative(chunks)
    assert len(narrative) >= 2
    bodies = [_structured(c, local, hosted) for c in narrative]
    assert all(b["tools"][0]["type"] == "function" and "tool_choice" in b for b in bodies)
    assert all("response_format" not in b for b in bodies)
    head = {k: bodies[0][k] for k in ("tools", "tool_choice")}
    head_tokens = lc.prompt_tokens({**head, "messages": bodies[0]["messages"][:1]})
    assert len(head_tokens) >= lc.HOSTED_MIN  # long enough for the provider to cache it
    tokens = [lc.prompt_tokens(b) for b in bodies]
    for a, b in combinations(tokens, 2):
        assert lc._common(a, b) >= len(head_tokens)
    for i in range(1, len(tokens)):
        assert lc.hosted_reuse(tokens[i], tokens[:i]) >= lc.HOSTED_MIN


def test_grammar_narrowed_schema_breaks_the_shared_prefix(letter) -> None:
    """The control: asked with the local job (schema narrowed to each chunk's own choices), the
    same tool blocks differ from chunk to chunk, so the check above can fail."""
    chunks, local, _ = letter
    bodies = [_structured(c, local, local) for c in _narrative(chunks)]
    assert len({str(b["tools"]) for b in bodies}) == len(bodies)
    tokens = [lc.prompt_tokens(b) for b in bodies]
    assert all(lc.hosted_reuse(tokens[i], tokens[:i]) == 0 for i in range(1, len(tokens)))


def test_reasks_follow_the_hosted_prompt_and_questions_stand_alone(letter) -> None:
    chunks, local, hosted = letter
    chunk = _narrative(chunks)[0]
    asked = build_messages(chunk, local.prompt)
    answer = {"role": "assistant", "content": "{}"}
    fix = {"role": "user", "content": "Only these fields need a new value: themes."}
    question = judges.question("Is this a confession? Answer yes or no.")
    schema = {"properties": {"themes": {}}, "required": ["themes"]}
    group = [
        lc.Recorded("structured", {"messages": asked}, {}),
        lc.Recorded(
            "reask",
            {
                "messages": [*asked, answer, fix],
                "response_format": {"json_schema": {"schema": schema}},
            },
            {},
        ),
        lc.Recorded("question", {"messages": question}, {}),
    ]
    assert [g[0] for g in lc.by_chunk([*group, *group])] == [group[0], group[0]]
    out = lc.hosted_requests(chunk, local, hosted, group)
    assert [k for k, _ in out] == ["structured", "reask", "question"]
    prompt = out[0][1]["messages"]
    assert prompt != asked  # hosted: the candidates are in the user message
    assert out[1][1]["messages"] == [*prompt, answer, fix]
    params = out[1][1]["tools"][0]["function"]["parameters"]
    assert out[1][1]["tools"][0]["function"]["name"] == "EnrichmentFix"
    assert list(params["properties"]) == ["themes"]
    assert out[2][1]["messages"] == question  # a standalone question is sent as recorded
    assert "tools" not in out[2][1]
    stale = [lc.Recorded("structured", {"messages": [asked[0], fix]}, {})]
    with pytest.raises(lc.Stale, match="record the cassette again"):
        lc.hosted_requests(chunk, local, hosted, stale)
