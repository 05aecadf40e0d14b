"""The SQLite connection of an index: pysqlite3 where installed, else the standard library.

The standard library's sqlite3 has FTS5 (BM25) everywhere we run, but often cannot load
extensions (``enable_load_extension`` is missing from many builds), so sqlite-vec cannot be
loaded into it.  ``pysqlite3-binary`` (the search extra, Linux) can.  The index file is plain
SQLite either way: vectors are float32 blobs in the ``units`` table, the format sqlite-vec's
functions read; dense scoring uses sqlite-vec's ``vec_distance_cosine`` when it loaded, else
numpy over the same blobs (exact in both cases).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["connect", "scratch"]


def _module() -> Any:
    try:
        from pysqlite3 import dbapi2  # deferred: optional `search` extra (loadable extensions)
    except ImportError:
        return sqlite3
    return dbapi2


def connect(path: str | Path) -> tuple[Any, bool]:
    """An open connection to ``path`` and whether sqlite-vec is loaded into it."""
    conn = _module().connect(str(path))
    try:
        import sqlite_vec  # deferred: optional `search` extra

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except (ImportError, AttributeError, sqlite3.OperationalError):
        return conn, False
    except Exception:  # pysqlite3's own OperationalError is another class
        return conn, False
    return conn, True


def scratch() -> Any:
    """A private in-memory database (FTS5 included), for ranking a few pieces of one text."""
    return _module().connect(":memory:")
