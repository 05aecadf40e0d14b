"""One letter discovery for every command: files and folders of YYYY.txt, bad paths fail first.

``segment`` and ``run`` both take letter files and folders through ``letters.find_letters``; a
path that does not exist or a folder without letters stops the command (exit 2) before any
server is started or any request is sent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from letterchunk.cli import main
from letterchunk.errors import ConfigError, InputError
from letterchunk.layout import find_letters
from letterchunk.llm import backend
from test_pipeline import grounded_answer

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "letters"


@pytest.fixture
def letters(tmp_path) -> Path:
    """A folder like corpus/letters: two short letters, a non-letter and a hidden file."""
    folder = tmp_path / "letters"
    folder.mkdir()
    for name in ("1971.txt", "1972.txt"):
        shutil.copy(CORPUS / name, folder / name)
    (folder / "TRAPS.md").write_text("# not a letter\n")
    (folder / ".DS_Store").write_bytes(b"\x00")
    (folder / "drafts").mkdir()
    return folder


def test_folder_gives_its_txt_files_in_order_and_reports_the_others(letters):
    skipped: list[Path] = []
    found = find_letters([letters], on_skip=skipped.append)
    assert [p.name for p in found] == ["1971.txt", "1972.txt"]
    assert [p.name for p in skipped] == ["TRAPS.md"]  # hidden files and folders: silently ignored


def test_files_and_folders_mix_and_a_letter_named_twice_is_read_once(letters, tmp_path):
    extra = tmp_path / "odd-name.text"
    extra.write_text("a letter named explicitly is always taken")
    found = find_letters([extra, letters, letters / "1972.txt"])
    assert found == [extra, letters / "1971.txt", letters / "1972.txt"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "nope.txt", "no such file or folder; check the path"),
        (lambda d: d / "empty", "holds no letter files (*.txt)"),
        (lambda d: d / "only-notes", "holds no letter files (*.txt)"),
    ],
    ids=["missing", "empty-folder", "folder-without-letters"],
)
def test_unusable_paths_are_input_errors_naming_the_path(tmp_path, make, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "only-notes").mkdir()
    (tmp_path / "only-notes" / "TRAPS.md").write_text("notes")
    path = make(tmp_path)
    with pytest.raises(InputError) as info:
        find_letters([CORPUS / "1971.txt", path])
    assert info.value.path == str(path) and message in str(info.value)


def test_no_path_at_all_is_a_config_error():
    with pytest.raises(ConfigError, match="no letter given"):
        find_letters([])


# ----------------------------------------------------------------- through the CLI


def test_run_takes_a_folder_and_writes_every_letter(letters, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        code = main(["run", str(letters), "--out", str(out), "--cache", "off"])
        assert server.chat_count > 0
    assert code == 0
    for year in (1971, 1972):
        for name in (f"{year}.jsonl", f"{year}_cleaned.txt", f"{year}.evidence.jsonl"):
            assert (out / name).is_file(), name
    err = capsys.readouterr().err
    assert f"skipping {letters / 'TRAPS.md'}: not a letter" in err
    assert "Is a directory" not in err


def test_segment_and_run_find_the_same_letters(letters, tmp_path, monkeypatch):
    seg, run = tmp_path / "seg", tmp_path / "run"
    assert main(["segment", str(letters), "--out", str(seg), "-q"]) == 0
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        assert main(["run", str(letters), "--out", str(run), "--cache", "off", "-q"]) == 0
    cleaned = sorted(p.name for p in seg.glob("*_cleaned.txt"))
    assert (
        cleaned
        == sorted(p.name for p in run.glob("*_cleaned.txt"))
        == ["1971_cleaned.txt", "1972_cleaned.txt"]
    )


@pytest.fixture
def server_starts(monkeypatch) -> list[str]:
    """Every attempt to start the embedded llama-server, recorded instead of run."""
    attempts: list[str] = []

    def refuse(*a, **k):
        attempts.append("started")
        raise AssertionError("the embedded server must not be started")

    monkeypatch.setattr(backend, "embedded_server", refuse)
    monkeypatch.setattr(backend.EmbeddedServer, "start", refuse)
    return attempts


@pytest.mark.parametrize("command", ["run", "segment"])
@pytest.mark.parametrize(
    "make", [lambda d: d / "nope", lambda d: d / "empty"], ids=["missing", "empty-folder"]
)
def test_bad_path_exits_2_before_any_server_or_request(
    tmp_path, monkeypatch, capsys, server_starts, command, make
):
    (tmp_path / "empty").mkdir()
    path, out = make(tmp_path), tmp_path / "out"
    # with no OPENAI_* variable `run` would start the embedded server: it must not get that far
    assert main([command, str(path), "--out", str(out)]) == 2
    assert server_starts == []
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        assert main([command, str(CORPUS / "1971.txt"), str(path), "--out", str(out)]) == 2
        assert server.chat_count == 0 and server.requests == []
    err = capsys.readouterr().err
    assert f"letterchunk: {path}: " in err and ("no such file" in err or "no letter files" in err)
    assert not out.exists()  # nothing written, not even the run ledger
