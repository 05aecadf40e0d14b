"""The Python API: what docs/usage.md's "Use it from Python" section shows works as written.

Everything comes from ``letterchunk`` itself; the main job runs against the scripted fake
server through the same backend choice as the CLI (``OPENAI_BASE_URL`` in the environment).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import letterchunk
from fake_openai import FakeOpenAI
from test_pipeline import grounded_answer

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "letters"


def test_segment_and_validate_from_code(tmp_path):
    letter = letterchunk.load_letter(CORPUS / "1977.txt")
    chunks = letterchunk.segment_letter(letter)
    assert letter.year == 1977 and len(chunks) == 7
    assert all(isinstance(c, letterchunk.Chunk) for c in chunks)
    assert all(
        letter.text[c.metadata.source_span.start_char : c.metadata.source_span.end_char_exclusive]
        == c.content
        for c in chunks
    )

    (tmp_path / letter.cleaned_name).write_text(letter.text, encoding="utf-8")
    (tmp_path / "1977.jsonl").write_text(
        "".join(letterchunk.dump_chunk(c) + "\n" for c in chunks), encoding="utf-8"
    )
    report = letterchunk.validate_paths([tmp_path], stage="segmented")
    assert isinstance(report, letterchunk.ValidationReport)
    assert report.chunks == 7 and report.errors == []


def test_run_from_code_writes_the_same_files_as_the_cli(tmp_path, monkeypatch):
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        outcomes = letterchunk.run(
            [CORPUS / "1971.txt"], tmp_path / "out", model="fake-model", cache="off"
        )
        assert server.chat_count == len(outcomes[0].outcomes) > 0
    [outcome] = outcomes
    assert isinstance(outcome, letterchunk.LetterOutcome)
    assert outcome.year == 1971 and outcome.failed == [] and outcome.errors == []
    lines = (tmp_path / "out" / "1971.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["chunk_id"] for line in lines] == [c.chunk_id for c in outcome.chunks]
    assert letterchunk.validate_paths([tmp_path / "out"], stage="enriched").errors == []


def test_run_refuses_a_bad_path_before_any_backend(tmp_path, monkeypatch):
    from letterchunk.llm import backend

    monkeypatch.setattr(
        backend,
        "embedded_server",
        lambda **k: pytest.fail("the embedded server must not be started"),
    )
    with pytest.raises(letterchunk.InputError, match="no such file or folder"):
        letterchunk.run([tmp_path / "missing"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        letterchunk.nope  # noqa: B018


def test_run_from_code_writes_run_json_like_the_cli(tmp_path, monkeypatch):
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = tmp_path / "out"
        letterchunk.run([CORPUS / "1971.txt"], out, model="fake-model", cache="off")
        served = len(server.all_chat_requests)
    ledger = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert ledger["status"] == "complete" and ledger["model"] == "fake-model"
    assert ledger["letters"]["1971"]["state"] == "complete"
    assert ledger["totals"]["requests"] == served > 0


def test_two_runs_on_one_folder_are_refused_from_code_as_from_the_shell(tmp_path, monkeypatch):
    from letterchunk.runner.lock import folder_lock

    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = tmp_path / "out"
        out.mkdir()
        with folder_lock(out), pytest.raises(letterchunk.FolderLocked, match="already writing"):
            letterchunk.run([CORPUS / "1971.txt"], out, model="fake-model", cache="off")
        assert len(server.all_chat_requests) == 0
    assert not (out / "1971.jsonl").exists()
