"""An output folder whose earlier files cannot be replaced: refused before the first request.

``letterchunk run 1977.txt --out d`` over a ``d`` whose files were made read-only once sent and
paid for every request, then failed with a traceback writing ``run.json``.  Every file a run
would replace (each letter's chunks, evidence, repair report, cleaned text, and ``run.json``) is
now checked before anything is sent: exit 2 naming the file and what to do, 0 requests, every
file byte-identical.  As root a mode is no protection, so there the file is made immutable
(``chattr +i``), which is what a read-only file is to root.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from letterchunk.cli import main
from test_fault_matrix import valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
FILES = ["run.json", "1977.jsonl", "1977.evidence.jsonl", "1977.report.jsonl", "1977_cleaned.txt"]


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for this process: mode 0444, or immutable when running as root."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root and chattr +i is not available here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture
def server(monkeypatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=valid_for) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-readonly-0")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        yield fake


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A folder a complete run of 1977 wrote (made once for the module)."""
    out = tmp_path_factory.mktemp("finished") / "d"
    with pytest.MonkeyPatch.context() as env, FakeOpenAI(default=valid_for) as fake:
        env.setenv("OPENAI_BASE_URL", fake.base_url)
        env.setenv("OPENAI_API_KEY", "sk-test-readonly-0")
        env.setenv("LETTERCHUNK_MODEL", "fake-model")
        cache = tmp_path_factory.mktemp("cache")
        assert main(["run", str(LETTER), "--out", str(out), "--cache-dir", str(cache), "-q"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    return out


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("command", ["run", "enrich"])
def test_a_file_the_run_would_replace_is_read_only(
    finished, server, tmp_path, capsys, name, command
):
    out = tmp_path / "d"
    shutil.copytree(finished, out)
    if command == "enrich":  # a segmented folder to finish: its chunks are rewritten in place
        assert main(["segment", str(LETTER), "--out", str(out), "--overwrite", "-q"]) == 0
    before = digest(out)
    target = out / name
    argv = ["run", str(LETTER), "--out", str(out)] if command == "run" else ["enrich", str(out)]
    capsys.readouterr()
    with read_only(target):
        code = main([*argv, "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    if command == "enrich" and name == "1977_cleaned.txt":  # read, never written, by enrich
        assert code == 0 and server.chat_count > 0, err
        return
    assert code == 2, err
    assert f"letterchunk: {target}: is read-only and this run would replace it, so nothing " in err
    assert f"chmod u+w {target}" in err and "pass another --out folder" in err
    assert "Traceback" not in err
    assert server.chat_count == 0  # nothing sent, nothing paid for
    assert digest(out) == before


def test_a_folder_where_a_file_goes_is_refused_too(finished, server, tmp_path, capsys):
    out = tmp_path / "d"
    shutil.copytree(finished, out)
    (out / "1977.report.jsonl").unlink()
    (out / "1977.report.jsonl").mkdir()
    code = main(["run", str(LETTER), "--out", str(out), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and f"{out / '1977.report.jsonl'}: is a folder where this run writes" in err
    assert server.chat_count == 0


def test_writable_files_are_replaced_as_before(finished, server, tmp_path):
    out = tmp_path / "d"
    shutil.copytree(finished, out)
    assert main(["run", str(LETTER), "--out", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    assert server.chat_count > 0
