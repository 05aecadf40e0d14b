"""Kill-and-resume: SIGKILL `letterchunk run` at many points, rerun the same command,
get byte-identical output, and never ask the server again for an answer it already gave.

The real CLI runs as a subprocess (``python -m letterchunk run``) against tests/fake_openai.py
served from this test process on 127.0.0.1.  The server answers every request with a valid,
grounded enrichment built from the request's own schema (deterministic: the answer is a
function of the request), so an uninterrupted run and a killed-and-resumed run must agree.

Chain 1 (concurrency 1, strict): the server SIGKILLs the CLI when the (k+1)-th request of the
whole corpus arrives, for k in kill_points() (five points spread over the run, a letter boundary
included, computed from the segmenter), and the same command is rerun after each kill.  With
one request in flight, the first k answers were received before request k+1 was sent, so they
must come from the cache on every later run: the server must never see those request bodies
again.

Chain 2 (concurrency 3, any moment): the CLI is killed 0-50 ms after an answer near a letter's
end is sent — while it validates, caches and writes — and rerun.

After every kill, any output file that exists equals the uninterrupted run's file (files are
written whole or not at all).  Compared: DIR/YYYY.jsonl, YYYY_cleaned.txt, YYYY.evidence.jsonl.
Not compared: run.json (wall times), *.report.jsonl / report.html (they record latency and
whether an answer came live or from the cache), and hidden ``.*.tmp`` files a kill can leave
mid-rename (never read by anything).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, answer, reset, response_schema
from shared_run import once
from test_fault_matrix import valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTERS = [ROOT / "corpus" / "letters" / f"{y}.txt" for y in (1971, 1972, 1973, 1974)]
COMPARED = (".jsonl", "_cleaned.txt")
RUN_TIMEOUT_S = 180


def chunks_per_letter() -> list[int]:
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    return [len(segment_letter(load_letter(p))) for p in LETTERS]


def kill_points(sizes: list[int]) -> list[int]:
    """Answers received before each kill: none, mid-first letter, the first letter done
    (letter boundary), just into the third letter, and one request before the end."""
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    total = ends[-1]
    points = sorted({0, min(2, ends[0] - 1), ends[0], ends[1] + 1, total - 1})
    assert len(points) == 5 and points[-1] < total, points
    return points


def body_key(body: dict) -> str:
    data = {"messages": body.get("messages"), "schema": response_schema(body)}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def outputs(folder: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if not p.name.startswith(".")
        and p.name.endswith(COMPARED)
        and not p.name.endswith(".report.jsonl")
    }


class Harness:
    """One fake server for the whole test; runs the CLI and kills it on cue."""

    def __init__(self, server: FakeOpenAI, tmp: Path) -> None:
        self.server, self.tmp = server, tmp
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.kill_on_arrival: int | None = (
            None  # kill when this request number (1-based, this run) arrives
        )
        self.kill_after_answer: tuple[int, float] | None = None  # (request number, delay s)
        self.seen: list[str] = []  # body keys of this run, in arrival order
        self.answered: list[str] = []  # body keys answered in this run (200 sent)
        server.default = self.respond

    def respond(self, body: dict):
        key = body_key(body)
        with self.lock:
            self.seen.append(key)
            n = len(self.seen)
            proc = self.proc
        if self.kill_on_arrival == n and proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return reset()
        if self.kill_after_answer and self.kill_after_answer[0] == n and proc is not None:
            threading.Timer(self.kill_after_answer[1], proc.send_signal, (signal.SIGKILL,)).start()
        with self.lock:
            self.answered.append(key)
        return answer(valid_for(body))

    def run(
        self,
        out: Path,
        cache: Path,
        *,
        concurrency: int = 1,
        kill_on_arrival: int | None = None,
        kill_after_answer: tuple[int, float] | None = None,
    ) -> int:
        self.seen, self.answered = [], []
        self.kill_on_arrival, self.kill_after_answer = kill_on_arrival, kill_after_answer
        env = dict(os.environ)
        env.update(
            OPENAI_BASE_URL=self.server.base_url,
            OPENAI_API_KEY="sk-dummy-test-key",
            LETTERCHUNK_MODEL="fake-model",
        )
        cmd = [
            sys.executable,
            "-m",
            "letterchunk",
            "run",
            *map(str, LETTERS),
            "--out",
            str(out),
            "--cache-dir",
            str(cache),
            "--concurrency",
            str(concurrency),
            "--quiet",
        ]
        with self.lock:
            self.proc = subprocess.Popen(
                cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        _, err = self.proc.communicate(timeout=RUN_TIMEOUT_S)
        code = self.proc.returncode
        with self.lock:
            self.proc = None
        if kill_on_arrival is None and kill_after_answer is None:
            assert code == 0, err
        self.last_err = err
        return code


@pytest.fixture
def harness(tmp_path):
    with FakeOpenAI() as server:
        yield Harness(server, tmp_path)


@pytest.fixture
def baseline(harness, tmp_path):
    """The uninterrupted run's files and the body keys it sent, in order (one run for the
    tests of this file: the server's answers and the CLI's requests are deterministic)."""

    def run() -> tuple[dict[str, bytes], list[str]]:
        out = tmp_path / "baseline"
        harness.run(out, tmp_path / "cache-baseline")
        return outputs(out), list(harness.answered)

    files, answered = once("resume-baseline", run)
    assert sorted(files) == sorted(
        f"{y}{suffix}"
        for y in (1971, 1972, 1973, 1974)
        for suffix in (".jsonl", "_cleaned.txt", ".evidence.jsonl")
    )
    return files, answered


def assert_partial_output_is_whole(out: Path, expected: dict[str, bytes]) -> None:
    if not out.exists():
        return
    for name, data in outputs(out).items():
        assert data == expected[name], f"{name} differs from the uninterrupted run after a kill"


def test_sigkill_at_five_points_then_resume_is_byte_identical(harness, baseline, tmp_path):
    expected, all_requests = baseline
    sizes = chunks_per_letter()
    total = len(all_requests)
    assert (
        total == sum(sizes) and len(set(all_requests)) == total
    )  # one request per chunk, all distinct
    points = kill_points(sizes)
    out, cache = tmp_path / "out", tmp_path / "cache"
    answered: set[str] = set()
    for k in points:
        code = harness.run(out, cache, kill_on_arrival=k - len(answered) + 1)
        assert code == -signal.SIGKILL, harness.last_err
        again = answered & set(harness.seen)
        assert not again, (
            f"kill at {k}: the server was asked again for {len(again)} answered chunk(s)"
        )
        answered |= set(harness.answered)
        assert len(answered) == k
        assert_partial_output_is_whole(out, expected)
    code = harness.run(out, cache)  # the same command, to completion
    assert code == 0, harness.last_err
    assert not answered & set(harness.seen)
    assert len(harness.seen) == total - points[-1]
    assert outputs(out) == expected
    assert answered | set(harness.answered) == set(all_requests)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete"
    assert run["totals"]["cache_hits"] == points[-1]


def test_sigkill_while_a_letter_is_written_with_concurrency(harness, baseline, tmp_path):
    expected, _ = baseline
    out, cache = tmp_path / "out", tmp_path / "cache"
    # request 3 is 1971's last; with 3 in flight the kill lands while answers are cached,
    # validated and the letter written
    for n, delay in [(3, 0.0), (3, 0.02), (4, 0.05)]:
        harness.run(out, cache, concurrency=3, kill_after_answer=(n, delay))
        assert_partial_output_is_whole(out, expected)
    harness.run(out, cache, concurrency=3)
    assert outputs(out) == expected


def test_enrich_in_place_resumes_without_asking_again(tmp_path, monkeypatch):
    """`letterchunk enrich DIR` killed after writing its first letter leaves that letter enriched
    and the second still segmented (each file is replaced whole).  Rerun with the cache off (so
    the cache cannot hide a re-ask): only the second letter is asked, the files equal an
    uninterrupted enrich, and a third run asks nothing and changes nothing."""
    from letterchunk.cli import main
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    letters = [str(p) for p in LETTERS[:2]]
    second = len(segment_letter(load_letter(letters[1])))
    with FakeOpenAI(default=lambda body: answer(valid_for(body))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        ref, out = tmp_path / "ref", tmp_path / "out"
        for folder in (ref, out):
            assert main(["segment", *letters, "--out", str(folder), "-q"]) == 0
        assert main(["enrich", str(ref), "--cache", "off", "--quiet"]) == 0
        # the state a kill after the first letter leaves: letter 1 enriched, letter 2 segmented
        assert main(["enrich", str(out), "--cache", "off", "--quiet"]) == 0
        stem = Path(letters[1]).stem
        for name in (f"{stem}.jsonl", f"{stem}.evidence.jsonl", f"{stem}.report.jsonl"):
            (out / name).unlink(missing_ok=True)
        assert main(["segment", letters[1], "--out", str(out), "-q"]) == 0
        server.requests.clear()
        assert main(["enrich", str(out), "--cache", "off", "--quiet"]) == 0
        assert server.chat_count == second  # only the letter not yet enriched was asked
        server.requests.clear()
        assert main(["enrich", str(out), "--cache", "off", "--quiet"]) == 0
        assert server.chat_count == 0
    assert outputs(out) == outputs(ref)
