"""Standard output that cannot be written: a full disk (``> /dev/full``) or a reader that went away
(``| head -1``), for every command that prints, through the one guard in ``cli.main``.

* an OS error writing stdout (ENOSPC, EDQUOT, EIO, ...): exit 2 and a message naming standard
  output and what to do, as ``--out /dev/full`` gives; never a traceback;
* the reader gone: exit 141 (128 + SIGPIPE, what a shell reports for its own tools), nothing on
  stderr, whatever the command would have returned.

The in-process cases give ``main`` a stream that fails as the real ones do; the subprocess cases
use the real ``/dev/full`` and a real closed pipe, since the descriptor is what is tested.
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from letterchunk.cli import EXIT_PIPE, main

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture(scope="module")
def seg(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seg")
    assert main(["segment", str(LETTER), "--out", str(out), "-q"]) == 0
    return out


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


class FailingStdout:
    """A stdout whose writes fail with ``error`` (no descriptor, so nothing real is touched)."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def write(self, text: str) -> int:
        raise self.error

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


# commands that print to stdout, in-process: print(), write_stream, argparse's help
COMMANDS = [
    ["export", "SEG", "--to", "langchain"],
    ["validate", "SEG", "--stage", "enriched"],
    ["validate", "--list-rules"],
    ["analyze", "SEG"],
    ["diff", "SEG", "SEG"],
    ["report", "SEG", "-o", "OUT"],
    ["budget"],
]
ERRORS = [
    (errno.ENOSPC, "No space left on device", "free some space"),
    (errno.EDQUOT, "Disk quota exceeded", "free some space"),
    (errno.EIO, "Input/output error", "redirect it to another file"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("code", "reason", "fix"), ERRORS, ids=[r for _, r, _ in ERRORS])
def test_stdout_that_cannot_be_written_is_named(
    seg, tmp_path, monkeypatch, capsys, argv, code, reason, fix
):
    args = [str(seg) if a == "SEG" else str(tmp_path / "r.html") if a == "OUT" else a for a in argv]
    before = digest(seg)
    monkeypatch.setattr(sys, "stdout", FailingStdout(OSError(code, reason)))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"letterchunk: standard output: cannot write it ({reason}); ")
    assert "what was written there is incomplete" in err and fix in err
    assert "Traceback" not in err
    assert digest(seg) == before


@pytest.mark.parametrize("argv", [*COMMANDS, ["--help"]], ids=" ".join)
def test_a_reader_gone_ends_quietly_with_141(seg, tmp_path, monkeypatch, capsys, argv):
    args = [str(seg) if a == "SEG" else str(tmp_path / "r.html") if a == "OUT" else a for a in argv]
    monkeypatch.setattr(sys, "stdout", FailingStdout(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert main(args) == EXIT_PIPE
    assert capsys.readouterr().err == ""


def test_stdout_is_put_back_after_each_command(seg, capsys):
    before = sys.stdout
    assert main(["validate", str(seg)]) == 0
    assert sys.stdout is before and "0 error(s)" in capsys.readouterr().out


def test_export_to_dev_full_on_stdout(seg):
    """`letterchunk export d --to langchain > /dev/full`: the real device."""
    before = digest(seg)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "letterchunk", "export", str(seg), "--to", "langchain"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "letterchunk: standard output: cannot write it (No space left on device); what was "
        "written there is incomplete; free some space or redirect it to another file\n"
    )
    assert digest(seg) == before


def test_validate_into_a_closed_pipe_exits_141_quietly(seg):
    """`letterchunk validate DIR --stage enriched | head -1`, the reader gone before the first
    byte (so the write surely meets the closed pipe): exit 141, not validate's verdict 1."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "letterchunk", "validate", str(seg), "--stage", "enriched"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=ENV,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_PIPE
    assert err == ""
