"""`letterchunk batch submit / status / collect` against the scripted server's Batch API.

The requests a batch sends are the ones a live run sends (same body, same cache key); the
outputs of a batch run are byte-identical to a live run's with the same answers; a request the
batch did not answer is asked live (or resubmitted), never dropped; each step can be stopped and
run again without paying twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, server_error, truncated
from letterchunk.llm.batch import BatchAPI, BatchRequest, split_requests
from letterchunk.llm.connect import open_client
from letterchunk.runner.batch import plan_requests
from letterchunk.runner.pipeline import RunOptions, run_paths
from rich_answers import rich_answer

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"


@pytest.fixture
def env(monkeypatch):
    def setup(server: FakeOpenAI, mode: str | None = None) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        monkeypatch.setenv("LETTERCHUNK_TRANSPORT_RETRIES", "0")
        if mode:
            monkeypatch.setenv("LETTERCHUNK_INSTRUCTOR_MODE", mode)

    return setup


@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
def test_batch_requests_are_the_requests_a_live_run_sends(env, tmp_path, mode):
    with FakeOpenAI(rich_answer) as server:
        env(server, mode)
        with open_client(cache_dir=tmp_path / "cache") as client:
            planned = plan_requests([LETTER], client, RunOptions())
            run_paths([LETTER], tmp_path / "out", client, RunOptions())
            # every answer the live run got is filed under the planned request's custom_id
            assert all(
                client.cache.lookup(r.custom_id, chunk_id=r.chunk_id) is not None for r in planned
            )
            # and once cached, nothing is left to submit
            assert plan_requests([LETTER], client, RunOptions()) == []
        live = [r.body for r in server.chat_requests]
    assert planned and [r.body for r in planned] == live  # same bodies, same order


def test_requests_are_split_by_count_and_bytes():
    requests = [BatchRequest(f"k{i}", f"c{i}", {"x": "y" * 50}) for i in range(7)]
    size = len(requests[0].line()) + 1
    assert [len(p) for p in split_requests(requests, max_requests=3)] == [3, 3, 1]
    assert [len(p) for p in split_requests(requests, max_bytes=2 * size)] == [2, 2, 2, 1]


def test_the_batch_api_round_trip_on_the_fake_server(env, tmp_path):
    with FakeOpenAI(rich_answer) as server:
        env(server)
        server.enqueue(server_error(), truncated())
        with open_client(cache_dir=tmp_path / "cache") as client:
            requests = plan_requests([LETTER], client, RunOptions())[:3]
            path = tmp_path / "in.jsonl"
            path.write_text("".join(r.line() + "\n" for r in requests))
            with BatchAPI(client.settings) as api:
                state = api.create(api.upload(path), {"part": "1"})
                assert api.find(state.input_file_id).id == state.id
                done = api.retrieve(state.id)
                assert (done.status, done.total, done.completed, done.failed) == (
                    "completed",
                    3,
                    2,
                    1,
                )
                results = {r.custom_id: r for r in api.results(done, model="fake-model")}
    first, second, third = (results[r.custom_id] for r in requests)
    assert first.answer is None and "HTTP 500" in first.error
    assert second.answer.finish_reason == "length"  # stored like a live truncated answer
    assert third.answer is not None and json.loads(third.answer.raw_text)
    assert server.chat_count == 0  # nothing went live
