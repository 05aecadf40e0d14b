"""Cross-year links (``letterchunk link``, :mod:`letterchunk.retrieval.links`) on real chunks.

The chunks are three letters enriched by replaying their cassettes (1977, 1978, 1995), indexed
with BM25 only (no model, no search extra), so every link here comes from the index's text and
the chunks' concepts and principles.  What is held against the chunk files themselves, not
against the library's own reading of them: a link never points into its own letter, its target
exists, its year is the target's, and every idea it names is a concept or principle of both
chunks.  ``link --write`` is held to the same files: the years it writes are the links', it
changes nothing else (``letterchunk diff`` and the bytes of each line say so), validates no
worse, is a no-op the second time, and refuses a folder whose chunks are not the index's.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from letterchunk.cli import EXIT_INVALID, EXIT_USAGE, main
from letterchunk.contract.validate import validate_path
from letterchunk.contract.violations import Violation
from letterchunk.errors import InputError
from letterchunk.retrieval import writeback
from letterchunk.retrieval.chunks import read_chunks
from letterchunk.retrieval.index import build_index
from letterchunk.retrieval.links import (
    LINKS_K,
    build_links,
    check_links,
    has_links,
    read_links,
)
from letterchunk.retrieval.search import search
from letterchunk.retrieval.writeback import write_related_years
from letterchunk.runner.lock import folder_lock
from letterchunk.text.clean import load_letter
from replayed import replay_letters

ROOT = Path(__file__).resolve().parents[1]
YEARS = (1977, 1978, 1995)
EVOLUTION = ROOT / "bench" / "evolution_questions.jsonl"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    """``letterchunk ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # a usage error: argparse exits 2 itself
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _norm(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


@pytest.fixture(scope="module")
def enriched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_letters(tmp_path_factory.mktemp("enriched"), YEARS)


@pytest.fixture(scope="module")
def linked(enriched: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("index") / "letters.sqlite"
    build_index(enriched, db, None)
    build_links(db)
    return db


def _copy(db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(db, copy)
    return copy


def test_links_hold_against_the_chunk_files(enriched: Path, linked: Path) -> None:
    chunks = {c.chunk_id: c for c in read_chunks(enriched)}

    def ideas(chunk_id: str) -> set[str]:
        md = chunks[chunk_id].metadata
        found = {_norm(c) for c in md.buffett_concepts}
        return found | {"principle: " + _norm(p.statement) for p in md.principles}

    links = read_links(linked)
    assert sum(map(len, links.values())) >= 3 * len(YEARS), "real letters share concepts"
    for chunk_id, found in links.items():
        year = chunks[chunk_id].metadata.letter_year
        assert 1 <= len(found) <= LINKS_K
        assert [link.rank for link in found] == list(range(1, len(found) + 1))
        assert len({link.target_year for link in found}) == len(found), "one link per letter"
        for link in found:
            target = chunks[link.target_id].metadata  # the target exists
            assert link.target_year == target.letter_year != year, link
            assert link.shared and set(link.shared) <= ideas(chunk_id) & ideas(link.target_id)
    assert check_links(linked) == []


def test_every_chunk_with_a_shared_idea_in_another_letter_can_be_linked(
    enriched: Path, linked: Path
) -> None:
    """A chunk gets no link only when no chunk of another letter shares an idea with it."""
    chunks = list(read_chunks(enriched))
    concepts = {c.chunk_id: {_norm(x) for x in c.metadata.buffett_concepts} for c in chunks}
    links = read_links(linked)
    for c in chunks:
        others = [
            o
            for o in chunks
            if o.metadata.letter_year != c.metadata.letter_year
            and concepts[c.chunk_id] & concepts[o.chunk_id]
        ]
        if c.chunk_id not in links:
            assert not others or not c.metadata.contextual_summary, c.chunk_id


def test_links_are_deterministic(enriched: Path, linked: Path, tmp_path: Path) -> None:
    again = _copy(linked, tmp_path)
    build_links(again)
    assert read_links(again) == read_links(linked)
    fresh = tmp_path / "fresh.sqlite"  # a new index of the same folder links the same
    build_index(enriched, fresh, None)
    build_links(fresh)
    assert read_links(fresh) == read_links(linked)


def test_k_bounds_the_links_per_chunk(linked: Path, tmp_path: Path) -> None:
    db = _copy(linked, tmp_path)
    build_links(db, k=1)
    one = read_links(db)
    assert all(len(found) == 1 for found in one.values())
    # the single link is the best of the three
    assert {c: f[0] for c, f in one.items()} == {c: f[0] for c, f in read_links(linked).items()}


def test_search_expands_hits_to_their_links(linked: Path) -> None:
    hits = search(linked, "insurance underwriting results", k=3, expand_links=True)
    stored = read_links(linked)
    assert any(h.links for h in hits)
    for hit in hits:
        via = {link.via for link in hit.links}
        assert via <= {hit.chunk_id, (hit.parent.chunk_id if hit.parent else None)}
        expected = [link.target_id for link in stored.get(next(iter(via), hit.chunk_id), [])]
        assert [x.chunk_id for x in hit.links] == expected
        for x in hit.links:
            assert x.letter_year != hit.letter_year
            text = load_letter(ROOT / "corpus" / "letters" / f"{x.letter_year}.txt").text
            assert text[x.start_char : x.end_char] == x.content


def test_cli_link_and_expand_links(linked: Path, tmp_path: Path) -> None:
    db = _copy(linked, tmp_path)
    code, out, err = cli("link", "--db", db)
    assert code == 0 and "link(s) for" in err and "bm25" in err, err
    code, out, _ = cli("search", "insurance underwriting", "--db", db, "-k", "2", "--expand-links")
    assert code == 0
    shown = re.findall(r"^   link (\d{4}) (\d{4}-S\d+-T[123]-\d{3}) .* shares (.+)$", out, re.M)
    assert shown, out
    code, out, _ = cli(
        "search", "insurance underwriting", "--db", db, "-k", "2", "--expand-links", "--json"
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and any(r["links"] for r in records)
    assert {(str(x["letter_year"]), x["chunk_id"]) for r in records for x in r["links"]} == {
        (y, c) for y, c, _ in shown
    }
    code, out, err = cli("link", "--db", db, "--check", "--json")
    assert code == 0 and "every link holds" in err
    assert len(out.splitlines()) == sum(map(len, read_links(db).values()))


def test_index_again_drops_the_links(enriched: Path, linked: Path, tmp_path: Path) -> None:
    db = _copy(linked, tmp_path)
    build_index(enriched, db, None)
    with sqlite3.connect(db) as conn:
        assert not has_links(conn)
        assert conn.execute("SELECT count(*) FROM links").fetchone() == (0,)
    code, _, err = cli("search", "float", "--db", db, "--expand-links")
    assert code == EXIT_USAGE and f"letterchunk link --db {db}" in err, err


def test_segment_only_index_gets_no_links_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    letters = [ROOT / "corpus" / "letters" / f"{y}.txt" for y in YEARS[:2]]
    assert cli("segment", *letters, "--out", out)[0] == 0
    db = tmp_path / "seg.sqlite"
    build_index(out, db, None)
    stats = build_links(db)
    assert (stats.sources, stats.links) == (0, 0) and stats.chunks > 0
    assert stats.reason and "segment-only" in stats.reason
    code, _, err = cli("link", "--db", db)
    assert code == 0 and "no links" in err and "enrich" in err, err
    code, out_text, _ = cli("search", "textile", "--db", db, "--expand-links", "-k", "1")
    assert code == 0 and out_text and "   link " not in out_text


@pytest.mark.parametrize(
    ("tamper", "fault"),
    [
        ("UPDATE links SET target_id = '1999-S1-T1-001' WHERE rank = 1", "is not in the index"),
        (
            "UPDATE links SET target_year = CAST(substr(chunk_id, 1, 4) AS INTEGER), "
            "target_id = chunk_id WHERE rank = 1",
            "own letter",
        ),
        ("UPDATE links SET target_year = 1900 WHERE rank = 1", "outside 1950-2100"),
        ("UPDATE links SET shared = '[\"mr market\"]' WHERE rank = 1", "shares no idea"),
    ],
)
def test_check_finds_a_damaged_link(linked: Path, tmp_path: Path, tamper: str, fault: str) -> None:
    db = _copy(linked, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute(tamper)
    assert any(fault in p for p in check_links(db)), check_links(db)
    code, _, err = cli("link", "--db", db, "--check")
    assert code == EXIT_INVALID and fault in err
    assert cli("link", "--db", db)[0] == 0 and check_links(db) == []  # computed again: sound


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: None, "no such index"),
        (lambda p: p.write_bytes(b"not sqlite at all" * 10), "not a SQLite file"),
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(), "another"),
    ],
)
def test_bad_index_is_a_clean_error(tmp_path: Path, make, words: str) -> None:
    db = tmp_path / "x.sqlite"
    make(db)
    for argv in (["link", "--db", db], ["link", "--db", db, "--check"]):
        code, out, err = cli(*argv)
        assert code == EXIT_USAGE and words in err and "Traceback" not in err, err


def test_an_index_of_the_former_schema_asks_to_index_again(linked: Path, tmp_path: Path) -> None:
    db = _copy(linked, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    code, _, err = cli("link", "--db", db)
    assert code == EXIT_USAGE and "index again" in err, err


def test_k_out_of_range_is_a_usage_error(linked: Path) -> None:
    for bad in ("0", "-1", "nan", "101"):
        code, _, err = cli("link", "--db", linked, "-k", bad)
        assert code == EXIT_USAGE and "-k" in err, err


def test_dense_vectors_join_the_ranking(enriched: Path, tmp_path: Path) -> None:
    """With vectors in the index the links use them too (a deterministic toy embedder: hashed
    words), stay sound, and the same index still links the same."""
    np = pytest.importorskip("numpy", reason="dense links need numpy (the search extra)")

    class Hashed:
        name, window = "hashed-words", 64

        def token_starts(self, text: str) -> list[int]:
            return [m.start() for m in re.finditer(r"\S+", text)] or [0]

        def embed(self, texts):  # noqa: ANN001, ANN202 - the Embedder protocol
            rows = np.zeros((len(texts), 32), dtype=np.float32)
            for i, text in enumerate(texts):
                for word in re.findall(r"[a-z]+", text.lower()):
                    rows[i, sum(map(ord, word)) % 32] += 1.0
            return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    db = tmp_path / "dense.sqlite"
    build_index(enriched, db, Hashed())
    stats = build_links(db)
    assert stats.signals == ("bm25", "dense") and stats.links > 0
    assert check_links(db) == []
    first = read_links(db)
    build_links(db)
    assert read_links(db) == first


# --- the evolution questions of bench/links.py ------------------------------------------------


def _evolution() -> list[dict]:
    return [json.loads(line) for line in EVOLUTION.read_text("utf-8").splitlines() if line]


def test_evolution_questions_are_sound() -> None:
    questions = _evolution()
    assert len(questions) >= 10
    assert len({q["id"] for q in questions}) == len(questions)
    recorded = {int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml") if p.stem.isdigit()}
    texts: dict[int, str] = {}
    for q in questions:
        assert set(q) == {"id", "kind", "question", "evidence"} and q["kind"] == "evolution"
        assert q["question"].strip().endswith("?")
        years = [e["year"] for e in q["evidence"]]
        assert len(set(years)) == len(years) >= 2, q["id"]  # one passage per letter, two or more
        assert set(years) <= recorded, q["id"]
        question = " ".join(q["question"].lower().split())
        for e in q["evidence"]:
            evidence = " ".join(e["text"].split())
            assert len(evidence.split()) >= 8, (q["id"], e)
            if e["year"] not in texts:
                path = ROOT / "corpus" / "letters" / f"{e['year']}.txt"
                texts[e["year"]] = " ".join(load_letter(path).text.split())
            assert evidence in texts[e["year"]], (q["id"], e["year"], "not in the cleaned letter")
            words = evidence.lower().split()
            copied = [
                " ".join(words[i : i + 6])
                for i in range(len(words) - 5)
                if " ".join(words[i : i + 6]) in question
            ]
            assert not copied, (q["id"], copied)
    assert Counter(len(q["evidence"]) for q in questions)[3] >= 5  # most span three letters


# --- link --write: the links' years into the chunk files ---------------------------------------


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the folder: its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _error_keys(folder: Path) -> Counter[tuple[str, str | None, str | None]]:
    return Counter(
        (v.code, v.chunk_id, v.field)
        for v in validate_path(folder, stage="enriched")
        if v.severity == "error"
    )


@pytest.fixture
def written(enriched: Path, linked: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(folder before, folder after `link --write`, its index)."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(enriched, before)
    _plant_own_year(before)
    shutil.copytree(before, after)
    db = _copy(linked, tmp_path)
    code, _, err = cli("link", "--db", db, "--write", after)
    assert code == 0 and "set to their links' years" in err, err
    return before, after, db


def _plant_own_year(folder: Path) -> None:
    """Add its own letter's year to the related_years of the first enriched chunk of every
    chunk file, as a model guessing from the text may write it, so the write must drop it
    whatever the recordings hold."""
    for path in sorted(folder.glob("*.jsonl")):
        if path.name.endswith(".evidence.jsonl") or path.name.endswith(".report.jsonl"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            record = json.loads(line)
            meta = record["metadata"]
            if meta["contextual_summary"].strip():
                refs = meta["cross_references"]
                refs["related_years"] = sorted({*refs["related_years"], meta["letter_year"]})
                lines[i] = json.dumps(record, ensure_ascii=False)
                break
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_write_sets_related_years_to_the_links_years(written: tuple[Path, Path, Path]) -> None:
    before, after, db = written
    links = read_links(db)
    old = {c.chunk_id: c for c in read_chunks(before)}
    new = list(read_chunks(after))
    assert [c.chunk_id for c in new] == list(old)
    own_guesses = 0
    for chunk in new:
        years = chunk.metadata.cross_references.related_years
        guess = old[chunk.chunk_id].metadata.cross_references.related_years
        own_guesses += chunk.metadata.letter_year in guess
        if not chunk.metadata.contextual_summary.strip():  # never enriched: left as it was
            assert years == guess
            continue
        assert years == sorted({link.target_year for link in links.get(chunk.chunk_id, [])})
        assert chunk.metadata.letter_year not in years
    assert own_guesses, "the model guessed a chunk's own year somewhere: the write drops it"
    assert any(not c.metadata.cross_references.related_years for c in new) or all(
        c.chunk_id in links for c in new
    )


def test_write_changes_only_related_years(written: tuple[Path, Path, Path]) -> None:
    before, after, _ = written
    code, out, _ = cli("diff", before, after, "--json")
    report = json.loads(out)
    assert code == 1 and report["counts"]["changed"] > 0
    assert [f["field"] for f in report["fields"]] == ["cross_references.related_years"]
    assert report["counts"]["added"] == report["counts"]["removed"] == 0
    assert report["counts"]["rebounded"] == report["counts"]["moved"] == 0
    # byte for byte: a line differs only where its years did, and then only in them
    for path in sorted(before.glob("*")):
        if not re.fullmatch(r"\d{4}\.jsonl", path.name):
            assert path.read_bytes() == (after / path.name).read_bytes(), path.name
            continue
        old_lines = path.read_text("utf-8").splitlines()
        new_lines = (after / path.name).read_text("utf-8").splitlines()
        assert len(old_lines) == len(new_lines)
        for old_line, new_line in zip(old_lines, new_lines, strict=True):
            old_value, new_value = json.loads(old_line), json.loads(new_line)
            years = new_value["metadata"]["cross_references"]["related_years"]
            old_value["metadata"]["cross_references"]["related_years"] = years
            assert new_line == json.dumps(old_value, ensure_ascii=False, separators=(", ", ": "))


def test_write_validates_no_worse(written: tuple[Path, Path, Path]) -> None:
    before, after, _ = written
    assert not _error_keys(after) - _error_keys(before)
    code, _, _ = cli("validate", after, "--stage", "enriched")
    assert code == cli("validate", before, "--stage", "enriched")[0]


def test_write_again_changes_nothing(written: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, after, db = written
    files = _files(after)
    code, _, err = cli("link", "--db", db, "--write", after)
    assert code == 0 and "nothing to change" in err, err
    assert _files(after) == files  # same bytes, same mtimes, no lock file left
    # the written folder indexed again links the same, and writing once more is a no-op
    again = tmp_path / "again.sqlite"
    build_index(after, again, None)
    build_links(again)
    assert read_links(again) == read_links(db)
    result = write_related_years(again, after)
    assert (result.changed, result.written) == (0, ()) and _files(after) == files


def test_write_result_counts_what_changed(enriched: Path, linked: Path, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    old = {c.chunk_id: c.metadata.cross_references.related_years for c in read_chunks(folder)}
    result = write_related_years(_copy(linked, tmp_path), folder)
    new = {c.chunk_id: c for c in read_chunks(folder)}
    changed = [i for i, c in new.items() if c.metadata.cross_references.related_years != old[i]]
    assert result.changed == len(changed) > 0
    assert result.chunks == sum(bool(c.metadata.contextual_summary.strip()) for c in new.values())
    assert result.linked == len(read_links(linked))
    assert result.dropped == sum(
        bool(old[i]) and not new[i].metadata.cross_references.related_years for i in changed
    )
    assert {p.name for p in result.written} == {new[i].chunk_id[:4] + ".jsonl" for i in changed}
    assert result.files == len(list(folder.glob("*.jsonl"))) - 6  # less evidence and report


def _edit_summary(folder: Path) -> None:
    path = folder / "1978.jsonl"
    lines = path.read_text("utf-8").splitlines()
    chunk = json.loads(lines[0])
    chunk["metadata"]["contextual_summary"] += " Edited after indexing."
    lines[0] = json.dumps(chunk, ensure_ascii=False, separators=(", ", ": "))
    path.write_text("".join(line + "\n" for line in lines), "utf-8")


@pytest.mark.parametrize(
    ("tamper", "words"),
    [
        (_edit_summary, ["1978.jsonl: chunk 1978-", "metadata.contextual_summary", "index"]),
        (lambda f: (f / "1995.jsonl").unlink(), ["holds no chunk 1995-", "another folder"]),
        (
            lambda f: shutil.copyfile(f / "1977.jsonl", f / "1980.jsonl"),
            ["1980.jsonl: chunk 1977-S1-T1-001 is also in", "1977.jsonl"],
        ),
    ],
    ids=["edited", "letter-missing", "letter-copied"],
)
def test_write_refuses_a_folder_of_other_chunks(
    enriched: Path, linked: Path, tmp_path: Path, tamper, words: list[str]
) -> None:
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    tamper(folder)
    files = _files(folder)
    code, _, err = cli("link", "--db", _copy(linked, tmp_path), "--write", folder)
    assert code == EXIT_USAGE and "nothing was written" in err and "Traceback" not in err, err
    assert all(w in err for w in words), err
    assert _files(folder) == files


def test_write_refuses_a_letter_the_index_lacks(enriched: Path, tmp_path: Path) -> None:
    fewer = tmp_path / "fewer"
    shutil.copytree(enriched, fewer)
    (fewer / "1995.jsonl").unlink()
    db = tmp_path / "fewer.sqlite"
    build_index(fewer, db, None)
    build_links(db)
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    files = _files(folder)
    code, _, err = cli("link", "--db", db, "--write", folder)
    assert code == EXIT_USAGE and "1995.jsonl: chunk 1995-" in err, err
    assert f"is not in the index {db}" in err and f"letterchunk index {folder}" in err, err
    assert _files(folder) == files


def test_write_refuses_segment_only_output_and_paths_that_are_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    letters = [ROOT / "corpus" / "letters" / f"{y}.txt" for y in YEARS[:2]]
    assert cli("segment", *letters, "--out", out)[0] == 0
    db = tmp_path / "seg.sqlite"
    build_index(out, db, None)
    files = _files(out)
    code, _, err = cli("link", "--db", db, "--write", out)
    assert code == EXIT_USAGE and "segment-only" in err and "enrich" in err, err
    assert _files(out) == files
    for path in (out / "1977.jsonl", tmp_path / "nowhere"):
        code, _, err = cli("link", "--db", db, "--write", path)
        assert code == EXIT_USAGE and "not a folder" in err and "Traceback" not in err, err
    assert not (tmp_path / "nowhere").exists() and _files(out) == files


def test_write_refuses_a_folder_another_process_writes(
    enriched: Path, linked: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    db = _copy(linked, tmp_path)
    with folder_lock(folder):
        files = _files(folder)
        code, _, err = cli("link", "--db", db, "--write", folder)
        assert code == EXIT_USAGE and "already writing this folder" in err, err
        assert _files(folder) == files


def test_write_refuses_links_that_fail_their_check(
    enriched: Path, linked: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    db = _copy(linked, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE links SET target_year = 1900 WHERE rank = 1")
    files = _files(folder)
    code, _, err = cli("link", "--db", db, "--check", "--write", folder)
    assert code == EXIT_INVALID and "outside 1950-2100" in err
    with pytest.raises(InputError, match="fail the check"):
        write_related_years(db, folder)
    assert _files(folder) == files


def test_write_puts_every_file_back_when_one_validates_worse(
    enriched: Path, linked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule the years would break (none does today) leaves the folder as it was."""
    folder = tmp_path / "out"
    shutil.copytree(enriched, folder)
    real = writeback.validate_path
    seen: set[Path] = set()

    def stricter(path: Path, *, stage: str) -> list[Violation]:
        found = real(path, stage=stage)
        if path in seen and path.name == "1995.jsonl":  # its second validation: after writing
            found.append(Violation("xref.year_range", "error", "made up", "1995-S1-T1-001"))
        seen.add(path)
        return found

    monkeypatch.setattr(writeback, "validate_path", stricter)
    files = _files(folder)
    with pytest.raises(InputError, match="xref.year_range .*put back"):
        write_related_years(_copy(linked, tmp_path), folder)
    assert {n: b for n, (b, _) in _files(folder).items()} == {n: b for n, (b, _) in files.items()}
