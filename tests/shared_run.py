"""Work done once per test run and shared by every pytest-xdist worker.

Under pytest-xdist each worker imports the test modules and runs the module fixtures of the
tests it is given, so a letter segmented at collection, or replayed or run by a module fixture,
would be done once a worker.  The controller makes one folder for the run (``conftest``'s
``pytest_configure``, removed again at ``pytest_unconfigure``) and names it in
:data:`RUN_DIR_ENV`, which the workers inherit; the first process to ask for a named result
builds it under a lock, and every other process reads what it wrote.  A result is written whole
or not at all (a process killed mid-build leaves nothing behind, and the next one builds it
again).  Without the folder (a module imported outside pytest) each call builds its own.

Only results that depend on nothing a test changes belong here: the shipped letters, the
recorded cassettes and the code under test.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# not LETTERCHUNK_*: the autouse fixture removes those from every test's environment
RUN_DIR_ENV = "PYTEST_LETTERCHUNK_RUN_DIR"


def run_dir() -> Path | None:
    """The folder this test run shares between its processes, or None outside one."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value and Path(value).is_dir() else None


@contextmanager
def _locked(folder: Path, name: str) -> Iterator[None]:
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def once(name: str, build: Callable[[], T]) -> T:
    """``build()``'s result, built once per test run (pickled into the run's folder)."""
    folder = run_dir()
    if folder is None:
        return build()
    path = folder / f"{name}.pickle"
    with _locked(folder, name):
        if not path.is_file():
            value = build()
            partial = path.with_name(path.name + ".partial")
            partial.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            partial.rename(path)
            return value
    return pickle.loads(path.read_bytes())
