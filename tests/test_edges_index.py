"""`letterchunk index` and `search` at their edges, tested as classes of input, through the CLI.

1. What ``--db`` names: a folder, random bytes, a file cut short or zeroed in part, an empty
   file, another application's SQLite database, a file another process holds locked, an index
   missing one of its tables.  Each: exit 2, one message naming the file, no traceback, and the
   file byte-identical (a file that is not our index is never written).
2. Two chunks with one chunk id: exit 2 naming the id and both places (file and line); an
   existing index unchanged, no new file left behind.  A run that fails while writing the chunks
   leaves the same.
3. Every numeric option, for any string argparse may get: exit 0 inside its range, else exit 2
   naming the option; never a traceback.
4. A reader that stops early (``| head -1``, ``| true``): search ends quietly, exit 141 (128 +
   SIGPIPE) once a write meets the closed pipe.
5. A filter on metadata only enrichment writes, over segmented letters: a warning that the index
   holds no such metadata.  An index whose vectors are incomplete (an interrupted run): a
   warning, until indexing again embeds the rest.
6. A capitalised word that does not open a sentence is never dropped from the BM25 query
   ("General Re"), and queries without one keep the query they had.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import Letter, _build_letter, _chunk, _enrich, _write_letter
from letterchunk.cli import main
from letterchunk.errors import ConfigError
from letterchunk.retrieval import embed as embed_module
from letterchunk.retrieval import index as index_module
from letterchunk.retrieval import store
from letterchunk.retrieval.index import build_index
from letterchunk.retrieval.query import STOPWORDS, fts_query
from letterchunk.retrieval.search import Filters, search

np = pytest.importorskip("numpy", reason="dense scoring needs numpy (test extra)")

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# ------------------------------------------------------------------------------- helpers


def cli(*argv: str | Path) -> tuple[int, str, str]:
    """``letterchunk ARGV`` in this process: (exit code, stdout, stderr); argparse's exits too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # a usage error: argparse exits 2 itself
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def run_cli(*argv: str | Path, **popen: object) -> subprocess.CompletedProcess[str]:
    """``python -m letterchunk ARGV`` as a user runs it (its own process, its own stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "letterchunk", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **popen,  # type: ignore[arg-type]
    )


def assert_refused(code: int, err: str, db: Path) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert str(db) in err, err
    assert len(err.strip().splitlines()) == 1 or "usage:" in err, err  # one message


class WordHashEmbedder:
    """Bag of hashed words, L2-normalised, under the name of the default model (so the CLI's
    ``open_embedder`` picks it up when MiniLMInt8 is replaced by it); can stop after N calls."""

    name = embed_module.MiniLMInt8.name
    window = 40
    stop_after: int | None = None
    calls = 0

    def __init__(self, *_: object) -> None:
        pass

    def token_starts(self, text: str) -> list[int]:
        return [m.start() for m in re.finditer(r"\S+", text)]

    def embed(self, texts):
        type(self).calls += 1
        if self.stop_after is not None and type(self).calls > self.stop_after:
            raise KeyboardInterrupt
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, sum(map(ord, word)) % 64] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)


@pytest.fixture
def fake_minilm(monkeypatch):
    WordHashEmbedder.calls, WordHashEmbedder.stop_after = 0, None
    monkeypatch.setattr(embed_module, "MiniLMInt8", WordHashEmbedder)
    return WordHashEmbedder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """An enriched letter's folder and its BM25 index, built once (tests copy them)."""
    root = tmp_path_factory.mktemp("corpus")
    folder = root / "out"
    _write_letter(_enrich(_build_letter()), folder)
    db = root / "letters.sqlite"
    build_index(folder, db)
    return folder, db


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def both_commands(folder: Path, db: Path) -> list[tuple[int, str, str]]:
    return [
        cli("index", folder, "--db", db, "--no-dense"),
        cli("search", "float", "--db", db),
    ]


# ------------------------------------------------------- 1. what --db names is not our index


def _foreign(path: Path, tables: list[str]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # a header is written even with no table
        for n, name in enumerate(tables):
            conn.execute(f'CREATE TABLE "{name}" (id INTEGER, v TEXT)')
            conn.execute(f'INSERT INTO "{name}" VALUES (?, ?)', (n, name))
    conn.close()


def _index_copy(db: Path, dest: Path) -> Path:
    shutil.copy(db, dest)
    return dest


def _zero(path: Path, start: float, end: float) -> None:
    size = path.stat().st_size
    a, b = int(size * start), int(size * end)
    with open(path, "r+b") as fh:
        fh.seek(a)
        fh.write(b"\0" * (b - a))


def _drop(db: Path, table: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()


# (name, how to make the --db path from our good index): each is refused by index and search
KINDS = [
    ("folder", lambda db, p: (p.mkdir(), p)[1]),
    ("empty file", lambda db, p: (p.write_bytes(b""), p)[1]),
    ("text file", lambda db, p: (p.write_text("letters go here\n"), p)[1]),
    ("random bytes", lambda db, p: (p.write_bytes(os.urandom(8192)), p)[1]),
    ("zeroed header", lambda db, p: (_zero(_index_copy(db, p), 0, 0.5), p)[1]),
    ("second half zeroed", lambda db, p: (_zero(_index_copy(db, p), 0.5, 1), p)[1]),
    ("cut in half", lambda db, p: (os.truncate(_index_copy(db, p), db.stat().st_size // 2), p)[1]),
    ("cut to its header", lambda db, p: (os.truncate(_index_copy(db, p), 100), p)[1]),
    ("cut inside its header", lambda db, p: (os.truncate(_index_copy(db, p), 50), p)[1]),
    ("another app's database", lambda db, p: (_foreign(p, ["users", "orders"]), p)[1]),
    ("an empty SQLite database", lambda db, p: (_foreign(p, []), p)[1]),
    *[
        (f"index without {t}", lambda db, p, t=t: (_drop(_index_copy(db, p), t), p)[1])
        for t in ("chunks_fts", "chunks", "units")
    ],
]


def _snapshot(path: Path) -> object:
    if path.is_dir():
        return sorted(p.name for p in path.iterdir())
    return path.read_bytes()


@pytest.mark.parametrize(("kind", "make"), KINDS, ids=[k for k, _ in KINDS])
def test_a_db_that_is_not_our_index_is_refused_and_left_as_it_was(corpus, kind, make):
    folder, good = corpus
    with scratch_dir() as tmp:
        db = make(good, tmp / "x.sqlite")
        before = _snapshot(db)
        for code, _, err in both_commands(folder, db):
            assert_refused(code, err, db)
            assert _snapshot(db) == before, f"{kind}: the file changed"
        if kind == "another app's database":
            assert "another application's SQLite database (tables: orders, users)" in err


@SETTINGS
@given(data=st.binary(min_size=1, max_size=5000))
def test_any_bytes_are_refused_and_never_written(corpus, data):
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / "bytes.db"
        db.write_bytes(data)
        for code, _, err in both_commands(folder, db):
            assert_refused(code, err, db)
            assert db.read_bytes() == data


@SETTINGS
@given(
    tables=st.lists(
        st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(
            lambda t: not t.startswith("sqlite")
        ),
        min_size=1,
        max_size=5,
        unique=True,
    ),
    named=st.sampled_from(["other.db", "letters.sqlite", "index.sqlite"]),
)
def test_another_applications_database_is_never_written(corpus, tables, named):
    """Any schema, even one that has tables named like ours, unless it says it is an index."""
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / named
        _foreign(db, tables)
        before = db.read_bytes()
        for code, _, err in both_commands(folder, db):
            assert_refused(code, err, db)
            assert "not a letterchunk index" in err
            assert db.read_bytes() == before


@SETTINGS
@given(cut=st.floats(0.0, 0.999), zero_from=st.floats(0.0, 1.0), zero_len=st.floats(0.0, 1.0))
def test_a_damaged_index_never_crashes_and_is_never_made_worse(corpus, cut, zero_from, zero_len):
    """Cut short anywhere (always refused), or a stretch zeroed anywhere: refused, or (when the
    zeroes fell where nothing is stored) read as it is; never a traceback."""
    folder, good = corpus
    size = good.stat().st_size
    with scratch_dir() as tmp:
        short = _index_copy(good, tmp / "short.sqlite")
        os.truncate(short, max(1, int(size * cut)))
        before = short.read_bytes()
        for code, _, err in both_commands(folder, short):
            assert_refused(code, err, short)
            assert short.read_bytes() == before
        zeroed = _index_copy(good, tmp / "zeroed.sqlite")
        _zero(zeroed, zero_from, min(1.0, zero_from + zero_len))
        before = zeroed.read_bytes()
        search_code, _, err = cli("search", "float", "--db", zeroed)
        assert search_code in (0, 2) and "Traceback" not in err
        assert zeroed.read_bytes() == before  # search never writes
        if search_code == 2:
            assert_refused(search_code, err, zeroed)
        code, _, err = cli("index", folder, "--db", zeroed, "--no-dense")
        assert code in (0, 2) and "Traceback" not in err
        if code == 2:
            assert_refused(code, err, zeroed)
            assert zeroed.read_bytes() == before


HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN " + sys.argv[2])
print("locked", flush=True)
sys.stdin.read()
"""


# the lock another process holds: which of our commands must wait and be refused
LOCKS = [("EXCLUSIVE", {"index": 2, "search": 2}), ("IMMEDIATE", {"index": 2, "search": 0})]


@pytest.mark.parametrize(("lock", "expected"), LOCKS, ids=[k for k, _ in LOCKS])
def test_an_index_another_process_holds_locked(corpus, monkeypatch, lock, expected):
    folder, good = corpus
    monkeypatch.setattr(store, "LOCK_TIMEOUT_S", 0.2)
    with scratch_dir() as tmp:
        db = _index_copy(good, tmp / "held.sqlite")
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(db), lock],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            before = db.read_bytes()
            index_run, search_run = both_commands(folder, db)
        finally:
            holder.communicate("")
        for command, (code, _, err) in (("index", index_run), ("search", search_run)):
            assert code == expected[command], (command, err)
            assert "Traceback" not in err
            if code == 2:
                assert_refused(code, err, db)
                assert "locked by another process" in err
        assert db.read_bytes() == before


def test_index_never_adds_its_tables_to_another_database_as_a_user_runs_it(corpus):
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / "app.sqlite"
        _foreign(db, ["customers"])
        before = db.read_bytes()
        run = run_cli("index", folder, "--db", db, "--no-dense")
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert f"{db}: is another application's SQLite database" in run.stderr
        assert db.read_bytes() == before


def test_an_index_marks_itself_in_the_sqlite_header(corpus):
    _, good = corpus
    with sqlite3.connect(good) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (store.APPLICATION_ID,)
    conn.close()


def test_an_index_from_before_the_header_mark_is_still_read_and_updated(corpus):
    folder, good = corpus
    with scratch_dir() as tmp:
        db = _index_copy(good, tmp / "old.sqlite")
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA application_id = 0")
        conn.close()
        assert cli("search", "float", "--db", db)[0] == 0
        assert cli("index", folder, "--db", db, "--no-dense")[0] == 0
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA application_id").fetchone() == (store.APPLICATION_ID,)
        conn.close()


def test_a_db_in_a_missing_folder(corpus):
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / "nope" / "x.sqlite"
        for code, _, err in both_commands(folder, db):
            assert_refused(code, err, db)
        assert not db.parent.exists()


# --------------------------------------------------------------- 2. one chunk id, two chunks


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@SETTINGS
@given(
    which=st.integers(0, 2),
    where=st.sampled_from(["same file", "another file"]),
    changed=st.booleans(),
    at=st.integers(0, 3),
    existing=st.booleans(),
)
def test_two_chunks_with_one_id_are_refused_naming_both(
    corpus, which, where, changed, at, existing
):
    folder, good = corpus
    with scratch_dir() as tmp:
        out = tmp / "out"
        shutil.copytree(folder, out)
        first = out / "1987.jsonl"
        lines = _lines(first)
        copy = lines[which]
        chunk_id = re.search(r'"chunk_id": ?"([^"]+)"', copy).group(1)  # type: ignore[union-attr]
        if changed:  # a different chunk under the same id
            obj = json.loads(copy)
            obj["metadata"]["contextual_summary"] = "Another chunk that took this id."
            copy = json.dumps(obj)
        if where == "same file":
            at = min(at, len(lines))
            lines.insert(at, copy)
            first.write_text("\n".join(lines) + "\n", encoding="utf-8")
            original = which + 1 + (1 if at <= which else 0)
            places = {f"{first} line {original}", f"{first} line {at + 1}"}
        else:
            second = out / "1988.jsonl"
            second.write_text(copy + "\n", encoding="utf-8")
            places = {f"{first} line {which + 1}", f"{second} line 1"}
        db = _index_copy(good, tmp / "kept.sqlite") if existing else tmp / "new.sqlite"
        before = db.read_bytes() if existing else None
        code, _, err = cli("index", out, "--db", db, "--no-dense")
        assert code == 2 and "Traceback" not in err, err
        assert f"chunk id {chunk_id}" in err and all(p in err for p in places), err
        if existing:
            assert db.read_bytes() == before
        else:
            assert not db.exists()


def test_a_run_that_fails_while_writing_chunks_leaves_nothing_half_written(corpus, monkeypatch):
    """An existing index keeps every byte; a new path is not left holding an empty file."""
    folder, good = corpus

    def fail(conn, records, *args):
        conn.execute("DELETE FROM chunks")  # some of the work done, then the fault
        raise KeyboardInterrupt

    with scratch_dir() as tmp:
        kept, new = _index_copy(good, tmp / "kept.sqlite"), tmp / "new.sqlite"
        before = kept.read_bytes()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(index_module, "_write_chunks", fail)
            for db in (new, kept):
                code, _, err = cli("index", folder, "--db", db, "--no-dense")
                assert code == 130 and "Traceback" not in err
        assert not new.exists()
        assert kept.read_bytes() == before
        assert cli("search", "float", "--db", kept)[0] == 0


# ------------------------------------------------------------------- 3. numeric options

# option -> the whole numbers it takes (inclusive); search's and index's
SEARCH_NUMBERS = {
    "-k": (1, 100_000),
    "--tokens": (1, 100_000_000),
    "--window": (1, 100_000_000),
    "--year": (1, 9999),
    "--tier": (1, 3),
    "--embed-window": (16, 131_072),
}
INDEX_NUMBERS = {"--embed-window": (16, 131_072)}

ODD = [
    "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "1e3", "0x10", "1.5", "-0", "",
    " ", "7 ", "1_000", "９", "10**3", "99999999999999999999", "-99999999999999999999",
    "9" * 5000,
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(ODD),
    st.integers().map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.integers(-5, 20_000).map(str),
)


def _expected(raw: str, bounds: tuple[int, int]) -> int:
    try:
        value = int(raw)
    except ValueError:
        return 2
    return 0 if bounds[0] <= value <= bounds[1] else 2


@SETTINGS
@given(option=st.sampled_from(sorted(SEARCH_NUMBERS)), raw=VALUES)
def test_every_numeric_search_option_takes_its_range_and_refuses_the_rest(corpus, option, raw):
    _, db = corpus
    code, _, err = cli("search", "float", "--db", db, f"{option}={raw}")
    assert "Traceback" not in err
    assert code == _expected(raw, SEARCH_NUMBERS[option]), (option, raw, err)
    if code == 2:
        assert option in err, err


@SETTINGS
@given(option=st.sampled_from(sorted(INDEX_NUMBERS)), raw=VALUES)
def test_every_numeric_index_option_takes_its_range_and_refuses_the_rest(corpus, option, raw):
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / "n.sqlite"
        code, _, err = cli("index", folder, "--db", db, "--no-dense", f"{option}={raw}")
        assert "Traceback" not in err
        assert code == _expected(raw, INDEX_NUMBERS[option]), (option, raw, err)
        if code == 2:
            assert option in err and not db.exists(), err


def test_a_huge_year_as_a_user_types_it(corpus):
    _, db = corpus
    run = run_cli("search", "float", "--db", db, "--year", "99999999999999999999")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "argument --year: must be a whole number from 1 to 9,999" in run.stderr


@pytest.mark.parametrize(
    "filters",
    [Filters(year=10**20), Filters(year=-(10**20)), Filters(year=0), Filters(tier=2**64)],
)
def test_the_library_refuses_numbers_no_index_holds(corpus, filters):
    _, db = corpus
    with pytest.raises(ConfigError):
        search(db, "float", filters=filters, mode="bm25")


# ------------------------------------------------------------------------- 4. broken pipe


@pytest.fixture(scope="module")
def big_index(tmp_path_factory) -> Path:
    """Several real letters, so that a search's output is more than a pipe holds."""
    root = tmp_path_factory.mktemp("big")
    letters = [ROOT / "corpus" / "letters" / f"{y}.txt" for y in (1977, 1978, 1982, 1987)]
    code, _, err = cli("segment", *letters, "--out", root / "out", "--tier2", "-q")
    assert code == 0, err
    db = root / "big.sqlite"
    assert cli("index", root / "out", "--db", db, "--no-dense", "-q")[0] == 0
    code, out, _ = cli("search", *SEARCH_MUCH[1:], "--db", db, "--json")
    assert code == 0 and len(out.encode()) > 256 * 1024  # more than a pipe holds
    return db


# a search whose output is large (a few hundred KiB as JSON)
SEARCH_MUCH = ["search", "insurance float earnings", "-k", "500", "--expand", "--window", "5000"]


# how the reader stops: how many bytes it reads before it closes the pipe
READERS = [("closes at once (| true)", 0), ("reads a line (| head -1)", 1), ("reads 4 KiB", 4096)]


@pytest.mark.parametrize("output", [["--json"], []], ids=["json", "text"])
@pytest.mark.parametrize(("reader", "take"), READERS, ids=[r for r, _ in READERS])
def test_a_reader_that_stops_early_ends_search_quietly(big_index, reader, take, output):
    argv = [*SEARCH_MUCH, "--db", str(big_index), *output]
    proc = subprocess.Popen(
        [sys.executable, "-m", "letterchunk", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    if take == 1:
        proc.stdout.readline()
    elif take:
        proc.stdout.read(take)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(120)
    # 141 (128 + SIGPIPE) once a write met the closed pipe; 0 when the rest fitted in its buffer
    assert code == 141 if take == 0 else code in (0, 141), err
    assert "Traceback" not in err and "Exception ignored" not in err and "Broken" not in err


# ------------------------------------------------ 5. metadata the index lacks, vectors missing


def _segmented_1977(folder: Path) -> None:
    code, _, err = cli("segment", ROOT / "corpus" / "letters" / "1977.txt", "--out", folder, "-q")
    assert code == 0, err


# filter options that need enrichment, and what the warning says the index lacks
ENRICHED_FILTERS = [
    (["--company", "GEICO"], "company names"),
    (["--concept", "float"], "Buffett concepts"),
    (["--content-type", "mistake_confession"], "enriched content types"),
    (["--content-type", "principle_statement"], "enriched content types"),
]


@pytest.mark.parametrize(
    ("option", "lacks"), ENRICHED_FILTERS, ids=[o[1] for o, _ in ENRICHED_FILTERS]
)
def test_an_enrichment_filter_on_a_segmented_index_says_what_it_lacks(tmp_path, option, lacks):
    folder, db = tmp_path / "seg", tmp_path / "seg.sqlite"
    _segmented_1977(folder)
    assert cli("index", folder, "--db", db, "--no-dense")[0] == 0
    run = run_cli("search", "insurance float", "--db", db, *option)
    assert run.returncode == 0 and "Traceback" not in run.stderr
    assert f"the 1977 letter in {db} holds no {lacks}" in run.stderr, run.stderr
    assert "letterchunk enrich" in run.stderr and option[0] in run.stderr
    # a filter that segmented letters answer says nothing of the kind
    plain = run_cli("search", "insurance float", "--db", db, "--content-type", "narrative")
    assert plain.returncode == 0 and "holds no" not in plain.stderr and plain.stdout


def test_an_enrichment_filter_over_partly_enriched_letters_names_the_bare_ones(tmp_path):
    folder, db = tmp_path / "mixed", tmp_path / "mixed.sqlite"
    _segmented_1977(folder)
    _write_letter(_enrich(_build_letter()), folder)  # 1987, enriched
    assert cli("index", folder, "--db", db, "--no-dense")[0] == 0
    run = run_cli("search", "GEICO float", "--db", db, "--company", "GEICO")
    assert run.returncode == 0 and run.stdout.startswith("1. 1987-")
    assert f"{db}: 1 letter(s) (segmented, not enriched) hold no company names" in run.stderr
    assert "(entities.companies): 1977; --company matches only the other letters" in run.stderr
    enriched_only = run_cli("search", "GEICO", "--db", db, "--company", "GEICO", "--year", "1987")
    assert "hold no" not in enriched_only.stderr


def test_an_interrupted_index_is_searched_with_a_warning_until_indexed_again(
    corpus, fake_minilm, caplog
):
    folder, _ = corpus
    with scratch_dir() as tmp:
        db = tmp / "dense.sqlite"
        fake_minilm.stop_after = 1  # the second batch is interrupted (Ctrl-C)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(index_module, "BATCH", 2)
            code, _, err = cli("index", folder, "--db", db)
        assert code == 130 and "Traceback" not in err
        fake_minilm.stop_after = None
        for mode in ([], ["--dense"]):
            caplog.clear()
            code, out, err = cli("search", "float", "--db", db, *mode)
            assert code == 0 and out.startswith("1. "), err
            warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
            assert any(
                f"{db}: " in w and "have no vectors yet" in w and "letterchunk index" in w
                for w in warned
            ), warned
        assert cli("index", folder, "--db", db)[0] == 0
        caplog.clear()
        assert cli("search", "float", "--db", db)[0] == 0
        assert not [r for r in caplog.records if "no vectors" in r.getMessage()]


def test_no_dense_after_a_change_leaves_vectors_missing_and_search_says_so(
    corpus, fake_minilm, caplog
):
    folder, _ = corpus
    with scratch_dir() as tmp:
        out = tmp / "out"
        shutil.copytree(folder, out)
        db = tmp / "dense.sqlite"
        assert cli("index", out, "--db", db)[0] == 0
        path = out / "1987.jsonl"
        path.write_text(path.read_text().replace("How Berkshire's insurance", "How our insurance"))
        assert cli("index", out, "--db", db, "--no-dense")[0] == 0
        caplog.clear()
        assert cli("search", "float", "--db", db)[0] == 0
        assert any("1 of 3 chunk(s) have no vectors" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------ 6. capitalised function words

CONTENT = ["acme", "pacific", "general", "national", "berkshire", "scott", "wesco", "float"]
FUNCTION = sorted(STOPWORDS)
CAPITALISED_FUNCTION = st.sampled_from(FUNCTION).map(str.capitalize)
OPENERS = st.sampled_from(["How", "What", "Why", "The", "Did", "In", "Over"])
LOWER = st.sampled_from([*CONTENT, *FUNCTION])


@st.composite
def sentences(draw) -> tuple[str, set[str]]:
    """A query of sentences whose words after the first may be capitalised, and the lower-case
    form of each of those capitalised words (none of them opens a sentence)."""
    text, inside = [], set()
    for _ in range(draw(st.integers(1, 3))):
        words = [draw(OPENERS)]
        for _ in range(draw(st.integers(1, 8))):
            word = draw(
                st.one_of(LOWER, CAPITALISED_FUNCTION, st.sampled_from(CONTENT).map(str.title))
            )
            words.append(word)
            if word[0].isupper():
                inside.add(word.lower())
        words.append(draw(LOWER))  # a lower-case word: the query is not written in capitals
        text.append(" ".join(words) + draw(st.sampled_from([".", "?", "!"])))
    return " ".join(text), inside


def _terms(query: str) -> set[str]:
    return {w for phrase in re.findall(r'"([^"]*)"', query) for w in phrase.split()}


def _old_fts_query(text: str) -> str:
    """The query before capitals were read: content words, or all words without any."""
    words = list(dict.fromkeys(re.findall(r"\w+", text.lower())))
    content = [w for w in words if w not in STOPWORDS]
    return " OR ".join(f'"{w}"' for w in content or words)


def _lower_inside(text: str) -> str:
    """``text`` with every capitalised function word that does not open a sentence lowered."""
    out, opens = [], True
    for piece in re.split(r"(\w+)", text):
        if re.fullmatch(r"\w+", piece):
            out.append(piece.lower() if piece.lower() in STOPWORDS and not opens else piece)
            opens = False
        else:
            out.append(piece)
            opens = opens or bool(re.search(r"[.!?]", piece))
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(sentences())
def test_a_capitalised_word_inside_a_sentence_is_never_dropped(case):
    """Kept whatever it is; and a query without one (capitalised content words, a capitalised
    first word) keeps the query it had before, so BM25 ranks normal queries as it did."""
    text, inside = case
    assert inside <= _terms(fts_query(text)), fts_query(text)
    plain = _lower_inside(text)
    assert fts_query(plain) == _old_fts_query(plain)


def _name_letter(name: str) -> Letter:
    """A letter of four paragraphs: one names ``name``; three repeat its content word, never
    next to the function word (which they use in lower case) nor next to any other function
    word the name might hold ("Our acme managers" would name "Our Acme" too)."""
    word = next(w for w in name.split() if w.lower() not in STOPWORDS)
    stop = next(w for w in name.split() if w.lower() in STOPWORDS).lower()
    paragraphs = [
        f"Last year {name} wrote more business than before, and its float grew.",
        *[
            f"Managers report {word.lower()} costs; {stop} told {n} times and said "
            f"{word.lower()} figures matter, as {stop} said."
            for n in ("two", "three", "four")
        ],
    ]
    text = "\n\n".join(paragraphs) + "\n"
    chunks = []
    for n, para in enumerate(paragraphs, 1):
        start = text.index(para)
        chunks.append(_chunk(f"1999-S{n}-T1-001", para, start, section_title=f"Part {n}"))
    return Letter(text=text, chunks=chunks)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    word=st.sampled_from(["Acme", "General", "Pacific", "Wesco"]),
    stop=CAPITALISED_FUNCTION,
    before=st.booleans(),
)
def test_search_finds_a_name_holding_a_function_word(word, stop, before):
    assume(stop.lower() not in {"s", "t", "d", "ll", "m", "ve", "re"} or not before)
    name = f"{stop} {word}" if before else f"{word} {stop}"
    with scratch_dir() as tmp:
        folder, db = tmp / "out", tmp / "x.sqlite"
        _write_letter(_name_letter(name), folder)
        assert cli("index", folder, "--db", db, "--no-dense")[0] == 0
        code, out, err = cli("search", f"How did {name} do?", "--db", db, "-k", "1")
        assert code == 0, err
        assert out.startswith("1. 1999-S1-T1-001 "), (name, out)


def test_general_re_as_a_user_asks_for_it(tmp_path):
    folder, db = tmp_path / "out", tmp_path / "x.sqlite"
    _write_letter(_name_letter("General Re"), folder)
    assert cli("index", folder, "--db", db, "--no-dense")[0] == 0
    run = run_cli("search", "How big was General Re?", "--db", db, "-k", "1")
    assert run.returncode == 0 and run.stdout.startswith("1. 1999-S1-T1-001 "), run.stdout
