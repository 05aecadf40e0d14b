"""The fake OpenAI server behaves like the real API for the openai client (it is our test bed)."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from fake_openai import (
    FakeOpenAI,
    answer,
    hang,
    malformed,
    prompt_tokens_of,
    rate_limited,
    refusal,
    reset,
    response_schema,
    server_error,
    truncated,
)
from letterchunk.tokens import count_tokens

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say ok."}]


def client(server: FakeOpenAI, timeout: float = 2.0) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key="test-key", max_retries=0, timeout=timeout
    )


def chat(c: openai.OpenAI, **kw):
    return c.chat.completions.create(model="fake-model", messages=MESSAGES, **kw)


def test_answer_usage_and_recording():
    with FakeOpenAI() as server:
        server.enqueue(answer({"ok": True}))
        out = chat(client(server), max_tokens=50, temperature=0)
        assert out.choices[0].message.content == '{"ok": true}'
        assert out.choices[0].finish_reason == "stop"
        expected_prompt = sum(4 + count_tokens(m["content"]) for m in MESSAGES)
        assert out.usage.prompt_tokens == expected_prompt
        assert out.usage.completion_tokens == count_tokens('{"ok": true}')
        assert server.usage_total.prompt_tokens == expected_prompt
        (req,) = server.chat_requests
        assert req.body["max_tokens"] == 50 and req.body["messages"] == MESSAGES
        assert req.headers["Authorization"] == "Bearer test-key"


def test_default_responder_sees_the_request_and_tools_mode_gets_a_tool_call():
    seen = []

    def default(req):
        seen.append(response_schema(req))
        return {"x": 1}

    tools = [{"type": "function", "function": {"name": "Thing", "parameters": {"type": "object"}}}]
    with FakeOpenAI(default) as server:
        out = chat(client(server), tools=tools)
        call = out.choices[0].message.tool_calls[0]
        assert call.function.name == "Thing" and call.function.arguments == '{"x": 1}'
        assert seen == [{"type": "object"}]


def test_empty_queue_without_default_is_a_loud_500():
    with FakeOpenAI() as server, pytest.raises(openai.InternalServerError):
        chat(client(server))


@pytest.mark.parametrize(
    ("reply", "expected_exc"),
    [
        (rate_limited(retry_after=3), openai.RateLimitError),
        (server_error(503), openai.InternalServerError),
        (reset(), openai.APIConnectionError),
        (hang(5), openai.APITimeoutError),
    ],
)
def test_transport_faults_reach_the_client_as_the_real_errors(reply, expected_exc):
    with FakeOpenAI() as server:
        server.enqueue(reply, answer("{}"))
        c = client(server, timeout=0.3)
        with pytest.raises(expected_exc) as info:
            chat(c)
        if isinstance(info.value, openai.RateLimitError):
            assert info.value.response.headers["retry-after"] == "3"
        # the next request is answered normally
        assert chat(c).choices[0].message.content == "{}"


@pytest.mark.parametrize(
    ("reply", "content", "finish", "refused"),
    [
        (malformed("{not json"), "{not json", "stop", None),
        (truncated({"a": "bcdefghij"}), '{"a": "bc', "length", None),
        (refusal("no"), None, "stop", "no"),
    ],
)
def test_bad_answers(reply, content, finish, refused):
    with FakeOpenAI() as server:
        server.enqueue(reply)
        msg = chat(client(server)).choices[0]
        assert (msg.message.content, msg.finish_reason, msg.message.refusal) == (
            content,
            finish,
            refused,
        )


def test_models_and_health():
    with FakeOpenAI() as server:
        assert httpx.get(f"http://127.0.0.1:{server.port}/health").json() == {"status": "ok"}
        assert [m.id for m in client(server).models.list()] == ["fake-model"]


def test_tpm_limit_answers_429_with_retry_after_then_admits():
    body = {"messages": MESSAGES, "max_tokens": 10}
    per_request = prompt_tokens_of(body) + 10
    with FakeOpenAI(lambda r: "{}", tpm_limit=per_request * 2, window_s=0.5) as server:
        c = client(server)
        chat(c, max_tokens=10)
        chat(c, max_tokens=10)
        with pytest.raises(openai.RateLimitError) as info:
            chat(c, max_tokens=10)
        wait = float(info.value.response.headers["retry-after"])
        assert 0 < wait <= 0.5
        assert server.rate_limited_count == 1
        time.sleep(wait + 0.05)
        chat(c, max_tokens=10)
        assert server.replies == ["answer", "answer", "rate_limited", "answer"]


def test_latency_and_stop_wakes_hanging_handlers():
    server = FakeOpenAI(lambda r: "{}", latency_s=0.2).start()
    started = time.monotonic()
    chat(client(server))
    assert time.monotonic() - started >= 0.2
    server.enqueue(hang(60))
    with pytest.raises(openai.APITimeoutError):
        chat(client(server, timeout=0.2))
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3
