"""Crash-safe file writes and JSONL reading shared by every stage.

Nothing letterchunk writes is ever half-written: content goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the target (atomic on POSIX).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "atomic_write_lines"]


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
