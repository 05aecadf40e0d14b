"""Bad chunk files, bad output paths and closed pipes, each as a class, through the real CLI.

Every command that reads chunk JSONL (validate, repair, report, export, analyze) reads it with
the one reader in ``letterchunk.io``; every output path (``report -o``, ``export --out``) is
written by ``io.write_output``; stdout goes through ``io.write_stream``.  Each table below runs
one class of input through every command and asserts the exit code, a message naming the file,
no traceback, and that files already there are unchanged.

Devices are never named by their real path here: a test runs the command on a symlink to
``/dev/null`` / ``/dev/full`` or on a device node made in ``tmp_path``, so a letterchunk that
renamed a file over its output (as one once did) replaces only the test's own link or node.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.cli import main
from letterchunk.errors import InputError
from letterchunk.io import jsonl_lines, parse_json, read_utf8

# --------------------------------------------------------------------------- helpers


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``letterchunk ARGV`` in this process: (exit code, stdout, stderr).  An exception that
    escapes ``main`` (what a user sees as a traceback) fails the test by itself."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def run_proc(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m letterchunk ARGV`` as a new user runs it; a hang fails the test."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "letterchunk", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"letterchunk {' '.join(argv)} still running after {timeout} s")
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


@pytest.fixture
def letter_dir(tmp_path, good_letter, write_letter) -> Path:
    folder = tmp_path / "out"
    write_letter(good_letter, folder)
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# --------------------------------------------------------------------------- 1. hostile lines

# lines Python's json parser rejects by resource or by value, whatever it raises; and one it
# parses that can never be written back as UTF-8
HOSTILE_LINES = {
    "int over 4,300 digits": '{"chunk_id": ' + "9" * 5000 + "}",
    "int over the limit, nested": '{"metadata": {"token_count": ' + "1" * 4301 + "}}",
    "array nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "object nested 100,000 deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "lone surrogate escape": '{"chunk_id": "\\ud800"}',
    "bad syntax": '{"chunk_id": ',
}


def _with_bad_line(folder: Path, line: str) -> Path:
    """1987.jsonl with ``line`` as its line 2."""
    path = folder / "1987.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(1, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("line", list(HOSTILE_LINES.values()), ids=list(HOSTILE_LINES))
def test_validate_reports_a_hostile_line_by_file_and_line(letter_dir, capsys, line):
    path = _with_bad_line(letter_dir, line)
    code, out, _ = run_cli(["validate", str(path)], capsys)
    assert code == 1
    assert f"{path}:2 " in out and "json.malformed" in out


@pytest.mark.parametrize("line", list(HOSTILE_LINES.values()), ids=list(HOSTILE_LINES))
def test_repair_keeps_a_hostile_line_and_reports_it(letter_dir, capsys, line):
    path = _with_bad_line(letter_dir, line)
    code, _, err = run_cli(["repair", str(path), "--no-llm"], capsys)
    assert code == 1
    assert "line 2: still invalid" in err and str(path) in err
    assert path.read_text(encoding="utf-8").split("\n")[1] == line  # kept verbatim


@pytest.mark.parametrize("line", list(HOSTILE_LINES.values()), ids=list(HOSTILE_LINES))
def test_export_names_the_file_and_line_of_a_hostile_line(letter_dir, tmp_path, capsys, line):
    path = _with_bad_line(letter_dir, line)
    target = tmp_path / "docs.jsonl"
    target.write_text("kept\n")
    code, out, err = run_cli(["export", str(letter_dir), "--to", "jsonl-flat"], capsys)
    assert code == 2 and out == ""
    assert f"{path}: line 2: not" in err
    code, _, err = run_cli(
        ["export", str(letter_dir), "--to", "langchain", "--out", str(target)], capsys
    )
    assert code == 2 and f"{path}: line 2: not" in err
    assert target.read_text() == "kept\n"


@pytest.mark.parametrize("line", list(HOSTILE_LINES.values()), ids=list(HOSTILE_LINES))
def test_report_and_analyze_skip_a_hostile_line_naming_it(letter_dir, capsys, caplog, line):
    _with_bad_line(letter_dir, line)
    code, out, _ = run_cli(["report", str(letter_dir)], capsys)
    assert code == 0 and out.strip() == str(letter_dir / "report.html")
    assert "1987.jsonl:2: skipped, not" in caplog.text
    code, out, err = run_cli(["analyze", str(letter_dir), "--json"], capsys)
    assert code == 0 and "1 line(s) skipped" in err
    result = json.loads(out)
    assert [(s["file"], s["line"]) for s in result["skipped"]] == [("1987.jsonl", 2)]
    assert result["letters"]["1987"]["chunks"] == 3


# generated: JSON whose depth and integer lengths straddle the parser's limits
@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(0, 200_000),
    digits=st.integers(1, 10_000),
    opener=st.sampled_from(["[", '{"a":']),
)
def test_the_reader_never_raises_on_deep_or_long_json(depth, digits, opener):
    closer = "]" if opener == "[" else "}"
    line = opener * depth + "7" * digits + closer * depth
    (parsed,) = jsonl_lines(line + "\n")
    assert (parsed.value is None) == (parsed.error is not None)
    if parsed.error is None:
        assert digits <= sys.get_int_max_str_digits()


# generated: any object whose strings hold line separators other than "\n" (U+2028, U+0085...)
# is one JSONL line: every reader splits at "\n" only
_TEXT = st.text(alphabet=st.sampled_from('ab \u2028\u2029\x85\x1c\x1d\x1e\x0b\x0c\r"\\é😀'))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_JSON, min_size=1, max_size=5))
def test_jsonl_written_with_ensure_ascii_false_reads_back_line_for_line(values):
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)
    lines = jsonl_lines(text)
    assert [(x.value, x.error) for x in lines] == [(v, None) for v in values]


@settings(max_examples=100, deadline=None)
@given(line=st.text(max_size=50))
def test_parse_json_never_raises(line):
    value, error = parse_json(line)
    assert error is None or value is None


def test_a_chunk_with_a_line_separator_in_its_text_stays_one_line(letter_dir, capsys):
    """U+2028 inside a chunk's text (written raw by ensure_ascii=False) is not a line end:
    repair rewrites the file with the chunk whole, analyze counts every chunk."""
    path = letter_dir / "1987.jsonl"
    cleaned = letter_dir / "1987_cleaned.txt"
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    word = first["content"].split()[1]
    for f in (path, cleaned):  # same length, so every span stays right
        f.write_text(f.read_text(encoding="utf-8").replace(f" {word}", f"\u2028{word}", 1))
    code, out, _ = run_cli(["analyze", str(letter_dir), "--json"], capsys)
    assert code == 0 and json.loads(out)["skipped"] == []
    run_cli(["repair", str(path), "--no-llm"], capsys)
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 3 and all(parse_json(x)[1] is None for x in lines)
    assert "\u2028" in json.loads(lines[0])["content"]


# --------------------------------------------------------------------------- 2. not UTF-8

NOT_UTF8 = {
    "random bytes with NUL": bytes(range(256)) * 4,
    "latin-1 text": '{"chunk_id": "1987-S1-T1-001", "content": "résumé"}\n'.encode("latin-1"),
    "UTF-16 with BOM": '{"chunk_id": "1987-S1-T1-001"}\n'.encode("utf-16"),
    "UTF-8 cut mid-character": '{"content": "é"}\n'.encode()[:-4],
    "NUL in UTF-8 text": b'{"chunk_id": "1987-S1-T1-001"}\n\x00\n',
}

# every command that reads a chunk file: (argv, where the chunk file is)
READERS = {
    "validate": lambda d: ["validate", str(d / "1987.jsonl")],
    "validate DIR": lambda d: ["validate", str(d)],
    "repair": lambda d: ["repair", str(d / "1987.jsonl"), "--no-llm"],
    "report": lambda d: ["report", str(d)],
    "export": lambda d: ["export", str(d), "--to", "jsonl-flat"],
    "analyze": lambda d: ["analyze", str(d)],
}


@pytest.mark.parametrize("command", list(READERS), ids=list(READERS))
@pytest.mark.parametrize("data", list(NOT_UTF8.values()), ids=list(NOT_UTF8))
def test_a_binary_or_not_utf8_chunk_file_is_exit_2_naming_it(letter_dir, capsys, command, data):
    path = letter_dir / "1987.jsonl"
    path.write_bytes(data)
    before = _snapshot(letter_dir)
    code, out, err = run_cli(READERS[command](letter_dir), capsys)
    assert code == 2
    assert f"{path}: not UTF-8 text" in err and "convert the file to UTF-8" in err
    assert _snapshot(letter_dir) == before  # nothing written, not even a report


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=64))
def test_read_utf8_returns_text_or_an_input_error_naming_the_file(tmp_path, data):
    path = tmp_path / "1987.jsonl"
    path.write_bytes(data)
    try:
        text = read_utf8(path)
    except InputError as exc:
        assert str(exc).startswith(f"{path}: not UTF-8 text")
    else:
        assert text.encode("utf-8") == data and "\x00" not in text


# --------------------------------------------------------------------------- 3. output paths

WRITERS = {
    "report -o": lambda d, target: ["report", str(d), "-o", str(target)],
    "export --out": lambda d, target: [
        "export",
        str(d),
        "--to",
        "jsonl-flat",
        "--out",
        str(target),
    ],
}


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_an_existing_folder_as_output_is_exit_2_and_untouched(letter_dir, tmp_path, capsys, writer):
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept")
    code, _, err = run_cli(WRITERS[writer](letter_dir, folder), capsys)
    assert code == 2 and f"{folder}: is a folder" in err
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


def _char_device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device node in tmp_path (1,3 is null, 1,7 is full); a symlink to the real
    one where this user cannot make device nodes."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(node, "w"):
            pass
    except OSError:
        node.unlink(missing_ok=True)
        node.symlink_to(f"/dev/{name}")
    return node


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
@pytest.mark.parametrize("how", ["node", "symlink"])
def test_dev_null_is_written_as_a_stream_never_replaced(letter_dir, tmp_path, capsys, writer, how):
    if how == "node":
        target = _char_device(tmp_path, "null", 3)
    else:
        target = tmp_path / "null-link"
        target.symlink_to("/dev/null")
    was_link = target.is_symlink()
    code, out, err = run_cli(WRITERS[writer](letter_dir, target), capsys)
    assert code == 0, err
    assert target.is_symlink() == was_link
    assert stat.S_ISCHR(os.stat(target).st_mode)  # still the device, not a regular file
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".null")]  # no temp left


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
@pytest.mark.parametrize("how", ["node", "symlink"])
def test_a_full_device_is_exit_2_naming_it(letter_dir, tmp_path, capsys, writer, how):
    if how == "node":
        target = _char_device(tmp_path, "full", 7)
    else:
        target = tmp_path / "full-link"
        target.symlink_to("/dev/full")
    was_link = target.is_symlink()
    code, out, err = run_cli(WRITERS[writer](letter_dir, target), capsys)
    assert code == 2
    assert f"{target}: cannot write it (No space left on device)" in err
    assert target.is_symlink() == was_link and stat.S_ISCHR(os.stat(target).st_mode)


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_a_fifo_gets_the_whole_output_and_stays_a_fifo(letter_dir, tmp_path, capsys, writer):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, out, err = run_cli(WRITERS[writer](letter_dir, fifo), capsys)
    assert code == 0, err
    reader.join(timeout=20)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].endswith(b"\n") and len(got[0]) > 1000


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
@pytest.mark.parametrize(
    "err_no", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO]
)
def test_a_failed_write_is_exit_2_and_the_old_file_byte_identical(
    letter_dir, tmp_path, capsys, monkeypatch, writer, err_no
):
    target = tmp_path / "old.out"
    target.write_bytes(b"the earlier output\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(err_no, os.strerror(err_no))

    monkeypatch.setattr("letterchunk.io.os.fsync", failing_fsync)
    code, _, err = run_cli(WRITERS[writer](letter_dir, target), capsys)
    assert code == 2
    assert f"{target}: cannot write it ({os.strerror(err_no)})" in err
    assert "a file already there is unchanged" in err
    assert target.read_bytes() == b"the earlier output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["old.out", "out", "_home"])


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_a_read_only_folder_is_exit_2_and_the_old_file_byte_identical(
    letter_dir, tmp_path, capsys, writer
):
    folder = tmp_path / "frozen"
    folder.mkdir()
    target = folder / "old.out"
    target.write_bytes(b"the earlier output\n")
    if os.geteuid() == 0:  # root ignores modes: make the folder immutable instead
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            pytest.skip("running as root and chattr +i is not available here")
    else:
        folder.chmod(0o555)
    try:
        code, _, err = run_cli(WRITERS[writer](letter_dir, target), capsys)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)
    assert code == 2 and f"{target}: cannot write it (" in err
    assert target.read_bytes() == b"the earlier output\n"
    assert [p.name for p in folder.iterdir()] == ["old.out"]


def test_a_symlinked_output_file_is_written_through_the_link(letter_dir, tmp_path, capsys):
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    code, _, _ = run_cli(WRITERS["export --out"](letter_dir, link), capsys)
    assert code == 0 and link.is_symlink() and real.read_text().count("\n") == 3


# --------------------------------------------------------------------------- 4. FIFO inputs


@pytest.mark.parametrize("command", list(READERS), ids=list(READERS))
def test_a_fifo_named_as_a_chunk_file_is_refused_before_it_is_opened(letter_dir, command):
    path = letter_dir / "1987.jsonl"
    path.unlink()
    os.mkfifo(path)
    proc = run_proc(READERS[command](letter_dir), timeout=20)
    assert proc.returncode == 2
    assert f"{path}: not a regular file but a FIFO (named pipe)" in proc.stderr
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


# --------------------------------------------------------------------------- 5. closed pipes


def _many_bad_lines(folder: Path) -> None:
    (folder / "1987.jsonl").write_text("{}\n" * 3000)


PIPED = {
    "validate": (["validate"], _many_bad_lines),
    "validate --json": (["validate", "--json"], _many_bad_lines),
    "analyze --json": (
        ["analyze", "--json"],
        lambda d: (d / "1987.jsonl").write_text("x\n" * 5000),
    ),
    "export": (
        ["export", "--to", "jsonl-flat"],
        lambda d: (d / "1987.jsonl").write_text((d / "1987.jsonl").read_text() * 300),
    ),
}


@pytest.mark.parametrize("case", list(PIPED), ids=list(PIPED))
def test_a_reader_that_stops_early_gets_no_traceback(letter_dir, case):
    """``letterchunk … | head -1``: the reader closes after one line."""
    argv, fill = PIPED[case]
    fill(letter_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "letterchunk", *argv, str(letter_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err
    # 141: the write met the closed pipe; 0 or 1 (the command's verdict): it all fitted in the
    # pipe's buffer before the reader closed
    assert code in (0, 1, 141)
