"""The answer cache: what enters the key, zero HTTP on a rerun, JSON values, the four modes."""

from __future__ import annotations

import json

import diskcache
import pytest
from pydantic import BaseModel, ConfigDict

from fake_openai import FakeOpenAI, answer, malformed
from letterchunk.errors import CacheMiss, ConfigError
from letterchunk.llm.cache import CachedAnswer, ResponseCache, cache_key
from letterchunk.llm.client import LLMClient, LLMSettings, Usage


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    count: int


class ItemWithNote(Item):
    note: str = ""


MESSAGES = [
    {"role": "system", "content": "Return the item as JSON."},
    {"role": "user", "content": "The item is a widget, count 3."},
]
GOOD = {"name": "widget", "count": 3}

BASE = dict(
    model="qwen2.5-coder-1.5b",
    messages=MESSAGES,
    prompt_hash="p" * 64,
    schema=Item.model_json_schema(),
    params={"temperature": 0.0, "seed": 42, "max_tokens": 1024},
    mode="JSON_SCHEMA",
)


def _with(**changes):
    return {**BASE, **changes}


# ----------------------------------------------------------------- the key


@pytest.mark.parametrize(
    ("variant", "changes_key"),
    [
        # not an answer-changing difference: same key
        (_with(), False),
        (_with(messages=[dict(m) for m in MESSAGES]), False),  # equal copy
        (
            _with(messages=[{"content": m["content"], "role": m["role"]} for m in MESSAGES]),
            False,
        ),  # key order
        (_with(params={"max_tokens": 1024, "seed": 42, "temperature": 0.0}), False),  # dict order
        (_with(schema=json.loads(json.dumps(Item.model_json_schema()))), False),
        # each answer-changing input: new key
        (_with(prompt_hash="q" * 64), True),
        (_with(model="gpt-4o-mini"), True),
        (_with(schema=ItemWithNote.model_json_schema()), True),
        (_with(params={"temperature": 0.2, "seed": 42, "max_tokens": 1024}), True),
        (_with(params={"temperature": 0.0, "seed": 7, "max_tokens": 1024}), True),
        (_with(params={"temperature": 0.0, "seed": 42, "max_tokens": 512}), True),
        (_with(mode="TOOLS"), True),
        (
            _with(
                messages=[
                    MESSAGES[0],
                    {"role": "user", "content": "The item is a widget, count 4."},
                ]
            ),
            True,
        ),
        (
            _with(messages=[MESSAGES[0], {"role": "assistant", "content": MESSAGES[1]["content"]}]),
            True,
        ),
        (_with(messages=MESSAGES[1:]), True),
    ],
    ids=[
        "same",
        "equal-copy",
        "message-key-order",
        "param-order",
        "schema-roundtrip",
        "prompt-hash",
        "model",
        "schema",
        "temperature",
        "seed",
        "max-tokens",
        "mode",
        "message-text",
        "message-role",
        "message-dropped",
    ],
)
def test_key_changes_exactly_when_an_answer_changing_input_changes(variant, changes_key):
    assert (cache_key(**variant) != cache_key(**BASE)) is changes_key
    assert len(cache_key(**variant)) == 64


# ----------------------------------------------------------------- through the client


@pytest.fixture
def server():
    with FakeOpenAI(lambda request: GOOD) as s:
        yield s


def client_for(server: FakeOpenAI, cache: ResponseCache | None, **settings) -> LLMClient:
    s = LLMSettings.from_env(
        env={}, base_url=server.base_url, model="fake-model", timeout_s=2, **settings
    )
    return LLMClient(s, cache=cache, prompt_hash="p" * 64)


def test_second_identical_call_makes_zero_http_requests(server, tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    first = client_for(server, cache).complete(MESSAGES, Item, chunk_id="1977-t1-001")
    assert first.source == "live" and server.chat_count == 1
    # a new client and a reopened cache, as in a rerun of the command
    cache2 = ResponseCache(tmp_path / "cache")
    client2 = client_for(server, cache2)
    second = client2.complete(MESSAGES, Item, chunk_id="1977-t1-001")
    assert server.chat_count == 1  # no HTTP request
    assert second.source == "cache" and second.http_attempts == 0
    assert second.value == first.value and second.raw_text == first.raw_text
    assert second.usage == Usage() and client2.usage == Usage()
    assert (cache2.hits, cache2.misses) == (1, 0)


def test_changed_prompt_hash_or_params_miss_the_cache(server, tmp_path):
    cache = ResponseCache(tmp_path)
    client_for(server, cache).complete(MESSAGES, Item, chunk_id="c")
    client_for(server, cache).complete(MESSAGES, Item, chunk_id="c", prompt_hash="q" * 64)
    client_for(server, cache, max_tokens=512).complete(MESSAGES, Item, chunk_id="c")
    client_for(server, cache).complete(MESSAGES, ItemWithNote, chunk_id="c")
    assert server.chat_count == 4 and (cache.hits, cache.misses) == (0, 4)
    client_for(server, cache, max_tokens=512).complete(MESSAGES, Item, chunk_id="c")
    assert server.chat_count == 4 and cache.hits == 1


def test_failed_answers_are_cached_too_so_a_rerun_replays_the_repair_loop(server, tmp_path):
    cache = ResponseCache(tmp_path)
    server.enqueue(malformed("{not json"))
    first = client_for(server, cache).complete(MESSAGES, Item, chunk_id="c")
    again = client_for(server, cache).complete(MESSAGES, Item, chunk_id="c")
    assert first.error and first.error == again.error and again.source == "cache"
    assert server.chat_count == 1


@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS", "MD_JSON"])
def test_cached_answer_parses_the_same_in_every_mode(server, tmp_path, mode):
    cache = ResponseCache(tmp_path)
    live = client_for(server, cache, mode=mode).complete(MESSAGES, Item, chunk_id="c")
    cached = client_for(server, cache, mode=mode).complete(MESSAGES, Item, chunk_id="c")
    assert (live.source, cached.source) == ("live", "cache")
    assert cached.value == live.value == Item(**GOOD)


def test_values_are_json_text_not_pickles(server, tmp_path):
    cache = ResponseCache(tmp_path)
    out = client_for(server, cache).complete(MESSAGES, Item, chunk_id="c")
    cache.close()
    with diskcache.Cache(str(tmp_path)) as raw:
        (key,) = list(raw)
        value = raw[key]
    assert key == out.cache_key
    assert isinstance(value, str)
    record = json.loads(value)
    assert json.loads(record["raw_text"]) == GOOD
    assert record["finish_reason"] == "stop"
    assert record["prompt_tokens"] == out.usage.prompt_tokens > 0


# ----------------------------------------------------------------- modes


def test_offline_miss_raises_cache_miss_naming_the_chunk(server, tmp_path):
    client = client_for(server, ResponseCache(tmp_path, mode="offline"))
    with pytest.raises(CacheMiss) as info:
        client.complete(MESSAGES, Item, chunk_id="1994-t2-017")
    assert info.value.chunk_id == "1994-t2-017" and "1994-t2-017" in str(info.value)
    assert server.chat_count == 0


def test_offline_hit_answers_without_http(server, tmp_path):
    client_for(server, ResponseCache(tmp_path)).complete(MESSAGES, Item, chunk_id="c")
    out = client_for(server, ResponseCache(tmp_path, mode="offline")).complete(
        MESSAGES, Item, chunk_id="c"
    )
    assert out.source == "cache" and out.value == Item(**GOOD) and server.chat_count == 1


def test_refresh_asks_again_and_overwrites(server, tmp_path):
    client_for(server, ResponseCache(tmp_path)).complete(MESSAGES, Item, chunk_id="c")
    server.enqueue(answer({"name": "gadget", "count": 1}))
    refreshed = client_for(server, ResponseCache(tmp_path, mode="refresh")).complete(
        MESSAGES, Item, chunk_id="c"
    )
    assert refreshed.source == "live" and server.chat_count == 2
    reused = client_for(server, ResponseCache(tmp_path)).complete(MESSAGES, Item, chunk_id="c")
    assert reused.source == "cache" and reused.value == Item(name="gadget", count=1)


def test_off_neither_reads_nor_writes_nor_creates_the_directory(server, tmp_path):
    directory = tmp_path / "never"
    cache = ResponseCache(directory, mode="off")
    for _ in range(2):
        assert client_for(server, cache).complete(MESSAGES, Item, chunk_id="c").source == "live"
    assert server.chat_count == 2 and not directory.exists()
    assert (cache.hits, cache.misses) == (0, 2)


def test_unknown_mode_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="use, refresh, off, offline"):
        ResponseCache(tmp_path, mode="sometimes")


def test_default_directory_is_cache_or_the_env_override(tmp_path, monkeypatch):
    monkeypatch.delenv("LETTERCHUNK_CACHE_DIR", raising=False)
    assert str(ResponseCache().directory) == "cache"
    monkeypatch.setenv("LETTERCHUNK_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert ResponseCache().directory == tmp_path / "elsewhere"


def test_unreadable_or_old_format_entry_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.store("k", CachedAnswer("{}", "stop", None, 1, 1, "m"))
    assert cache.lookup("k", chunk_id="c") is not None
    cache._open().set("k", json.dumps({"format": 0, "raw_text": "{}"}))
    assert cache.lookup("k", chunk_id="c") is None
    assert (cache.hits, cache.misses) == (1, 1)
