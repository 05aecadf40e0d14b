"""Recording modes of ``letterchunk.llm.replay.recorder`` against a scripted local server:
``"all"`` records every request, ``"update"`` replays what the cassette still answers, records
only new requests and drops the recorded ones nobody asked for."""

from __future__ import annotations

import httpx
import pytest
import yaml
from tests.fake_openai import FakeOpenAI

from letterchunk.llm.replay import recorder

pytest.importorskip("vcr")


def _ask(base_url: str, text: str) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=10)
    return response.json()["choices"][0]["message"]["content"]


def _recorded_questions(path) -> list[str]:
    data = yaml.safe_load(path.read_text())
    questions = []
    for interaction in data["interactions"]:
        body = interaction["request"]["body"]
        questions.append(yaml.safe_load(body)["messages"][0]["content"])
    return questions


def test_update_mode_keeps_what_is_still_asked_and_records_only_new_requests(tmp_path):
    path = tmp_path / "letter.yaml"
    with FakeOpenAI(default=lambda body: "first " + body["messages"][0]["content"]) as server:
        with recorder("all").use_cassette(str(path)):
            assert _ask(server.base_url, "a") == "first a"
            assert _ask(server.base_url, "b") == "first b"
        assert server.chat_count == 2
        assert sorted(_recorded_questions(path)) == ["a", "b"]

        # the server now answers differently: a replayed answer shows as "first ..."
        server.default = lambda body: "second " + body["messages"][0]["content"]
        with recorder("update").use_cassette(str(path), allow_playback_repeats=False):
            assert _ask(server.base_url, "a") == "first a"  # replayed, not asked
            assert _ask(server.base_url, "c") == "second c"  # new: asked and recorded
        assert server.chat_count == 3
        assert sorted(_recorded_questions(path)) == ["a", "c"]  # "b" nobody asked: dropped

        with recorder("none").use_cassette(str(path), allow_playback_repeats=False) as played:
            assert _ask(server.base_url, "c") == "second c"
            assert _ask(server.base_url, "a") == "first a"
            assert played.all_played
        assert server.chat_count == 3


def test_update_mode_leaves_an_unchanged_cassette_untouched(tmp_path):
    path = tmp_path / "letter.yaml"
    with FakeOpenAI(default=lambda body: "x") as server:
        with recorder("all").use_cassette(str(path)):
            _ask(server.base_url, "a")
        before = path.read_bytes()
        with recorder("update").use_cassette(str(path), allow_playback_repeats=False):
            _ask(server.base_url, "a")
        assert server.chat_count == 1
        assert path.read_bytes() == before
