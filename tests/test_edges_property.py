"""One property over every command that reads chunk files: for any malformed input of the
known classes, no Python traceback reaches the user, the exit code is a documented one, and
every file that existed before is byte-identical afterwards.

The inputs are generated (hypothesis): a segmented letter folder whose chunk file has one line
(or the whole file) replaced by a sample of a class — integers past Python's 4,300-digit limit,
nesting deeper than the parser's recursion limit, random bytes, text that is not UTF-8, a
truncated line, JSON that is not an object, an object that is not a chunk, an empty file — or
the chunk file replaced by a FIFO.  Each command runs in-process through ``letterchunk.cli.main``
so an uncaught exception fails the test with its traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_openai import FakeOpenAI
from letterchunk.cli import main
from test_fault_matrix import Script

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
DOCUMENTED_EXITS = {0, 1, 2, 3, 4}


@pytest.fixture(scope="module")
def segmented(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("segmented")
    assert main(["segment", str(LETTER), "--out", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=Script({})) as fake:
        yield fake


# ---------------------------------------------------------------------------- the classes


def _huge_int(n: int) -> bytes:
    return b'{"chunk_id": ' + b"9" * (4301 + n) + b"}"


def _deep(n: int) -> bytes:
    depth = 100_000 + n
    return b"[" * depth + b"]" * depth


LINE_DAMAGE = st.one_of(
    st.integers(0, 5_000).map(_huge_int),
    st.integers(0, 1_000).map(_deep),
    st.binary(min_size=1, max_size=300).filter(lambda b: b"\n" not in b),
    st.binary(min_size=1, max_size=40).map(lambda b: b"\xff\xfe" + b.replace(b"\n", b"")),
    st.sampled_from([b"[]", b"1", b"null", b'"text"', b'{"chunk_id": 1}', b'{"metadata": []}']),
    st.integers(1, 200).map(lambda n: b'{"chunk_id": "1977-S1-T1-001", "content": "' + b"x" * n),
)


def _damage(folder: Path, line: bytes, where: int, whole: bool) -> None:
    """Replace line ``where`` of the chunk file with ``line`` (or the whole file with it)."""
    path = folder / "1977.jsonl"
    if whole:
        path.write_bytes(line + b"\n")
        return
    lines = path.read_bytes().splitlines()
    lines[where % len(lines)] = line
    path.write_bytes(b"\n".join(lines) + b"\n")


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_fifo():
            out[str(p.relative_to(folder))] = None
        elif p.is_file() and not p.name.startswith("."):
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


def _chunks(data: bytes) -> dict[str, dict]:
    return {
        c["chunk_id"]: c for c in (json.loads(x) for x in data.decode().splitlines() if x.strip())
    }


def _nothing_lost(before: dict[str, bytes | None], after: dict[str, bytes | None], err: str):
    """Every file that existed is byte-identical or replaced by a strictly more complete one:
    a chunk file holds the same chunks, each as it was or enriched where it was not; a repair
    report is only appended to; an evidence sidecar keeps every record it had; ``run.json`` is
    the ledger of the latest run, rewritten by each run by design."""
    for name, data in before.items():
        assert name in after, f"{name} removed\n{err}"
        new = after[name]
        if new == data or name == "run.json":
            continue
        assert data is not None and new is not None, name
        if name.endswith(".report.jsonl"):
            assert new.startswith(data), f"{name}: history rewritten\n{err}"
        elif name.endswith(".evidence.jsonl"):
            assert set(data.splitlines()) <= set(new.splitlines()), f"{name}: records lost"
        else:
            assert name.endswith(".jsonl"), f"{name} changed\n{err}"
            old_chunks, new_chunks = _chunks(data), _chunks(new)
            assert list(new_chunks) == list(old_chunks), f"{name}: chunks lost\n{err}"
            for cid, chunk in old_chunks.items():
                if chunk["metadata"]["contextual_summary"]:
                    assert new_chunks[cid] == chunk, f"{cid}: enriched chunk changed\n{err}"


# each command as a user runs it on the folder (D) or its chunk file (F); X: a new output path
COMMANDS = {
    "validate": ["validate", "D"],
    "validate-file": ["validate", "F", "--stage", "enriched", "--json"],
    "repair": ["repair", "F", "--no-llm"],
    "report": ["report", "D", "-o", "X/report.html"],
    "export": ["export", "D", "--to", "jsonl-flat", "--out", "X/flat.jsonl"],
    "index": ["index", "D", "--db", "X/index.db", "--no-dense"],
    "analyze": ["analyze", "D", "--json"],
    "enrich": ["enrich", "D", "--cache", "off"],
}


@contextlib.contextmanager
def _env(server: FakeOpenAI) -> Iterator[None]:
    names = {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-dummy-test-key",
        "LETTERCHUNK_MODEL": "fake-model",
        "LETTERCHUNK_INSTRUCTOR_MODE": "JSON_SCHEMA",
    }
    old = {k: os.environ.get(k) for k in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(argv: list[str], folder: Path, out: Path) -> tuple[int, str]:
    args = [
        str(folder)
        if a == "D"
        else str(folder / "1977.jsonl")
        if a == "F"
        else a.replace("X/", f"{out}/")
        for a in argv
    ]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    return code, err.getvalue()


@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=LINE_DAMAGE, where=st.integers(0, 50), whole=st.booleans())
def test_malformed_chunk_files_never_crash_and_never_change_a_file(
    segmented, server, command, line, where, whole
):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "out"
        shutil.copytree(segmented, folder)
        _damage(folder, line, where, whole)
        out = Path(tmp) / "new"
        out.mkdir()
        before = _snapshot(folder)
        with _env(server):
            code, err = _run(COMMANDS[command], folder, out)
        assert code in DOCUMENTED_EXITS, err
        assert "Traceback" not in err
        _nothing_lost(before, _snapshot(folder), err)
        if code == 2:  # refused: the message names the damaged file
            assert "1977.jsonl" in err, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_fifo_in_place_of_the_chunk_file_is_refused_not_read(segmented, server, command):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "out"
        shutil.copytree(segmented, folder)
        (folder / "1977.jsonl").unlink()
        os.mkfifo(folder / "1977.jsonl")
        out = Path(tmp) / "new"
        out.mkdir()
        fifo = folder / "1977.jsonl"
        unblocked = threading.Event()

        def unblock() -> None:  # a reader blocked on the FIFO gets EOF after 10 s
            if not done.wait(10):
                unblocked.set()
                with contextlib.suppress(OSError):  # ENXIO: nobody is reading it
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

        done = threading.Event()
        guard = threading.Thread(target=unblock, daemon=True)
        guard.start()
        try:
            with _env(server):
                code, err = _run(COMMANDS[command], folder, out)
        finally:
            done.set()
        assert not unblocked.is_set(), f"{command} blocked reading a FIFO"
        assert code in DOCUMENTED_EXITS and "Traceback" not in err


# ---------------------------------------------------------------------------- letters

LETTER_DAMAGE = st.one_of(
    st.binary(min_size=0, max_size=400),
    st.binary(min_size=1, max_size=60).map(lambda b: b"Dear Shareholders\n\xff" + b),
    st.sampled_from([b"", b"\n\n\n", b"   \t  \n", b"\x00" * 64, "\ufeff".encode()]),
    st.text(min_size=1, max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 40).map(lambda n: b"word " * (n * 1000)),  # one huge line
)


@pytest.fixture(scope="module")
def enriched(tmp_path_factory, server) -> Path:
    out = tmp_path_factory.mktemp("enriched")
    with _env(server):
        assert main(["run", str(LETTER), "--out", str(out), "--cache", "off", "-q"]) == 0
    return out


def _complete(data: bytes | None) -> bool:
    chunks = _chunks(data or b"")
    return bool(chunks) and all(c["metadata"]["contextual_summary"] for c in chunks.values())


@pytest.mark.parametrize("command", ["segment", "run"])
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=LETTER_DAMAGE)
def test_malformed_letters_never_crash_and_never_change_a_file(enriched, server, command, data):
    """An enriched output is never replaced by less: ``segment`` refuses to, and ``run`` replaces
    it only by the letter's own complete enriched output (exit 0), as it always does."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "out"
        shutil.copytree(enriched, folder)  # an earlier output the bad letter must not damage
        letter = Path(tmp) / "1977.txt"
        letter.write_bytes(data)
        before = _snapshot(folder)
        argv = [command, str(letter), "--out", str(folder)]
        if command == "run":
            argv += ["--cache", "off"]
        err = io.StringIO()
        with (
            _env(server),
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            code = main(argv)
        assert code in DOCUMENTED_EXITS, err.getvalue()
        assert "Traceback" not in err.getvalue()
        after = _snapshot(folder)
        if command == "run" and code == 0 and _complete(after["1977.jsonl"]):
            return  # a finished run of the new letter: its complete output replaces the old
        _nothing_lost(before, after, err.getvalue())
