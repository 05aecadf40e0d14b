"""The index's unit vectors in memory: exact dense scoring without reading them per query.

Every embedded unit (a chunk's summary or one window of its content) scores the chunk it
belongs to and, for a parent its children cover, that parent too.  :class:`UnitVectors` holds
the matrix of unit vectors and which chunks each unit scores; a chunk's score for a query is
its best unit's cosine (the vectors are unit length, so the cosine is a dot product).

Reading the vectors is most of a query's cost (4,378 units of the whole corpus: ~15 ms of the
SQLite read alone, against well under 1 ms for the product), so :func:`unit_vectors` keeps the
last few indexes' vectors for the process and reuses them while the file is unchanged.  Unchanged
means the same file (device, inode, size, modification time), the same SQLite file change
counter (incremented by every commit in the rollback-journal mode the index is written in) and
the same ``generation`` token, which every ``letterchunk index`` run writes anew (so a file
built again at the same path, whose counter may repeat, never matches).  They are read while the
caller's connection holds a read transaction, so no commit lands between the check and the read.
An index without the token (an older one), or in WAL mode, where the counter is not kept, is
read afresh for each query, as before.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from letterchunk.retrieval.embed import load_numpy

# (unit checksum, scored chunk) pairs: each chunk's own units, and a covered parent's children's
OWNERS_SQL = (
    "SELECT rowid, checksum FROM chunks UNION ALL SELECT p.rowid, ch.checksum "
    "FROM chunks p JOIN chunks ch ON ch.parent_chunk_id = p.chunk_id WHERE p.leaf = 0"
)
GENERATION_KEY = "generation"  # the meta key each index run writes a fresh token under
_KEPT = 4  # indexes whose vectors a process keeps (each ~6.7 MB for the whole corpus)


class UnitVectors:
    """Every unit vector of the index, and which chunks each one scores."""

    def __init__(self, conn: Any) -> None:
        self.np = load_numpy()  # numpy is imported only here, with vectors
        # (chunks with text to embed but no vectors, chunks with text to embed): an index run
        # was interrupted, or ran with --no-dense after the chunks changed
        missing, total = conn.execute(
            "SELECT sum(NOT EXISTS (SELECT 1 FROM units u WHERE u.checksum = c.checksum)), "
            "count(*) FROM chunks c WHERE c.summary != '' OR (c.leaf = 1 AND c.content != '')"
        ).fetchone()
        self.unembedded: tuple[int, int] = (int(missing or 0), int(total))
        owners: dict[str, list[int]] = {}
        for rowid, checksum in conn.execute(OWNERS_SQL):
            owners.setdefault(checksum, []).append(rowid)
        rows = conn.execute("SELECT checksum, embedding FROM units ORDER BY id").fetchall()
        self.matrix = self.np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(
            len(rows), -1
        )
        self.unit_owners = [owners.get(checksum, []) for checksum, _ in rows]
        self.of: dict[int, list[int]] = {}
        for unit, chunk_rowids in enumerate(self.unit_owners):
            for rowid in chunk_rowids:
                self.of.setdefault(rowid, []).append(unit)
        # the (chunk, unit) pairs grouped by chunk, for each chunk's best unit in one pass
        self.chunks = sorted(self.of)
        units = [unit for rowid in self.chunks for unit in self.of[rowid]]
        sizes = [len(self.of[rowid]) for rowid in self.chunks]
        self.pair_units = self.np.asarray(units, dtype=self.np.intp)
        self.starts = self.np.cumsum([0, *sizes[:-1]], dtype=self.np.intp)

    def best(self, query: Any) -> dict[int, float]:
        """Each chunk's best unit cosine to ``query`` (a unit-length vector)."""
        if not self.chunks:
            return {}
        sims = self.matrix @ self.np.asarray(query, dtype=self.np.float32)
        best = self.np.maximum.reduceat(sims[self.pair_units], self.starts)
        return dict(zip(self.chunks, best.tolist(), strict=True))


_kept: OrderedDict[tuple[Any, ...], UnitVectors] = OrderedDict()
_lock = threading.Lock()


def _state(conn: Any, db: str | Path) -> tuple[Any, ...] | None:
    """What identifies the index's current contents, or None when it cannot be told: read
    while ``conn`` holds a read transaction (no commit can land meanwhile)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (GENERATION_KEY,)).fetchone()
    if row is None:
        return None
    with open(db, "rb") as f:
        header = f.read(100)
        st = os.fstat(f.fileno())
    # bytes 18-19: file format versions, 1 = rollback journal (2 = WAL: no change counter)
    if len(header) < 100 or header[18:20] != b"\x01\x01":
        return None
    return (str(Path(db).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
            header[24:28], row[0])  # fmt: skip


def unit_vectors(conn: Any, db: str | Path) -> UnitVectors:
    """The index's :class:`UnitVectors`, kept for the process while the file is unchanged
    (see the module doc).  ``conn`` must be inside a read transaction on ``db``."""
    state = _state(conn, db)
    if state is None:
        return UnitVectors(conn)
    with _lock:
        found = _kept.get(state)
        if found is not None:
            _kept.move_to_end(state)
            return found
    vectors = UnitVectors(conn)
    with _lock:
        _kept[state] = vectors
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)
    return vectors
