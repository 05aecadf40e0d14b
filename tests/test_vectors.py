"""The unit vectors a process keeps between searches (letterchunk.retrieval.vectors): read once
while the index is unchanged, read again after any change to it, never taken for another file
at the same path; numpy's scores rank as sqlite-vec's cosine distance does."""

from __future__ import annotations

import sqlite3

import pytest

from letterchunk.retrieval import vectors as vectors_module
from letterchunk.retrieval.index import build_index
from letterchunk.retrieval.store import connect
from letterchunk.retrieval.vectors import GENERATION_KEY, OWNERS_SQL, UnitVectors, unit_vectors
from test_index_search import WordHashEmbedder, find

np = pytest.importorskip("numpy", reason="dense scoring needs numpy (test extra)")


@pytest.fixture
def reads(monkeypatch):
    """How many times the unit vectors were read from an index file."""
    count = [0]
    real = UnitVectors.__init__

    def counted(self, conn):
        count[0] += 1
        real(self, conn)

    monkeypatch.setattr(UnitVectors, "__init__", counted)
    monkeypatch.setattr(vectors_module, "_kept", type(vectors_module._kept)())
    return count


@pytest.fixture
def dense_db(tmp_path, enriched_letter, write_letter):
    folder = tmp_path / "letter"
    write_letter(enriched_letter, folder)
    db = tmp_path / "dense.sqlite"
    build_index(folder, db, WordHashEmbedder())
    return db


@pytest.fixture
def two_dirs(tmp_path, enriched_letter, write_letter):
    """The hand-built letter, and the same letter with one paragraph's words replaced."""
    first, second = tmp_path / "first", tmp_path / "second"
    write_letter(enriched_letter, first)
    write_letter(enriched_letter, second)
    for name in ("1987.jsonl", "1987_cleaned.txt", "1987.evidence.jsonl"):
        path = second / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("GEICO", "Wesco").replace("float", "vault"), "utf-8")
    return first, second


def _dense(db, query):
    return [(h.chunk_id, h.score) for h in find(db, query, k=3, mode="dense", window=None)]


def _scores(db, query, kept=True):
    """Each chunk's dense score for ``query``: from the vectors the process keeps, or read
    afresh from the file."""
    [vector] = WordHashEmbedder().embed([query])
    conn, _ = connect(db, vectors=False)
    try:
        conn.execute("BEGIN")
        return (unit_vectors(conn, db) if kept else UnitVectors(conn)).best(vector)
    finally:
        conn.close()


def test_an_unchanged_index_is_read_once_for_many_searches(dense_db, reads):
    first = _dense(dense_db, "GEICO float underwriting")
    for _ in range(3):
        assert _dense(dense_db, "GEICO float underwriting") == first
    _dense(dense_db, "textile mills")
    assert reads[0] == 1


@pytest.mark.parametrize("how", ["a new file at the same path", "the same file, in place"])
def test_an_index_built_again_is_read_again(two_dirs, tmp_path, reads, how):
    first, second = two_dirs
    db = tmp_path / "letters.sqlite"
    build_index(first, db, WordHashEmbedder())
    _dense(db, "GEICO float")
    before = _scores(db, "GEICO float")
    if how == "a new file at the same path":
        db.unlink()  # its inode may well be the old one's
    build_index(second, db, WordHashEmbedder())  # else the index it built, rewritten in place
    _dense(db, "GEICO float")
    assert reads[0] == 2
    after = _scores(db, "GEICO float")
    assert after != before
    assert after == _scores(db, "GEICO float", kept=False)


def test_any_commit_to_the_index_is_a_change(dense_db, reads):
    _dense(dense_db, "GEICO float")
    with sqlite3.connect(dense_db) as conn:  # a commit that leaves the units as they were
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('note', 'x')")
    _dense(dense_db, "GEICO float")
    assert reads[0] == 2


@pytest.mark.parametrize("older", ["no generation", "wal"])
def test_an_index_that_cannot_be_told_unchanged_is_read_for_each_search(dense_db, reads, older):
    with sqlite3.connect(dense_db) as conn:
        if older == "no generation":  # an index written before the token existed
            conn.execute("DELETE FROM meta WHERE key = ?", (GENERATION_KEY,))
        else:  # WAL mode keeps no file change counter
            conn.execute("PRAGMA journal_mode = WAL")
    first = _dense(dense_db, "GEICO float underwriting")
    assert _dense(dense_db, "GEICO float underwriting") == first
    assert reads[0] == 2


def test_numpy_scores_rank_as_sqlite_vecs_cosine_distance(dense_db):
    conn, has_vec = connect(dense_db)
    try:
        if not has_vec:
            pytest.skip("sqlite-vec does not load here (pysqlite3 or sqlite-vec missing)")
        conn.execute("BEGIN")
        kept = unit_vectors(conn, dense_db)
        for query in ("GEICO float underwriting", "textile mills", "insurance"):
            [vector] = WordHashEmbedder().embed([query])
            blob = np.asarray(vector, dtype="<f4").tobytes()
            rows = conn.execute(
                f"SELECT o.rowid, min(vec_distance_cosine(u.embedding, ?)) AS d "
                f"FROM ({OWNERS_SQL}) o JOIN units u ON u.checksum = o.checksum "
                "GROUP BY o.rowid",
                [blob],
            ).fetchall()
            best = kept.best(vector)
            assert sorted(best) == sorted(r for r, _ in rows)
            for rowid, distance in rows:
                assert best[rowid] == pytest.approx(1.0 - distance, abs=1e-5)
    finally:
        conn.close()
