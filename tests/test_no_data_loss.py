"""A failure never loses data, every model call is counted, and one process owns a folder.

Everything goes through the real CLI (``letterchunk.cli.main``, or ``python -m letterchunk`` in
a subprocess where a signal or a second process is needed) against tests/fake_openai.py on
127.0.0.1.  The server answers every request with a valid, grounded enrichment built from the
request's schema, except the calls a test scripts (``Script``: call N gets ``steps[N]``).

Asserted:
* a halted (exit 3), skipped (exit 1) or interrupted (exit 130) ``enrich``/``run`` keeps every
  chunk: the ones not enriched stay byte for byte as segmented, the file validates at stage
  ``segmented``; ``validate --stage enriched`` says the letter is incomplete; ``run.json`` and
  the end summary mark it; a rerun asks only the chunks still unenriched and finishes it;
* ``run.json`` counts every request the server answered, the halting chunk's included;
* ``repair FILE`` exits like ``validate`` (file- and letter-level rules, non-JSONL input) and
  counts its model calls honestly;
* a second process on the same output folder exits 2 naming the first one's pid, before any
  request; a lock file left by a dead process does not block.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, answer, refusal
from letterchunk.cli import main
from letterchunk.layout import LOCK_NAME
from test_fault_matrix import Script, valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"


@pytest.fixture
def backend(fake_server):
    """``backend(steps)`` -> a started FakeOpenAI scripted by ``Script(steps)``, env pointed at
    it."""
    return lambda steps=None: fake_server(Script(steps or {}))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _ids(lines: list[str]) -> list[str]:
    return [json.loads(x)["chunk_id"] for x in lines]


def _summary(line: str) -> str:
    return json.loads(line)["metadata"]["contextual_summary"]


def _segment(out: Path) -> list[str]:
    assert main(["segment", str(LETTER), "--out", str(out), "--quiet"]) == 0
    return _lines(out / "1977.jsonl")


def _validate(capsys, out: Path, stage: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["validate", str(out), "--stage", stage])
    return code, capsys.readouterr().out


REFUSE_CHUNK_2 = {2: refusal(), 3: refusal()}  # chunk 2's answer and its one re-ask


@pytest.mark.parametrize(("on_failure", "exit_code"), [("halt", 3), ("skip", 1)])
def test_enrich_that_stops_keeps_every_chunk_and_a_rerun_finishes(
    tmp_path, capsys, backend, on_failure, exit_code
):
    out = tmp_path / "out"
    segmented = _segment(out)
    server = backend(REFUSE_CHUNK_2)
    code = main(
        ["enrich", str(out), "--cache", "off", "--max-attempts", "1", "--on-failure", on_failure]
    )
    err = capsys.readouterr().err
    assert code == exit_code, err

    lines = _lines(out / "1977.jsonl")
    assert _ids(lines) == _ids(segmented)  # no chunk lost
    assert lines[1] == segmented[1]  # the failed chunk exactly as segmented
    enriched = [i for i, x in enumerate(lines) if _summary(x)]
    if on_failure == "halt":  # chunk 1 done, the rest never asked
        assert enriched == [0] and lines[2:] == segmented[2:]
    else:  # every other chunk enriched
        assert enriched == [i for i in range(len(lines)) if i != 1]
    assert _validate(capsys, out, "segmented")[0] == 0
    code, report = _validate(capsys, out, "enriched")
    assert code == 1 and "letter.incomplete" in report and "letterchunk enrich DIR" in report

    ledger = json.loads((out / "run.json").read_text())
    letter = ledger["letters"]["1977"]
    pending = [_ids(segmented)[i] for i in range(len(lines)) if i not in enriched]
    assert ledger["incomplete_letters"] == ["1977"]
    assert letter["state"] == "incomplete" and letter["pending_chunk_ids"] == pending
    assert f"letter 1977 incomplete: {len(enriched)} of {len(lines)} chunk(s) enriched" in err
    assert f"letterchunk enrich {out}" in err
    # every answered request is in the ledger, the failed chunk's two included
    assert ledger["totals"]["requests"] == len(server.all_chat_requests)
    assert ledger["totals"]["total_tokens"] == server.usage_total.total_tokens

    # the rerun asks only what is left, and ends where one clean pass ends
    server = backend()
    assert main(["enrich", str(out), "--cache", "off", "--quiet"]) == 0
    assert server.chat_count == len(pending)
    assert _validate(capsys, out, "enriched")[0] == 0
    clean = tmp_path / "clean"
    _segment(clean)
    assert main(["enrich", str(clean), "--cache", "off", "--quiet"]) == 0
    for name in ("1977.jsonl", "1977.evidence.jsonl"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    assert json.loads((out / "run.json").read_text())["incomplete_letters"] == []


def test_halted_run_counts_every_call_and_enrich_finishes_it(tmp_path, capsys, backend):
    out = tmp_path / "out"
    segmented = _segment(tmp_path / "seg")
    server = backend(REFUSE_CHUNK_2)
    code = main(["run", str(LETTER), "--out", str(out), "--cache", "off", "--max-attempts", "1"])
    err = capsys.readouterr().err
    assert code == 3 and "halted" in err
    lines = _lines(out / "1977.jsonl")
    assert _ids(lines) == _ids(segmented) and lines[1:] == segmented[1:]
    assert _validate(capsys, out, "segmented")[0] == 0
    ledger = json.loads((out / "run.json").read_text())
    assert ledger["status"] == "halted"
    assert server.chat_count == 3  # chunk 1, chunk 2 and its re-ask
    # ... and chunk 1's yes/no questions: every answered request is in the ledger
    assert server.question_count > 0
    assert ledger["totals"]["requests"] == 3 + server.question_count
    assert ledger["totals"]["total_tokens"] == server.usage_total.total_tokens
    assert ledger["letters"]["1977"]["failed_chunks"] == 1

    server = backend()
    assert main(["enrich", str(out), "--cache", "off", "--quiet"]) == 0
    assert server.chat_count == len(segmented) - 1
    assert _validate(capsys, out, "enriched")[0] == 0


def test_a_halted_rerun_of_run_never_undoes_an_earlier_complete_output(tmp_path, capsys, backend):
    out = tmp_path / "out"
    backend()
    assert main(["run", str(LETTER), "--out", str(out), "--cache", "off", "--quiet"]) == 0
    before = (out / "1977.jsonl").read_bytes()
    evidence = (out / "1977.evidence.jsonl").read_bytes()
    backend(REFUSE_CHUNK_2)
    assert (
        main(
            [
                "run",
                str(LETTER),
                "--out",
                str(out),
                "--cache",
                "off",
                "--quiet",
                "--max-attempts",
                "1",
            ]
        )
        == 3
    )
    assert (out / "1977.jsonl").read_bytes() == before  # chunk 2 keeps its earlier enrichment
    assert (out / "1977.evidence.jsonl").read_bytes() == evidence
    assert _validate(capsys, out, "enriched")[0] == 0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "letterchunk", *args]


def _env(server: FakeOpenAI) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-dummy-test-key",
        LETTERCHUNK_MODEL="fake-model",
        PYTHONPATH=str(ROOT / "src"),
    )
    return env


def test_ctrl_c_keeps_the_chunks_enriched_so_far(tmp_path, capsys):
    out = tmp_path / "out"
    segmented = _segment(out)
    procs: list[subprocess.Popen] = []
    structured = [0]  # structured requests answered by this responder (questions go elsewhere)

    def respond(request: dict):
        structured[0] += 1
        if structured[0] == 3:  # the third structured request: Ctrl-C while it is in flight
            procs[0].send_signal(signal.SIGINT)
            time.sleep(0.5)
        return answer(valid_for(request))

    with FakeOpenAI(default=respond) as server:
        procs.append(
            subprocess.Popen(
                _cli("enrich", str(out), "--cache", "off"),
                env=_env(server),
                stderr=subprocess.PIPE,
                text=True,
                # a shell's background job starts with SIGINT ignored, and Python then never
                # raises KeyboardInterrupt: give the CLI the disposition a terminal gives it
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        )
        _, err = procs[0].communicate(timeout=120)
    assert procs[0].returncode == 130, err
    lines = _lines(out / "1977.jsonl")
    assert _ids(lines) == _ids(segmented)
    assert [bool(_summary(x)) for x in lines[:2]] == [True, True]
    assert lines[2:] == segmented[2:]
    assert _validate(capsys, out, "segmented")[0] == 0
    ledger = json.loads((out / "run.json").read_text())
    assert ledger["status"] == "interrupted" and ledger["incomplete_letters"] == ["1977"]
    # the answers received (two chunks' calls and yes/no questions); the third never came
    assert ledger["totals"]["requests"] == len(server.all_chat_requests) - 1


# ----------------------------------------------------------------- one process per folder


def test_second_run_on_the_same_folder_exits_2_naming_the_first(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    first_arrived, go_on = threading.Event(), threading.Event()

    def respond(request: dict):
        first_arrived.set()
        go_on.wait(60)
        return answer(valid_for(request))

    with FakeOpenAI(default=respond) as server:
        proc = subprocess.Popen(
            _cli("run", str(LETTER), "--out", str(out), "--cache", "off", "--quiet"),
            env=_env(server),
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert first_arrived.wait(60), "the first run never asked the server"
            for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LETTERCHUNK_MODEL"):
                monkeypatch.setenv(name, _env(server)[name])
            code = main(["run", str(LETTER), "--out", str(out), "--cache", "off"])
            err = capsys.readouterr().err
            assert code == 2
            assert f"process {proc.pid} is already writing this folder" in err, err
            assert server.chat_count == 1  # the second run asked nothing
        finally:
            go_on.set()
            _, perr = proc.communicate(timeout=120)
    assert proc.returncode == 0, perr
    assert not (out / LOCK_NAME).exists()  # released on the way out


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / LOCK_NAME).write_text(f"{dead.pid}\n")
    assert main(["segment", str(LETTER), "--out", str(out), "--quiet"]) == 0
    assert (out / "1977.jsonl").is_file() and not (out / LOCK_NAME).exists()


# ----------------------------------------------------------------- repair exits like validate


def _repair_case(folder: Path, enriched_letter, write_letter, case: str) -> Path:
    path = write_letter(enriched_letter, folder)
    if case == "duplicate-id":
        lines = _lines(path)
        path.write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")
    elif case == "missing-cleaned":
        (folder / "1987_cleaned.txt").unlink()
    elif case == "not-jsonl":
        path.write_text("Letter to the shareholders\n" * 40, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("case", "exit_code", "message"),
    [
        ("duplicate-id", 1, "corpus.duplicate_id"),
        ("missing-cleaned", 1, "source.cleaned_missing"),
        ("not-jsonl", 2, "not a chunk JSONL file"),
    ],
)
def test_repair_exits_like_validate(
    tmp_path, capsys, enriched_letter, write_letter, case, exit_code, message
):
    path = _repair_case(tmp_path / "out", enriched_letter, write_letter, case)
    before = path.read_bytes()
    assert main(["validate", str(path), "--stage", "enriched"]) == exit_code
    capsys.readouterr()
    code = main(["repair", str(path)])
    err = capsys.readouterr().err
    assert code == exit_code, err
    assert message in err
    if case == "not-jsonl":
        assert path.read_bytes() == before  # refused: untouched, no report
        assert not (tmp_path / "out" / "1987.report.jsonl").exists()
        assert err.count("letterchunk:") == 1


def test_repair_counts_model_calls_honestly(
    tmp_path, capsys, enriched_letter, write_letter, backend, monkeypatch
):
    letter = enriched_letter
    data = letter.chunks[0].model_dump(mode="json")
    too_long = "It grew. It paid. It bought. It sold."  # four sentences: at most three allowed
    data["metadata"]["contextual_summary"] = too_long
    from letterchunk.contract.schema import Chunk

    letter.chunks[0] = Chunk.model_validate(data)
    path = write_letter(letter, tmp_path / "out")
    stubborn = answer({"contextual_summary": too_long})
    server = backend({1: stubborn, 2: stubborn})
    # tool calling: free strings, so the long summary reaches the validator every time (and a
    # summary is no list item that code could drop)
    monkeypatch.setenv("LETTERCHUNK_INSTRUCTOR_MODE", "TOOLS")
    code = main(["repair", str(path), "--cache", "off", "--max-attempts", "2"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert server.chat_count == 2
    assert "after 2 attempt(s)" in err
