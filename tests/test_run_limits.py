"""`letterchunk run --tpm/--rpm/--concurrency` wiring: the CLI's limiter keeps a rate-limited
server (tests/fake_openai.py, window scaled to 2 s via LETTERCHUNK_RATE_WINDOW_S) free of 429s,
and the same run without the limit does get 429s (so the test can fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from letterchunk.cli import main
from rich_answers import rich_answer

ROOT = Path(__file__).resolve().parents[1]
LETTERS = [str(ROOT / "corpus" / "letters" / f"{y}.txt") for y in (1977, 1978)]
WINDOW_S = 2.0
TPM = 14_000  # per 2 s window: ~5 of the ~4,000-token estimates, so 3 workers must queue


@pytest.fixture
def env(monkeypatch):
    def setup(server: FakeOpenAI) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        monkeypatch.setenv("LETTERCHUNK_RATE_WINDOW_S", str(WINDOW_S))
        monkeypatch.setenv("LETTERCHUNK_TRANSPORT_RETRIES", "10")

    return setup


@pytest.mark.parametrize(
    ("flags", "env_vars", "server_limits"),
    [
        (["--tpm", str(TPM)], {}, {"tpm_limit": TPM}),
        ([], {"OPENAI_TPM_LIMIT": str(TPM)}, {"tpm_limit": TPM}),
        # 20 requests a 2 s window: about a third of what 3 workers send unthrottled, so they
        # must queue (4 a window made the run wait two minutes and proved no more)
        (["--rpm", "20"], {}, {"rpm_limit": 20}),
    ],
    ids=["tpm-option", "tpm-env", "rpm-option"],
)
def test_limits_keep_the_server_free_of_429s(
    env, monkeypatch, tmp_path, flags, env_vars, server_limits
):
    with FakeOpenAI(rich_answer, latency_s=0.05, window_s=WINDOW_S, **server_limits) as server:
        env(server)
        for k, v in env_vars.items():
            monkeypatch.setenv(k, v)
        code = main(
            [
                "run",
                *LETTERS,
                "--out",
                str(tmp_path / "out"),
                "--cache",
                "off",
                "--quiet",
                "--concurrency",
                "3",
                *flags,
            ]
        )
        assert code == 0
        assert server.rate_limited_count == 0
        from letterchunk.text.clean import load_letter
        from letterchunk.text.segment import segment_letter

        assert server.chat_count == sum(len(segment_letter(load_letter(p))) for p in LETTERS)
    limits = json.loads((tmp_path / "out" / "run.json").read_text())["limits"]
    assert limits["waits"] > 0  # the limiter did hold requests back
    assert limits["window_s"] == WINDOW_S
    if "tpm_limit" in server_limits:
        assert limits["tpm"] == TPM
    else:
        assert limits["rpm"] == 20


def test_without_the_limit_the_same_run_gets_429s(env, tmp_path):
    with FakeOpenAI(rich_answer, latency_s=0.05, window_s=WINDOW_S, tpm_limit=TPM) as server:
        env(server)
        code = main(
            [
                "run",
                *LETTERS,
                "--out",
                str(tmp_path / "out"),
                "--cache",
                "off",
                "--quiet",
                "--concurrency",
                "3",
                # three unlimited workers race for one window: on a loaded CI machine one of
                # them can lose more than ten times in a row (then the run rightly exits 2)
                "--retries",
                "40",
            ]
        )
        assert code == 0  # the transport retries honour Retry-After
        assert server.rate_limited_count > 0
