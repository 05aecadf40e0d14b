"""One letterchunk process per output folder.

``run``, ``enrich``, ``repair`` and ``segment`` write into a folder in place; two of them on
the same folder would pay twice and interleave letters.  :func:`folder_lock` holds an exclusive
``fcntl.flock`` on ``DIR/.letterchunk.lock`` (which names the holder's pid) for the whole job,
and a second process fails at once with :class:`~letterchunk.errors.FolderLocked` naming that
pid — before any server starts or request is sent.

The kernel drops a flock when its process dies, however it dies, so a lock file left by a
killed run never blocks the next one.  The file is removed on release; an acquirer checks that
the file it locked is still the one at the path, so a release racing an acquire cannot leave two
holders.  Where ``fcntl`` does not exist (Windows) no lock is taken.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from letterchunk.errors import ConfigError, FolderLocked
from letterchunk.layout import LOCK_NAME

__all__ = ["folder_lock"]

log = logging.getLogger(__name__)


def _holder(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def folder_lock(folder: str | Path) -> Iterator[Path]:
    """Hold the folder's lock for the ``with`` body (the folder is created if missing)."""
    try:
        import fcntl  # deferred: a POSIX-only module; elsewhere the folder is not locked
    except ImportError:  # pragma: no cover - Windows
        log.info("no fcntl on this platform: %s is not locked", folder)
        yield Path(folder) / LOCK_NAME
        return
    path = Path(folder) / LOCK_NAME
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"{folder}: cannot create the lock file {LOCK_NAME} there "
                f"({exc.strerror or exc}); pass a writable folder"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderLocked(path, _holder(path)) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file while we locked it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)  # closing releases the flock
