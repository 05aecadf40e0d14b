"""The SQLite file of an index: how it identifies itself, how it is opened, how its faults read.

**Connection.**  pysqlite3 where installed, else the standard library.  The standard library's
sqlite3 has FTS5 (BM25) everywhere we run, but often cannot load extensions
(``enable_load_extension`` is missing from many builds), so sqlite-vec cannot be loaded into it.
``pysqlite3-binary`` (the search extra, Linux) can.  The index file is plain SQLite either way:
vectors are float32 blobs in the ``units`` table, the format sqlite-vec's functions read.  Search
scores them with numpy (:mod:`letterchunk.retrieval.vectors`, exact; a test holds its scores to
sqlite-vec's ``vec_distance_cosine``).

**Identity.**  An index carries :data:`APPLICATION_ID` in its SQLite header (``PRAGMA
application_id``; ``file(1)`` names it) and a ``meta`` table with its schema version.  An index
written before the header mark existed is recognised by its ``meta`` table alone (application id
0 and a ``schema`` key).  :func:`check_index` is the one place that decides whether a path may be
read as an index or written as one, before any connection that could write is opened:

* a folder, a special file, an empty file, a file that is not SQLite (random bytes, a zeroed
  header), a SQLite file cut short of the size its header gives, another application's database,
  an index missing one of its tables: refused, nothing written;
* a path that does not exist yet: search refuses it, index creates it;
* a file another process holds locked: refused after :data:`LOCK_TIMEOUT_S`.

Faults found later (a page zeroed in the middle of the file) surface from SQLite as a
``DatabaseError`` during the work; :func:`index_errors` turns those into the same messages.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from letterchunk.errors import ConfigError, InputError
from letterchunk.retrieval.threads import pin_blas_threads

__all__ = [
    "APPLICATION_ID",
    "LOCK_TIMEOUT_S",
    "FTS_TOKENIZE",
    "SCHEMA_VERSION",
    "TABLES",
    "IndexFile",
    "check_index",
    "connect",
    "index_errors",
    "scratch",
]

SCHEMA_VERSION = "4"  # 3: the links table (retrieval.links); 4: token_marks (retrieval.marks)
# "LCix" in the header's application id field: a letterchunk index, whatever its file name
APPLICATION_ID = int.from_bytes(b"LCix", "big")
# how BM25 reads text: porter stemming over unicode61 words (search's focus on a part of a long
# passage matches the same way)
FTS_TOKENIZE = "porter unicode61"
# what an index of SCHEMA_VERSION holds
TABLES = ("meta", "chunks", "chunks_fts", "units", "links", "token_marks")
# an index of SCHEMA_VERSION holds
# how long a read or a write waits for another process's lock before it is refused
LOCK_TIMEOUT_S = 2.0

_MAGIC = b"SQLite format 3\x00"
_BUILD = "letterchunk index DIR --db {db}"


def _module() -> Any:
    try:
        from pysqlite3 import dbapi2  # deferred: optional `search` extra (loadable extensions)
    except ImportError:
        return sqlite3
    return dbapi2


def _sqlite_errors() -> tuple[type[BaseException], ...]:
    """The DB-API error classes a connection may raise (pysqlite3 has its own)."""
    module = _module()
    return (sqlite3.Error,) if module is sqlite3 else (sqlite3.Error, module.Error)


def connect(path: str | Path, *, vectors: bool = True) -> tuple[Any, bool]:
    """An open connection to ``path`` and whether sqlite-vec is loaded into it.

    letterchunk itself passes ``vectors=False`` (nor sqlite-vec nor numpy, which it imports, is
    loaded): it scores vectors with numpy.  ``vectors=True`` serves a caller that wants SQL's
    ``vec_*`` functions over the same blobs."""
    conn = _module().connect(str(path), timeout=LOCK_TIMEOUT_S)
    if not vectors:
        return conn, False
    pin_blas_threads()  # sqlite-vec imports numpy, which sizes its BLAS pool once
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


@dataclass(frozen=True)
class IndexFile:
    """What :func:`check_index` found at a path: nothing yet, or an index and its ``meta``."""

    path: Path
    exists: bool
    meta: dict[str, str] = field(default_factory=dict)


def _remedy(db: Path, write: bool) -> str:
    if write:
        return (
            "letterchunk index writes only a new file or an index it built: pass a path that "
            "does not exist yet to --db"
        )
    return f"pass the file `letterchunk index` wrote, or build one: `{_BUILD.format(db=db)}`"


def _rebuild(db: Path) -> str:
    return f"delete it and build it again: `{_BUILD.format(db=db)}`"


def explain(db: str | Path, exc: BaseException) -> InputError:
    """The message of a SQLite error raised while reading or writing the index ``db``."""
    db = Path(db)
    text = " ".join(str(exc).split()) or type(exc).__name__  # one line, whatever SQLite says
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return InputError(
            db,
            f"is locked by another process ({text}); wait for it to finish or close the "
            "program holding the file, then run again",
        )
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return InputError(
            db, f"cannot be written ({text}); fix the file's or its folder's permissions"
        )
    if "disk is full" in lowered or "disk i/o" in lowered:
        return InputError(db, f"cannot be written ({text}); free some space and run again")
    return InputError(db, f"is a damaged index ({text}); {_rebuild(db)}")


@contextlib.contextmanager
def index_errors(db: str | Path) -> Iterator[None]:
    """Turn a SQLite error raised inside the block into an :class:`InputError` naming ``db``."""
    try:
        yield
    except _sqlite_errors() as exc:
        raise explain(db, exc) from exc


def _header_fault(db: Path, header: bytes, size: int, write: bool) -> str | None:
    """Why the first 100 bytes of a non-empty file say it is not a usable SQLite file."""
    if not header.startswith(_MAGIC):
        return f"is not a SQLite file, so not a letterchunk index; {_remedy(db, write)}"
    if len(header) < 100:
        return f"is a SQLite file cut short ({size} bytes); {_rebuild(db)}"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the header's page count is valid when its change counter matches (SQLite's own rule)
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        return (
            f"is cut short: {size:,} bytes where its header says {pages * page_size:,} "
            f"(a damaged index); {_rebuild(db)}"
        )
    return None


def _read_only(db: Path) -> Any:
    """A connection that cannot write ``db`` (SQLite's read-only URI mode)."""
    return _module().connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=LOCK_TIMEOUT_S)


def _contents(db: Path, write: bool) -> tuple[set[str], dict[str, str], bool, str]:
    """(tables, meta, whether it is our index, quick-check result) of the SQLite file ``db``,
    read through a read-only connection."""
    try:
        conn = _read_only(db)
    except _sqlite_errors() as exc:
        raise explain(db, exc) from exc
    try:
        with index_errors(db):
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master "
                    "WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            }
            meta: dict[str, str] = {}
            if "meta" in tables:
                meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
            ours = app == APPLICATION_ID or (app == 0 and "schema" in meta)
            # before writing, the whole file is read once: index reuses what it holds, and a
            # damaged page that search would meet only on some query is found here
            damage = conn.execute("PRAGMA quick_check(1)").fetchone()[0] if write and ours else "ok"
    finally:
        conn.close()
    return tables, meta, ours, damage


def check_index(db: str | Path, *, write: bool) -> IndexFile:
    """Whether ``db`` may be read (``write=False``: search) or written (index) as an index.

    Raises :class:`InputError` naming the file and what to do; nothing is written to it.  An
    index of another schema version is refused for reading (:class:`ConfigError`, index again)
    and accepted for writing (index rebuilds it); for writing, its tables are not required.
    """
    db = Path(db)
    try:
        st = os.stat(db)
    except FileNotFoundError:
        if write:
            if not db.parent.is_dir():
                raise InputError(
                    db, f"its folder {db.parent} does not exist; create it or pass another --db"
                ) from None
            return IndexFile(db, exists=False)
        raise InputError(db, f"no such index; build it with `{_BUILD.format(db=db)}`") from None
    except OSError as exc:  # a parent that is a file, a symlink loop, no permission
        raise InputError(db, f"cannot be read ({exc.strerror or exc}); pass another --db") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(
            db, f"is a folder, not an index file; pass a file path to --db, e.g. {db / 'x.sqlite'}"
        )
    if not stat.S_ISREG(st.st_mode):
        raise InputError(db, f"is not a regular file; {_remedy(db, write)}")
    if st.st_size == 0:
        raise InputError(
            db, f"is an empty file (0 bytes), not a letterchunk index; {_remedy(db, write)}"
        )
    try:
        with open(db, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise InputError(
            db, f"cannot be read ({exc.strerror or exc}); check its permissions"
        ) from None
    fault = _header_fault(db, header, st.st_size, write)
    if fault:
        raise InputError(db, fault)
    tables, meta, ours, damage = _contents(db, write)
    if not ours:
        held = ", ".join(sorted(tables)[:6]) + (", …" if len(tables) > 6 else "")
        what = (
            f"another application's SQLite database (tables: {held})"
            if tables
            else "an empty SQLite database"
        )
        raise InputError(db, f"is {what}, not a letterchunk index; {_remedy(db, write)}")
    if damage != "ok":
        damage = " ".join(str(damage).split())
        raise InputError(db, f"is a damaged index ({damage}); {_rebuild(db)}")
    schema = meta.get("schema", "?")
    if schema != SCHEMA_VERSION:
        if write:
            return IndexFile(db, exists=True, meta=meta)  # rebuilt whole by index
        raise ConfigError(
            f"{db}: index schema {schema}, this letterchunk reads {SCHEMA_VERSION}; index "
            f"again: `{_BUILD.format(db=db)}`"
        )
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise InputError(
            db, f"is a damaged letterchunk index (no table {', '.join(missing)}); {_rebuild(db)}"
        )
    return IndexFile(db, exists=True, meta=meta)
