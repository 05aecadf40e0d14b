"""Crash-safe file writes and JSONL reading shared by every stage.

Nothing letterchunk writes is ever half-written: content goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the target (atomic on POSIX).  Logs that keep
their history (the repair report) are appended to instead, whole lines at a time
(:func:`append_lines`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

__all__ = ["append_lines", "atomic_write_lines", "atomic_write_text", "read_json_objects"]


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_lines(path: str | Path, lines: list[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def append_lines(path: str | Path, lines: list[str]) -> None:
    """Append ``lines`` (each without its newline) to ``path`` as whole lines, then fsync.

    One ``write`` per call on an ``O_APPEND`` descriptor, so lines of concurrent writers do not
    interleave.  When a killed writer left the file ending mid-line, a newline is written first:
    the torn line stays one unreadable line (readers skip it) and never swallows the next one.
    The file is created when missing, even with no lines.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if data and size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json_objects(path: str | Path) -> tuple[list[dict], list[tuple[int, str]]]:
    """The JSON objects of a JSONL file, and ``(line number, reason)`` for each unusable line.

    Blank lines are ignored; a line that is not JSON or not an object is reported, never raised.
    """
    objects: list[dict] = []
    bad: list[tuple[int, str]] = []
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append((n, f"not JSON: {exc.msg}"))
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        else:
            bad.append((n, "not a JSON object"))
    return objects, bad
