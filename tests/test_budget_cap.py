"""Budget caps: --max-tokens-total / --max-cost stop the run *before* the request that
would pass the cap, exit 4, leave only whole valid letters on disk, and a rerun with a higher
cap resumes from the cache and completes with the same bytes as an uncapped run.

The cap is computed from an uncapped baseline so the test pins the exact semantics: with one
request in flight, request i is sent only if (tokens already spent) + (its estimate) <= cap,
where the estimate is what the client charges the limiter (llm.estimate_tokens of the request:
prompt + schema + max_tokens, the hosted API's own worst case).  We choose the largest cap that
lets 1977 finish; 1978's first request must then be refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, answer
from letterchunk.cli import EXIT_BUDGET, EXIT_USAGE, main
from letterchunk.contract.validate import validate_path
from letterchunk.llm.client import estimate_tokens
from test_fault_matrix import valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTERS = [str(ROOT / "corpus" / "letters" / f"{y}.txt") for y in (1977, 1978)]


def chunk_counts() -> tuple[int, int]:
    """(chunks of 1977, chunks of both letters), from the segmenter: one request per chunk."""
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    n = [len(segment_letter(load_letter(p))) for p in LETTERS]
    return n[0], sum(n)


class Recorder:
    """Valid grounded answers; remembers the estimate and the letter year of every request, the
    one-token yes/no questions (answered by :meth:`judge`, without a probability) included."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int]] = []  # (estimate, letter year)

    def _note(self, body: dict, year: int) -> None:
        self.log.append((estimate_tokens(body), year))

    def __call__(self, body: dict):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        match = re.search(r"Letter year: (\d{4})", user)
        assert match, "a structured request names its letter's year"
        self._note(body, int(match.group(1)))
        return answer(valid_for(body))

    def judge(self, body: dict) -> None:
        # a standalone question quotes no year: it follows its chunk's structured request
        self._note(body, self.log[-1][1])
        return None


@pytest.fixture
def server(monkeypatch):
    recorder = Recorder()
    with FakeOpenAI(default=recorder, judge=recorder.judge) as srv:
        srv.recorder = recorder
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        yield srv


def run(out: Path, cache: Path, *extra: str) -> int:
    return main(["run", *LETTERS, "--out", str(out), "--cache-dir", str(cache), "--quiet", *extra])


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.glob("*"))
        if p.name.endswith((".jsonl", "_cleaned.txt")) and not p.name.endswith(".report.jsonl")
    }


@pytest.fixture
def baseline(server, tmp_path):
    """Uncapped run: the output, and per request (estimate, tokens served), in send order."""
    out = tmp_path / "baseline"
    assert run(out, tmp_path / "cache-baseline") == 0
    served = [u.total_tokens for u in server.served]
    estimates = [e for e, _ in server.recorder.log]
    years = [y for _, y in server.recorder.log]
    # one structured request per chunk, each chunk's yes/no questions right after it
    assert len(served) == len(estimates) > server.chat_count == chunk_counts()[1]
    assert years == sorted(years)  # the letters are asked in turn
    server.served.clear()
    server.requests.clear()
    server.recorder.log.clear()
    return files(out), estimates, served, years.count(1977)


def cap_that_stops_after_1977(estimates: list[int], served: list[int], n77: int) -> int:
    needed = max(sum(served[:i]) + estimates[i] for i in range(n77))  # every 1977 request fits
    refused = sum(served[:n77]) + estimates[n77]  # 1978's first would pass
    assert needed < refused, "the fixture letters no longer separate; pick other letters"
    return needed


@pytest.mark.parametrize("kind", ["tokens", "cost"])
def test_cap_stops_before_passing_and_rerun_resumes(server, baseline, tmp_path, capsys, kind):
    expected, estimates, served, n77 = baseline
    cap = cap_that_stops_after_1977(estimates, served, n77)
    out, cache = tmp_path / "out", tmp_path / "cache"
    if kind == "tokens":
        flags = ["--max-tokens-total", str(cap)]
    else:  # $1 per million tokens in and out: the cost cap in dollars mirrors the token cap
        prices = tmp_path / "prices.json"
        prices.write_text(
            json.dumps({"models": {"fake-model": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}})
        )
        flags = ["--prices", str(prices), "--max-cost", f"{cap / 1e6:.6f}"]

    code = run(out, cache, *flags)
    err = capsys.readouterr().err
    assert code == EXIT_BUDGET == 4, err
    assert ("--max-tokens-total" if kind == "tokens" else "--max-cost") in err
    spent = server.usage_total.total_tokens
    assert spent <= cap  # never passed
    assert server.chat_count == chunk_counts()[0]  # 1977's chunks; 1978's first request never sent
    # finished letters are whole and valid; the stopped letter, of which nothing was enriched,
    # is written as segmented (so `enrich DIR` can finish it, as the summary says)
    written = files(out)
    assert {k: v for k, v in written.items() if k.startswith("1977")} == {
        k: v for k, v in expected.items() if k.startswith("1977")
    }
    assert [
        v for v in validate_path(out / "1977.jsonl", stage="enriched") if v.severity == "error"
    ] == []
    assert [
        v for v in validate_path(out / "1978.jsonl", stage="segmented") if v.severity == "error"
    ] == []
    ledger = json.loads((out / "run.json").read_text())
    assert ledger["status"] == "budget_exceeded"
    assert ledger["letters"]["1978"]["state"] == "incomplete"
    assert ledger["letters"]["1978"]["written"] is True
    assert ledger["totals"]["total_tokens"] == spent
    if kind == "cost":
        assert ledger["totals"]["cost_usd"] == pytest.approx(spent / 1e6)

    # rerun with a higher cap: 1977 from the cache, only 1978 asked, same bytes as uncapped
    higher = (
        ["--max-tokens-total", str(10 * sum(estimates))]
        if kind == "tokens"
        else [flags[0], flags[1], "--max-cost", "100"]
    )
    assert run(out, cache, *higher) == 0, capsys.readouterr().err
    assert server.chat_count == chunk_counts()[1]
    assert files(out) == expected
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_cost_cap_for_a_model_without_a_price_is_refused(server, tmp_path, capsys):
    code = run(tmp_path / "out", tmp_path / "cache", "--max-cost", "1")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "--max-cost" in err and "price" in err
    assert server.chat_count == 0


def test_help_documents_exit_code_4(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "4   stopped by a budget cap" in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--max-tokens-total" in out and "--max-cost" in out and "exits 4" in out
