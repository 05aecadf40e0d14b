"""The run session (runner/session.py) is one for the CLI and the Python API.

``letterchunk.run`` and ``letterchunk run`` both go through :func:`run_session`: the output
folder checked, the folder lock taken before any server starts or request is sent, the client
opened with the run's limiter, the hooks wrapped with the ledger (``DIR/run.json``), the
prompt-size check resolved.  These tests run both sides against the scripted fake server and
compare what they leave: the same run.json keys and figures, the same refusal of a second run
on one folder, the same budget stop, the same limits applied.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

import letterchunk
from letterchunk.cli import EXIT_BUDGET, EXIT_OK, EXIT_USAGE, main
from letterchunk.llm import backend as embedded
from letterchunk.runner.session import Backend, Limits, run_session
from letterchunk.settings import HOSTED_CONTEXT
from test_pipeline import grounded_answer

LETTER = Path(__file__).resolve().parents[1] / "corpus" / "letters" / "1971.txt"


def _cli(out: Path, *extra: str) -> int:
    return main(["run", str(LETTER), "--out", str(out), "--cache", "off", "--quiet", *extra])


def _api(out: Path, **kw: object) -> list[letterchunk.LetterOutcome]:
    return letterchunk.run([LETTER], out, cache="off", **kw)  # type: ignore[arg-type]


def _ledger(out: Path) -> dict:
    return json.loads((out / "run.json").read_text(encoding="utf-8"))


def _keys(value: object, prefix: str = "") -> set[str]:
    """Every key path of a JSON object (``letters.1971.state``, ...)."""
    if not isinstance(value, dict):
        return set()
    found = set()
    for key, inner in value.items():
        found.add(prefix + key)
        found |= _keys(inner, f"{prefix}{key}.")
    return found


def _figures(ledger: dict) -> dict:
    """run.json without what differs between two runs of the same work (times)."""
    drop = {"wall_s", "started_at", "waited_s"}

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in drop}
        return value

    return strip(ledger)  # type: ignore[return-value]


def test_python_run_writes_the_same_run_json_as_the_cli(tmp_path, fake_server):
    server = fake_server(grounded_answer)
    assert _cli(tmp_path / "cli", "--tpm", "100000") == EXIT_OK
    shell_requests = len(server.all_chat_requests)
    _api(tmp_path / "api", tpm=100000)
    assert len(server.all_chat_requests) == 2 * shell_requests > 0

    shell, python = _ledger(tmp_path / "cli"), _ledger(tmp_path / "api")
    assert _keys(python) == _keys(shell)
    assert "limits.tpm" in _keys(python) and python["limits"]["tpm"] == 100000
    assert _figures(python) == _figures(shell)
    assert python["status"] == "complete" and python["letters"]["1971"]["state"] == "complete"
    for name in ("1971.jsonl", "1971.evidence.jsonl", "1971_cleaned.txt"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_two_python_runs_on_one_folder_are_refused_like_two_cli_runs(tmp_path, fake_server, capsys):
    server = fake_server(grounded_answer)
    out = tmp_path / "out"
    held, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            with run_session(out, backend=Backend(cache="off")):
                held.set()
                release.wait(timeout=60)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            held.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=60) and not failures
        with pytest.raises(letterchunk.FolderLocked, match="already writing") as refused:
            _api(out)
        assert refused.value.pid == os.getpid() and refused.value.folder == str(out)
        capsys.readouterr()
        assert _cli(out) == EXIT_USAGE  # the code the CLI maps FolderLocked to
        assert "already writing this folder" in capsys.readouterr().err
        assert len(server.all_chat_requests) == 0
        assert not (out / "1971.jsonl").exists()
    finally:
        release.set()
        holder.join(timeout=60)
    assert not failures
    _api(out)  # the folder is free again
    assert _ledger(out)["status"] == "complete"


def test_the_lock_is_taken_before_any_server_starts(tmp_path, monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # no API: the embedded server would start
    monkeypatch.setattr(
        embedded, "embedded_server", lambda **k: pytest.fail("the server must not start")
    )
    out = tmp_path / "out"
    with run_session(out, backend=Backend(cache="offline"), ledger=False) as session:
        assert session.ledger is None and session.folder == out
        with pytest.raises(letterchunk.FolderLocked):
            _api(out)
    assert not (out / "run.json").exists()  # ledger=False keeps none


def test_max_tokens_total_stops_a_python_run_like_the_cli(tmp_path, fake_server, capsys):
    server = fake_server(grounded_answer)
    with pytest.raises(letterchunk.BudgetExceeded):
        _api(tmp_path / "api", max_tokens_total=1000)
    assert _cli(tmp_path / "cli", "--max-tokens-total", "1000") == EXIT_BUDGET
    assert "stopped:" in capsys.readouterr().err
    assert len(server.all_chat_requests) == 0  # every request's estimate passes the cap

    shell, python = _ledger(tmp_path / "cli"), _ledger(tmp_path / "api")
    assert python["status"] == shell["status"] == "budget_exceeded"
    assert python["stop_reason"] == shell["stop_reason"]
    # the letter is written as segmented, every chunk left for a rerun with a higher cap
    assert python["incomplete_letters"] == shell["incomplete_letters"] == ["1971"]
    assert _figures(python["letters"]) == _figures(shell["letters"])
    assert python["letters"]["1971"]["enriched_chunks"] == 0
    assert python["limits"]["max_tokens_total"] == 1000
    for name in ("1971.jsonl", "1971_cleaned.txt"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_a_tpm_limit_from_python_is_built_and_attached(tmp_path, fake_server, monkeypatch):
    fake_server(grounded_answer)
    limits = Limits(tpm=90000, rpm=30)
    with run_session(tmp_path / "a", backend=Backend(cache="off"), limits=limits) as session:
        assert (session.limiter.tpm, session.limiter.rpm) == (90000, 30)
        assert session.client.limiter is session.limiter
    with run_session(tmp_path / "b", backend=Backend(cache="off")) as session:
        assert not session.limiter.active and session.client.limiter is None
    monkeypatch.setenv("OPENAI_TPM_LIMIT", "1234")  # as for the CLI: the option, else the env
    with run_session(tmp_path / "c", backend=Backend(cache="off")) as session:
        assert session.limiter.tpm == 1234 and session.client.limiter is session.limiter


def test_a_tpm_limit_no_request_fits_is_refused_from_python(tmp_path, fake_server):
    server = fake_server(grounded_answer)
    with pytest.raises(letterchunk.ConfigError, match="more than the TPM limit 50"):
        _api(tmp_path / "out", tpm=50)
    assert len(server.all_chat_requests) == 0


def test_python_and_cli_refuse_the_same_oversized_prompts(tmp_path, fake_server, capsys):
    server = fake_server(grounded_answer)
    with run_session(tmp_path / "s", backend=Backend(cache="off"), ledger=False) as session:
        assert session.context_tokens == HOSTED_CONTEXT  # an API's, unless told otherwise
        assert session.options(letterchunk.RunOptions()).context_tokens == HOSTED_CONTEXT
    with pytest.raises(letterchunk.InputError, match="more than the model's 300-token context"):
        _api(tmp_path / "api", context_tokens=300)
    capsys.readouterr()
    assert _cli(tmp_path / "cli", "--context-tokens", "300") == EXIT_USAGE
    assert "more than the model's 300-token context" in capsys.readouterr().err
    assert len(server.all_chat_requests) == 0


def test_an_unwritable_out_dir_is_refused_before_the_lock_and_the_backend(tmp_path, fake_server):
    server = fake_server(grounded_answer)
    out = tmp_path / "out.txt"
    out.write_text("not a folder", encoding="utf-8")
    with pytest.raises(letterchunk.ConfigError, match="is a file"):
        _api(out)
    assert out.read_text(encoding="utf-8") == "not a folder"
    assert len(server.all_chat_requests) == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"timeout_s": 0}, "timeout_s must be positive"),
        ({"retries": -1}, "transport_retries must be >= 0"),
        ({"context_tokens": float("nan")}, "context_tokens must be positive and finite"),
    ],
)
def test_bad_numbers_from_python_are_refused_before_the_folder_is_made(tmp_path, kw, message):
    with pytest.raises(letterchunk.ConfigError, match=message):
        _api(tmp_path / "out", **kw)
    assert not (tmp_path / "out").exists()
