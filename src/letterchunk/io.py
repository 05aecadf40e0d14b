"""Crash-safe file writes and JSONL reading shared by every stage.

Nothing letterchunk writes is ever half-written: content goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the target (atomic on POSIX).  Logs that keep
their history (the repair report) are appended to instead, whole lines at a time
(:func:`append_lines`).

The temporary file is created the way ``open(path, "w")`` creates a file (mode 0666 less the
umask: 0644 under the usual umask 022), not 0600 as ``tempfile.mkstemp`` would, so the outputs
are as readable as any file the user writes; a file being replaced keeps its own mode.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

__all__ = [
    "append_lines",
    "atomic_write_lines",
    "atomic_write_text",
    "create_temp_beside",
    "read_json_objects",
]

_OPEN_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def create_temp_beside(path: str | Path, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new empty file ``.NAME.XXXXXXXX<suffix>`` in ``path``'s folder, open for writing.

    Returns ``(fd, temp path)``.  Its mode is the one ``path`` has when it exists (a replaced
    file keeps its mode), else the one ``open(path, "w")`` would give (0666 less the umask,
    applied by the OS).  The caller writes, then ``os.replace``s it over ``path``.
    """
    path = Path(path)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            fd = os.open(tmp, _OPEN_FLAGS, 0o666)
        except FileExistsError:  # another writer picked the same name: draw again
            continue
        if mode is not None:
            try:
                os.chmod(tmp, mode)
            except BaseException:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
        return fd, tmp
    raise FileExistsError(
        f"no free temporary name beside {path}; remove the .{path.name}.* files there"
    )


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_beside(path)
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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # less the umask
    try:
        size = os.fstat(fd).st_size
        if data and size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
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
