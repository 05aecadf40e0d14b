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
from letterchunk.cli import main
from letterchunk.cli.batch import EXIT_PENDING
from letterchunk.llm.batch import BatchAPI, BatchRequest, split_requests
from letterchunk.llm.connect import open_client
from letterchunk.llm.judge import _p_yes, is_question
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
        live = [r.body for r in server.all_chat_requests]
    # same bodies, same order: each chunk's structured request, then its yes/no questions
    assert planned and [r.body for r in planned] == live
    assert any(is_question(r.body) for r in planned)


def test_requests_are_split_by_count_and_bytes():
    requests = [BatchRequest(f"k{i}", f"c{i}", {"x": "y" * 50}) for i in range(7)]
    size = len(requests[0].line()) + 1
    assert [len(p) for p in split_requests(requests, max_requests=3)] == [3, 3, 1]
    assert [len(p) for p in split_requests(requests, max_bytes=2 * size)] == [2, 2, 2, 1]


def test_the_batch_api_round_trip_on_the_fake_server(env, tmp_path):
    with FakeOpenAI(rich_answer, judge=lambda body: 0.8) as server:
        env(server)
        server.enqueue(server_error(), truncated())
        with open_client(cache_dir=tmp_path / "cache") as client:
            planned = plan_requests([LETTER], client, RunOptions())
            asked = next(r for r in planned if is_question(r.body))
            requests = [r for r in planned if not is_question(r.body)][:3] + [asked]
            path = tmp_path / "in.jsonl"
            path.write_text("".join(r.line() + "\n" for r in requests))
            with BatchAPI(client.settings) as api:
                state = api.create(api.upload(path), {"part": "1"})
                assert api.find(state.input_file_id).id == state.id
                done = api.retrieve(state.id)
                assert (done.status, done.total, done.completed, done.failed) == (
                    "completed",
                    4,
                    3,
                    1,
                )
                found = api.results(done, model="fake-model", questions={asked.custom_id})
                results = {r.custom_id: r for r in found}
    first, second, third, question = (results[r.custom_id] for r in requests)
    assert first.answer is None and "HTTP 500" in first.error
    assert second.answer.finish_reason == "length"  # stored like a live truncated answer
    assert third.answer is not None and json.loads(third.answer.raw_text)
    # a yes/no question's answer is kept as a live question keeps it: its top logprobs
    assert _p_yes(json.loads(question.answer.raw_text)) == pytest.approx(0.8)
    assert len(server.all_chat_requests) == 0  # nothing went live


# ------------------------------------------------------------------------------ through the CLI

PRICES = {
    "models": {
        "fake-model": {
            "input_per_mtok": 1.0,
            "output_per_mtok": 4.0,
            "batch_input_per_mtok": 0.5,
            "batch_output_per_mtok": 2.0,
        }
    }
}


def _outputs(folder: Path) -> dict[str, bytes]:
    """The files a run writes for its letters (the report and ledger carry run ids and times)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.name.endswith((".jsonl", "_cleaned.txt")) and not p.name.endswith(".report.jsonl")
    }


def _live_run(env, tmp_path) -> dict[str, bytes]:
    with FakeOpenAI(rich_answer) as server:
        env(server)
        out = tmp_path / "live"
        assert main(["run", str(LETTER), "--out", str(out), "--cache", "off", "-q"]) == 0
    return _outputs(out)


def _cli(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture
def batch_env(env, tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    monkeypatch.setenv("LETTERCHUNK_PRICES", str(prices))
    monkeypatch.setenv("LETTERCHUNK_CACHE_DIR", str(tmp_path / "cache"))
    return env


def test_submit_status_collect_writes_what_a_live_run_writes(batch_env, tmp_path, capsys):
    live = _live_run(batch_env, tmp_path)
    out = tmp_path / "batch"
    with FakeOpenAI(rich_answer) as server:
        batch_env(server)
        server.batch_outcome = "in_progress"
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        assert _cli("batch", "status", str(out), "--json") == 0
        parts = json.loads(capsys.readouterr().out)
        assert [p["status"] for p in parts] == ["in_progress"]
        assert _cli("batch", "collect", str(out), "-q") == EXIT_PENDING
        assert not (out / "1977.jsonl").exists()  # nothing run while the batch is out
        server.batch_outcome = "completed"
        assert _cli("batch", "collect", str(out), "-q") == 0
        assert server.chat_count == 0  # every answer came from the batch
        answered = len(server.batch_lines)
        # collecting again pays nothing and writes the same files
        assert _cli("batch", "collect", str(out), "-q") == 0
        assert len(server.batch_lines) == answered and server.chat_count == 0
    assert _outputs(out) == live
    ledger = json.loads((out / "run.json").read_text())
    spent = ledger["batch"]
    # every request went in the batch (structured calls and questions); `answers` counts chunks
    assert answered == len(json.loads((out / "batch.json").read_text())["chunks"])
    assert spent["answers"] == len(spent["answered_chunk_ids"]) == 7 < answered
    assert spent["failed_requests"] == [] and ledger["totals"]["requests"] == 0
    assert spent["cost_usd"] == round(
        (spent["prompt_tokens"] * 0.5 + spent["completion_tokens"] * 2.0) / 1e6, 6
    )


def test_requests_the_batch_did_not_answer_are_asked_live_and_reported(batch_env, tmp_path):
    live = _live_run(batch_env, tmp_path)
    out = tmp_path / "batch"
    with FakeOpenAI(rich_answer) as server:
        batch_env(server)
        server.enqueue(server_error())  # the first request fails inside the batch
        server.batch_outcome, server.expire_after = "expired", 5  # and the window closes early
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        assert _cli("batch", "collect", str(out), "-q") == 0
        state = json.loads((out / "batch.json").read_text())
        total = len(state["chunks"])
        # the failed one and the expired ones (structured calls and questions) are asked live
        assert len(server.all_chat_requests) == total - 4
    assert _outputs(out) == live
    failed = json.loads((out / "run.json").read_text())["batch"]["failed_requests"]
    assert len(failed) == total - 4
    assert "HTTP 500" in failed[0]["error"] and "batch_expired" in failed[-1]["error"]
    sources = {
        r["chunk_id"]: r.get("source")
        for r in map(json.loads, (out / "1977.report.jsonl").read_text().splitlines())
    }
    assert all(sources[f["chunk_id"]] == "live" for f in failed)


def test_a_failed_batch_is_resubmitted_then_collected(batch_env, tmp_path):
    live = _live_run(batch_env, tmp_path)
    out = tmp_path / "batch"
    with FakeOpenAI(rich_answer) as server:
        batch_env(server)
        server.batch_outcome = "failed"
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        assert _cli("batch", "collect", str(out), "--resubmit", "-q") == EXIT_PENDING
        assert len(server.batches) == 2 and not server.batch_lines
        server.batch_outcome = "completed"
        assert _cli("batch", "collect", str(out), "-q") == 0
        assert server.chat_count == 0
    assert _outputs(out) == live
    assert json.loads((out / "run.json").read_text())["batch"]["failed_requests"] == []


def test_a_stopped_submit_resumes_without_paying_twice(batch_env, tmp_path, monkeypatch):
    out = tmp_path / "batch"
    real_create = BatchAPI.create

    def lost_answer(self, file_id, metadata):
        real_create(self, file_id, metadata)  # the batch is created, then the process dies
        raise KeyboardInterrupt

    with FakeOpenAI(rich_answer) as server:
        batch_env(server)
        monkeypatch.setattr(BatchAPI, "create", lost_answer)
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 130
        monkeypatch.setattr(BatchAPI, "create", real_create)
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        uploads = [f for f in server.files.values() if f["purpose"] == "batch"]
        assert len(server.batches) == 1 and len(uploads) == 1  # found, not made again
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        assert len(server.batches) == 1


def test_a_stopped_collect_resumes_to_the_same_files(batch_env, tmp_path, monkeypatch):
    live = _live_run(batch_env, tmp_path)
    out = tmp_path / "batch"
    import letterchunk.cli.batch as cli_batch

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # after the answers were stored, before any letter was written

    with FakeOpenAI(rich_answer) as server:
        batch_env(server)
        assert _cli("batch", "submit", str(LETTER), "--out", str(out), "-q") == 0
        monkeypatch.setattr(cli_batch, "run_paths", killed)
        assert _cli("batch", "collect", str(out), "-q") == 130
        monkeypatch.undo()
        batch_env(server)
        monkeypatch.setenv("LETTERCHUNK_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("LETTERCHUNK_PRICES", str(tmp_path / "prices.json"))
        answered = len(server.batch_lines)
        assert _cli("batch", "collect", str(out), "-q") == 0
        assert len(server.batch_lines) == answered and server.chat_count == 0
    assert _outputs(out) == live
