"""LLMClient against the scripted local server: transport retries vs. answers for the repair
loop."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from fake_openai import (
    FakeOpenAI,
    answer,
    hang,
    malformed,
    rate_limited,
    refusal,
    reset,
    server_error,
    status,
    truncated,
)
from letterchunk.errors import BackendError, BudgetExceeded, ConfigError
from letterchunk.llm.client import Completion, LLMClient, LLMSettings, Usage, estimate_tokens

MESSAGES = [
    {"role": "system", "content": "Return the item as JSON."},
    {"role": "user", "content": "The item is a widget, count 3."},
]


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    count: int


GOOD = {"name": "widget", "count": 3}


class Recorder:
    """Records sleeps instead of sleeping, so backoff and Retry-After are asserted exactly."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class FakeLimiter:
    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.calls: list[tuple] = []
        self.fail_with = fail_with

    def acquire(self, estimated_tokens: int, *, max_tokens: int | None = None) -> None:
        self.calls.append(("acquire", estimated_tokens))
        if self.fail_with is not None:
            raise self.fail_with

    def settle(self, estimated_tokens: int, actual_tokens: int, **split: int) -> None:
        self.calls.append(("settle", estimated_tokens, actual_tokens, split))

    def penalize(self, retry_after_s: float) -> None:
        self.calls.append(("penalize", retry_after_s))


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def make_client(
    server: FakeOpenAI, *, mode: str = "JSON_SCHEMA", **kw
) -> tuple[LLMClient, Recorder]:
    settings = LLMSettings.from_env(
        env={},
        base_url=server.base_url,
        model="fake-model",
        mode=mode,
        timeout_s=kw.pop("timeout_s", 0.5),
        transport_retries=kw.pop("transport_retries", 3),
        backoff_base_s=0.01,
        backoff_cap_s=0.02,
    )
    sleep = Recorder()
    return LLMClient(settings, sleep=sleep, **kw), sleep


def ask(client: LLMClient) -> Completion:
    return client.complete(MESSAGES, Item, chunk_id="1977-t1-003")


# ----------------------------------------------------------------- transport faults


@pytest.mark.parametrize(
    ("fault", "expected_wait"),
    [
        (rate_limited(retry_after=7), 7.0),  # Retry-After honoured exactly
        (rate_limited(retry_after=None), None),  # no header: exponential backoff
        (server_error(500), None),
        (server_error(503), None),
        (hang(5), None),  # past the 0.5 s timeout
        (reset(), None),
    ],
    ids=["429-retry-after", "429-bare", "500", "503", "hang-timeout", "reset"],
)
@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
def test_transport_fault_is_retried_and_succeeds(server, fault, expected_wait, mode):
    client, sleep = make_client(server, mode=mode)
    server.enqueue(fault, answer(GOOD))
    out = ask(client)
    assert out.value == Item(**GOOD) and out.error is None and out.source == "live"
    assert out.http_attempts == 2 and server.chat_count == 2
    assert len(sleep.waits) == 1
    if expected_wait is not None:
        assert sleep.waits == [expected_wait]
    else:
        assert 0 < sleep.waits[0] <= 0.02
    # only the answered request counts as usage, and it equals what the server served
    served = server.usage_total
    assert out.usage == Usage(served.prompt_tokens, served.completion_tokens, 1)


def test_retry_after_is_clipped_to_the_configured_maximum(server):
    client, sleep = make_client(server)
    client.settings = LLMSettings(**{**client.settings.__dict__, "retry_after_max_s": 2.0})
    server.enqueue(rate_limited(retry_after=3600), answer(GOOD))
    assert ask(client).ok
    assert sleep.waits == [2.0]


def test_exhausted_transport_retries_raise_backend_error_that_says_what_to_do(server):
    client, sleep = make_client(server, transport_retries=2)
    server.enqueue(server_error(), rate_limited(0.1), reset())
    with pytest.raises(BackendError) as info:
        ask(client)
    message = str(info.value)
    assert "1977-t1-003" in message and "3 attempt(s)" in message
    assert "LETTERCHUNK_TRANSPORT_RETRIES" in message
    assert server.chat_count == 3 and len(sleep.waits) == 2
    assert client.usage == Usage()  # nothing was answered


@pytest.mark.parametrize(
    ("code", "hint"),
    [(401, "OPENAI_API_KEY"), (404, "LETTERCHUNK_MODEL"), (400, "LETTERCHUNK_INSTRUCTOR_MODE")],
)
def test_client_errors_are_not_retried(server, code, hint):
    client, sleep = make_client(server)
    server.enqueue(status(code), answer(GOOD))
    with pytest.raises(BackendError, match=hint):
        ask(client)
    assert server.chat_count == 1 and sleep.waits == []


# ----------------------------------------------------------------- answers for the repair loop


@pytest.mark.parametrize(
    ("reply", "error_prefix", "raw_text"),
    [
        (
            malformed('{"name": "widget", "count": }'),
            "malformed JSON",
            '{"name": "widget", "count": }',
        ),
        (truncated(GOOD), "truncated", '{"name": "widge'),
        (refusal("I can't help with that."), "refusal", "I can't help with that."),
        (answer({"name": "widget"}), "schema-invalid: count", '{"name": "widget"}'),
        (answer({"name": "widget", "count": "many"}), "schema-invalid: count", None),
        (answer({**GOOD, "extra": 1}), "schema-invalid: extra", None),
    ],
    ids=["malformed", "truncated", "refusal", "missing-field", "wrong-type", "extra-field"],
)
@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
def test_unusable_answer_is_a_completion_error_with_usage_counted(
    server, reply, error_prefix, raw_text, mode
):
    client, sleep = make_client(server, mode=mode)
    server.enqueue(reply)
    out = ask(client)
    assert out.value is None and not out.ok
    assert out.error is not None and out.error.startswith(error_prefix), out.error
    if raw_text is not None:
        assert out.raw_text == raw_text
    served = server.usage_total
    assert served.total_tokens > 0
    assert out.usage == Usage(served.prompt_tokens, served.completion_tokens, 1)
    assert server.chat_count == 1 and sleep.waits == []  # not retried, not re-asked


def test_truncation_names_max_tokens(server):
    client, _ = make_client(server)
    server.enqueue(truncated(GOOD))
    assert "max_tokens=1024" in ask(client).error


def test_client_usage_sums_every_attempt_failed_ones_included(server):
    client, _ = make_client(server)
    server.enqueue(malformed(), refusal(), truncated(GOOD), answer({"name": "x"}), answer(GOOD))
    outcomes = [ask(client) for _ in range(5)]
    assert [o.ok for o in outcomes] == [False, False, False, False, True]
    served = server.usage_total
    assert client.usage == Usage(served.prompt_tokens, served.completion_tokens, 5)
    assert sum((o.usage for o in outcomes), Usage()) == client.usage


# ----------------------------------------------------------------- the request itself


@pytest.mark.parametrize(
    ("mode", "structured_key"),
    [("JSON_SCHEMA", "response_format"), ("TOOLS", "tools"), ("MD_JSON", None)],
)
def test_request_carries_deterministic_generation_params(server, mode, structured_key):
    client, _ = make_client(server, mode=mode)
    server.enqueue(answer(GOOD))
    assert ask(client).ok
    body = server.chat_requests[0].body
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == (
        "fake-model",
        0.0,
        42,
        1024,
    )
    if structured_key:
        assert structured_key in body
    assert MESSAGES[1]["content"] in body["messages"][-1]["content"]


def test_callers_messages_are_not_mutated(server):
    client, _ = make_client(server, mode="MD_JSON")  # MD_JSON edits the messages it sends
    messages = [dict(m) for m in MESSAGES]
    server.enqueue(answer(GOOD))
    ask_out = client.complete(messages, Item, chunk_id="c")
    assert ask_out.ok and messages == MESSAGES


# ----------------------------------------------------------------- limiter hook


def test_limiter_acquires_before_and_settles_after_every_http_request(server):
    limiter = FakeLimiter()
    client, _ = make_client(server, limiter=limiter)
    server.enqueue(rate_limited(0.1), answer(GOOD))
    out = ask(client)
    assert out.ok
    estimate = limiter.calls[0][1]
    body = server.chat_requests[0].body
    assert estimate == estimate_tokens(body) and estimate > body["max_tokens"]
    assert limiter.calls == [
        ("acquire", estimate),
        ("settle", estimate, 0, {}),  # the 429 cost nothing
        ("penalize", 0.1),  # and holds every worker's next request for its Retry-After
        ("acquire", estimate),
        (
            "settle",
            estimate,
            out.usage.total_tokens,
            {
                "prompt_tokens": out.usage.prompt_tokens,
                "completion_tokens": out.usage.completion_tokens,
            },
        ),
    ]


def test_budget_exceeded_from_the_limiter_propagates_before_any_request(server):
    limiter = FakeLimiter(
        BudgetExceeded("tokens", 100, 50, "cap reached; raise --max-tokens-total")
    )
    client, _ = make_client(server, limiter=limiter)
    with pytest.raises(BudgetExceeded):
        ask(client)
    assert server.chat_count == 0


def test_keyboard_interrupt_is_never_swallowed(server):
    client, sleep = make_client(server, limiter=FakeLimiter(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        ask(client)
    assert server.chat_count == 0 and sleep.waits == []


# ----------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        ({"OPENAI_API_KEY": "sk-x"}, {}, ("https://api.openai.com/v1", "gpt-4o-mini", "TOOLS")),
        (
            {
                "OPENAI_API_KEY": "sk-x",
                "LETTERCHUNK_MODEL": "gpt-4.1-mini",
                "LETTERCHUNK_INSTRUCTOR_MODE": "json_schema",
            },
            {},
            ("https://api.openai.com/v1", "gpt-4.1-mini", "JSON_SCHEMA"),
        ),
        (
            {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/", "LETTERCHUNK_MODEL": "qwen"},
            {},
            ("http://127.0.0.1:9/v1", "qwen", "JSON_SCHEMA"),
        ),
        (
            {},
            {"base_url": "http://127.0.0.1:9/v1", "model": "m", "mode": "MD_JSON"},
            ("http://127.0.0.1:9/v1", "m", "MD_JSON"),
        ),
    ],
)
def test_settings_from_env(env, overrides, expected):
    s = LLMSettings.from_env(env=env, **overrides)
    assert (s.base_url, s.model, s.mode) == expected
    assert (s.temperature, s.seed) == (0.0, 42)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "OPENAI_API_KEY"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "LETTERCHUNK_MODEL"),
        (
            {"OPENAI_API_KEY": "k", "LETTERCHUNK_INSTRUCTOR_MODE": "FUNCTIONS"},
            "LETTERCHUNK_INSTRUCTOR_MODE",
        ),
        ({"OPENAI_API_KEY": "k", "LETTERCHUNK_MAX_TOKENS": "lots"}, "LETTERCHUNK_MAX_TOKENS"),
    ],
)
def test_settings_errors_say_what_to_set(env, message):
    with pytest.raises(ConfigError, match=message):
        LLMSettings.from_env(env=env)


def test_settings_env_numbers_and_key_never_shown():
    s = LLMSettings.from_env(
        env={
            "OPENAI_API_KEY": "sk-secret",
            "LETTERCHUNK_MAX_TOKENS": "900",
            "LETTERCHUNK_SEED": "7",
        }
    )
    assert (s.max_tokens, s.seed) == (900, 7)
    assert "sk-secret" not in repr(s)


def test_importing_llm_and_cache_reads_no_env():
    """Env is read lazily: importing llm, cache or backend never reads an OPENAI_* /
    LETTERCHUNK_* variable."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "ours = ('OPENAI_', 'LETTERCHUNK_')\n"
        "class Refuse(dict):\n"
        "    def __getitem__(self, k):\n"
        "        assert not k.startswith(ours), 'env read at import: ' + k\n"
        "        return dict.__getitem__(self, k)\n"
        "    def get(self, k, d=None):\n"
        "        assert not k.startswith(ours), 'env read at import: ' + k\n"
        "        return dict.get(self, k, d)\n"
        "os.environ = Refuse(os.environ)\n"
        "import letterchunk.llm.client, letterchunk.llm.cache, letterchunk.llm.backend\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_instructor_attempt_errors_stay_off_a_warning_level_log(server, caplog):
    """A malformed answer is reported as Completion.error, not also as instructor ERROR lines."""
    import logging

    caplog.set_level(logging.WARNING)
    client, _ = make_client(server)
    server.enqueue(malformed())
    assert ask(client).error.startswith("malformed JSON")
    assert [r for r in caplog.records if r.name.startswith("instructor")] == []
