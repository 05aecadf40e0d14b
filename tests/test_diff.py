"""`letterchunk diff RUN_A RUN_B`: two output folders compared chunk by chunk and field by field.

The real-recording test diffs the 1977 output of commit b827e20 (``tests/data/runs/``, produced
by that commit replaying its own recording, before the prompts changed) against today's replay
of ``cassettes/1977.yaml``, and checks the differences observed field by field: re-recording
1977 changes them, and this test says so.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from letterchunk.cli import main
from letterchunk.contract.files import load_chunks
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.layout import RUN_FILE
from letterchunk.llm.config import LLMSettings
from letterchunk.llm.prompts import prompt_hash
from letterchunk.report.diff import RunDiff, diff_runs, render_text, similarity
from letterchunk.report.runs import read_identity, read_run, run_order
from letterchunk.resources import resource_path
from letterchunk.runner.identity import run_identity
from letterchunk.runner.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"
OLD_RUN = ROOT / "tests" / "data" / "runs" / "1977-b827e20"
MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
S1, S2, S3, S4, T3, S5, S6 = (
    "1977-S1-T1-001",
    "1977-S2-T1-001",
    "1977-S3-T1-001",
    "1977-S4-T1-001",
    "1977-S4-T3-001",
    "1977-S5-T1-001",
    "1977-S6-T1-001",
)


def segmented(out: Path, *years: int) -> Path:
    letters = [str(LETTERS / f"{y}.txt") for y in years or (1977,)]
    assert main(["segment", *letters, "--out", str(out), "-q"]) == 0
    return out


def edit(folder: Path, edit_chunks: Callable[[list[dict]], list[dict]], stem: str = "1977") -> None:
    """Rewrite ``folder/stem.jsonl`` through ``edit_chunks`` (a list of chunk dicts)."""
    path = folder / f"{stem}.jsonl"
    chunks = edit_chunks([c.model_dump(mode="json") for c in load_chunks(path)])
    lines = [dump_chunk(Chunk.model_validate(c)) for c in chunks]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def by_id(chunks: list[dict]) -> dict[str, dict]:
    return {c["chunk_id"]: c for c in chunks}


def diff_json(a: Path, b: Path, capsys) -> tuple[int, dict]:
    code = main(["diff", str(a), str(b), "--json"])
    return code, json.loads(capsys.readouterr().out)


def changes_of(d: RunDiff, chunk_id: str) -> dict:
    [chunk] = [c for c in d.chunks if c.chunk_id == chunk_id]
    return {c.field: c for c in chunk.changes}


# --------------------------------------------------------------------------- same, segment-only


def test_identical_folders_exit_0(tmp_path, capsys):
    a = segmented(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    code, out = diff_json(a, b, capsys)
    assert code == 0
    assert out["identical"] is True and out["chunks"] == [] and out["fields"] == []
    assert out["counts"]["unchanged"] == out["counts"]["chunks_a"] == 7
    assert main(["diff", str(a), str(a)]) == 0
    text = capsys.readouterr().out
    assert text.rstrip().endswith("identical") and "7 unchanged" in text
    assert main(["diff", str(a), str(b), "-q"]) == 0
    assert capsys.readouterr().out == ""


def test_segment_only_folder_against_an_enriched_one(tmp_path, capsys):
    seg = segmented(tmp_path / "seg")
    code, out = diff_json(seg, OLD_RUN, capsys)
    assert code == 1 and out["identical"] is False
    a, b = out["runs"]["a"], out["runs"]["b"]
    assert (a["ledger"], a["stage"], a["model"]) == (False, "segmented", None)
    assert (b["ledger"], b["stage"], b["model"]) == (True, "enriched", MODEL)
    # the same cuts: every chunk is matched and only its fields differ
    assert out["counts"] == {
        "chunks_a": 7,
        "chunks_b": 7,
        "unchanged": 0,
        "changed": 7,
        "rebounded": 0,
        "moved": 0,
        "added": 0,
        "removed": 0,
    }
    summaries = [
        ch for c in out["chunks"] for ch in c["changes"] if ch["field"] == "contextual_summary"
    ]
    assert len(summaries) == 7
    assert all(ch["before"] == "" and ch["after"] and ch["similarity"] == 0.0 for ch in summaries)
    assert main(["diff", str(seg), str(OLD_RUN)]) == 1
    text = capsys.readouterr().out
    assert "*run.json" in text and "unknown" in text and text.rstrip().endswith("different")


# --------------------------------------------------------------------------- boundaries


def _recut(chunks: list[dict]) -> list[dict]:
    c = by_id(chunks)
    # rebounded: S2 loses its last 10 characters
    c[S2]["content"] = c[S2]["content"][:-10]
    c[S2]["metadata"]["source_span"]["end_char_exclusive"] -= 10
    # moved: S5's text under another id
    c[S5]["chunk_id"] = "1977-S5-T1-002"
    # removed S6, added its first half under a new id (a split)
    half = json.loads(json.dumps(c[S6]))
    half["chunk_id"] = "1977-S6-T1-002"
    half["content"] = half["content"][:200]
    span = half["metadata"]["source_span"]
    span["end_char_exclusive"] = span["start_char"] + 200
    return [x for x in chunks if x["chunk_id"] != S6] + [half]


def test_added_removed_rebounded_and_moved_chunks(tmp_path, capsys):
    a = segmented(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    edit(b, _recut)
    old = by_id([c.model_dump(mode="json") for c in load_chunks(a / "1977.jsonl")])
    code, out = diff_json(a, b, capsys)
    assert code == 1
    got = {c["chunk_id"]: c for c in out["chunks"]}
    assert {k: v["status"] for k, v in got.items()} == {
        S2: "rebounded",
        "1977-S5-T1-002": "moved",
        S6: "removed",
        "1977-S6-T1-002": "added",
    }
    span2 = old[S2]["metadata"]["source_span"]
    assert got[S2]["span_a"] == [span2["start_char"], span2["end_char_exclusive"]]
    assert got[S2]["span_b"] == [span2["start_char"], span2["end_char_exclusive"] - 10]
    assert got["1977-S5-T1-002"]["id_in_a"] == S5 and got["1977-S5-T1-002"]["changes"] == []
    assert got[S6]["span_b"] is None and got[S6]["overlaps"] == ["1977-S6-T1-002"]
    assert got["1977-S6-T1-002"]["span_a"] is None and got["1977-S6-T1-002"]["overlaps"] == [S6]
    assert out["counts"]["unchanged"] == 4
    assert main(["diff", str(a), str(b)]) == 1
    text = capsys.readouterr().out
    assert "1977-S5-T1-002  moved (was 1977-S5-T1-001)" in text
    assert f"{S6}  removed  chars A [" in text and "overlaps 1977-S6-T1-002" in text


def test_letters_in_one_run_only_and_a_changed_cleaned_text(tmp_path, capsys):
    a = segmented(tmp_path / "a", 1977, 1978)
    b = segmented(tmp_path / "b", 1977, 1982)
    cleaned = b / "1977_cleaned.txt"
    cleaned.write_bytes(cleaned.read_bytes() + b" ")
    code, out = diff_json(a, b, capsys)
    assert code == 1 and out["chunks"] == []
    assert out["letters"] == {
        "compared": ["1977"],
        "only_in_a": ["1978"],
        "only_in_b": ["1982"],
        "cleaned_changed": ["1977"],
    }


# --------------------------------------------------------------------------- every field kind


def _reenrich(chunks: list[dict]) -> list[dict]:
    c = by_id(chunks)
    md = c[S2]["metadata"]
    md["themes"] = [t for t in md["themes"] if t != md["themes"][0]] + ["mill closures"]
    md["content_type"] = "mistake_confession"  # was narrative
    md["contextual_summary"] = md["contextual_summary"].replace("poor year", "dismal year")
    md["entities"]["people"] = ["Ken Chace"]
    md["principles"] = [{"statement": "Forecasts are frail.", "category": "behavior"}]
    md["cross_references"]["related_years"] = [1976]
    md["retrieval_priority"] = "low"
    t3 = c[T3]["metadata"]
    t3["table_data"][0]["summary"] = "Equity holdings at the end of 1977."
    t3["table_data"][0]["columns"] = list(reversed(t3["table_data"][0]["columns"]))
    return chunks


def test_every_field_kind(tmp_path, capsys):
    new = tmp_path / "new"
    shutil.copytree(OLD_RUN, new)
    edit(new, _reenrich)
    old = by_id([c.model_dump(mode="json") for c in load_chunks(OLD_RUN / "1977.jsonl")])
    d = diff_runs(read_run(OLD_RUN), read_run(new))
    assert [(c.chunk_id, c.status) for c in d.chunks] == [(S2, "changed"), (T3, "changed")]
    s2 = changes_of(d, S2)
    themes = old[S2]["metadata"]["themes"]
    assert (s2["themes"].kind, s2["themes"].added, s2["themes"].removed) == (
        "set",
        ("mill closures",),
        (themes[0],),
    )
    assert (s2["content_type"].kind, s2["content_type"].before, s2["content_type"].after) == (
        "value",
        "narrative",
        "mistake_confession",
    )
    summary = s2["contextual_summary"]
    assert summary.kind == "text" and "dismal year" in summary.after
    assert summary.similarity == similarity(summary.before, summary.after) and (
        0.8 < summary.similarity < 1
    )
    people = s2["entities.people"]  # was Ken Chace, Management, Textile Operations
    assert (people.added, people.removed) == ((), ("Management", "Textile Operations"))
    assert s2["principles"].added == ("Forecasts are frail. [behavior]",)
    assert s2["principles"].removed == ()
    assert s2["cross_references.related_years"].added == (1976,)
    priority = old[S2]["metadata"]["retrieval_priority"]
    assert (s2["retrieval_priority"].before, s2["retrieval_priority"].after) == (priority, "low")
    t3 = changes_of(d, T3)
    assert set(t3) == {"table_data[0].summary", "table_data[0].columns"}
    assert t3["table_data[0].summary"].kind == "text"
    assert t3["table_data[0].columns"].kind == "value"
    fields = {f.field: f for f in d.fields()}
    assert fields["content_type"].transitions == (("narrative", "mistake_confession", 1),)
    assert (fields["themes"].added, fields["themes"].removed) == (1, 1)
    assert fields["table_data[].summary"].mean_similarity is not None
    text = render_text(d)
    assert "  content_type: narrative -> mistake_confession" in text
    assert "  themes: +mill closures, -" + themes[0] in text
    assert "  contextual_summary: rewritten (similarity " in text
    assert main(["diff", str(OLD_RUN), str(new), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(d.to_dict()))


def test_the_json_keys_are_stable(tmp_path, capsys):
    new = tmp_path / "new"
    shutil.copytree(OLD_RUN, new)
    edit(new, _reenrich)
    _, out = diff_json(OLD_RUN, new, capsys)
    assert list(out) == [
        "format",
        "identical",
        "runs",
        "letters",
        "duplicate_ids",
        "counts",
        "fields",
        "chunks",
    ]
    assert out["format"] == 2
    assert list(out["runs"]["a"]) == [
        "folder",
        "ledger",
        "stage",
        "started_at",
        "letterchunk_version",
        "model",
        "mode",
        "temperature",
        "seed",
        "max_tokens",
        "prompts_sha256",
        "prompt_files",
        "schema_sha256",
        "vocabularies",
        "status",
        "problem",
    ]
    assert list(out["fields"][0]) == [
        "field",
        "kind",
        "chunks",
        "added",
        "removed",
        "transitions",
        "mean_similarity",
    ]
    chunk = out["chunks"][0]
    assert list(chunk) == [
        "letter",
        "chunk_id",
        "status",
        "id_in_a",
        "span_a",
        "span_b",
        "overlaps",
        "changes",
    ]
    assert list(chunk["changes"][0]) == [
        "field",
        "kind",
        "before",
        "after",
        "added",
        "removed",
        "similarity",
    ]


def test_control_characters_reach_the_terminal_escaped(tmp_path, capsys):
    new = tmp_path / "new"
    shutil.copytree(OLD_RUN, new)

    def hostile(chunks: list[dict]) -> list[dict]:
        by_id(chunks)[S1]["metadata"]["contextual_summary"] = "\x1b[2J\x1b]0;pwned\x07 gone"
        return chunks

    edit(new, hostile)
    assert main(["diff", str(OLD_RUN), str(new)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b]0;pwned\\x07 gone" in out


# --------------------------------------------------------------------------- bad input


def _not_canonical(d: Path) -> None:
    segmented(d)
    (d / "1977.jsonl").write_text('{"chunk_id": "1977-S1-T1-001"}\n', encoding="utf-8")


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: None, "no such folder; pass the --out folder"),
        (lambda d: d.write_text("x"), "not a folder; pass the --out folder"),
        (lambda d: d.mkdir(), "not an output folder: it holds no chunk file"),
        (
            lambda d: (d.mkdir(), (d / "1977.txt").write_text("a letter")),
            "not an output folder: it holds no chunk file",
        ),
        (_not_canonical, "1977.jsonl: chunk 1 (1977-S1-T1-001, line 1): is not canonical"),
        (
            lambda d: (segmented(d), (d / "1977.jsonl").write_bytes(b"\xff\xfe\n")),
            "1977.jsonl: ",
        ),
    ],
    ids=["missing", "a file", "empty folder", "letters, no chunks", "not canonical", "not utf-8"],
)
@pytest.mark.parametrize("side", ["a", "b"])
def test_unusable_input_exits_2_naming_the_path(tmp_path, capsys, make, needle, side):
    good = segmented(tmp_path / "good")
    bad = tmp_path / "bad"
    make(bad)
    argv = [str(bad), str(good)] if side == "a" else [str(good), str(bad)]
    assert main(["diff", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert needle in captured.err and str(bad) in captured.err


def test_an_unreadable_run_json_is_named_and_the_diff_goes_on(tmp_path, capsys):
    new = tmp_path / "new"
    shutil.copytree(OLD_RUN, new)
    (new / RUN_FILE).write_text("{not json", encoding="utf-8")
    code, out = diff_json(OLD_RUN, new, capsys)
    assert code == 0  # the chunks are the same
    b = out["runs"]["b"]
    assert b["ledger"] is False and b["model"] is None
    assert b["problem"].startswith(str(new / RUN_FILE))
    assert main(["diff", str(OLD_RUN), str(new)]) == 0
    assert "B: run.json not read (" in capsys.readouterr().out


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    a = segmented(tmp_path / "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "letterchunk", "diff", str(a), str(OLD_RUN)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"letterchunk diff: A ")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err
    assert code in (0, 1, 141)  # 141: a write met the closed pipe (the rest did not fit its buffer)


def _with_identity(folder: Path) -> Path:
    """``folder`` with a run.json as a run writes it: every prompt file and vocabulary hashed."""
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", api_key="sk-x", model="m-1")
    Ledger("m-1", prices={}, identity=run_identity(settings)).write(folder)
    return folder


def test_one_folder_with_run_json_and_one_without(tmp_path, capsys):
    """The help's own example, `diff segmented/ enriched/`: the rows only the run with a
    run.json has (each prompt file, each vocabulary) read unknown on the other side."""
    seg = segmented(tmp_path / "seg")
    run = _with_identity(segmented(tmp_path / "run"))
    for a, b in ((seg, run), (run, seg)):
        assert main(["diff", str(a), str(b)]) == 0  # the same chunks: identical
        text = capsys.readouterr().out
        prompt = next(line for line in text.splitlines() if line.startswith("*prompt enrich_user"))
        assert "unknown" in prompt
        assert main(["diff", str(a), str(b), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["identical"] is True
    assert main(["report", str(seg), "--compare", str(run)]) == 0
    page, diff = (Path(p) for p in capsys.readouterr().out.split())
    assert page.is_file() and diff.is_file() and "prompt enrich_user" in diff.read_text()


def _duplicate(chunks: list[dict]) -> list[dict]:
    return [*chunks[:3], chunks[2], *chunks[3:]]


def test_a_duplicated_chunk_line_is_a_difference(tmp_path, capsys):
    a = segmented(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    lines = (b / "1977.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (b / "1977.jsonl").write_text("".join(_duplicate(lines)), encoding="utf-8")
    code, out = diff_json(a, b, capsys)
    assert code == 1 and out["identical"] is False
    assert out["duplicate_ids"] == [
        {"letter": "1977", "chunk_id": S3, "in_a": 1, "in_b": 2, "same": False}
    ]
    assert main(["diff", str(a), str(b)]) == 1
    text = capsys.readouterr().out
    assert f"{S3}  duplicate id: 1 chunk(s) carry it in A, 2 in B, not the same chunks" in text
    assert text.rstrip().endswith("different")
    # the same copies in both runs: named, and the runs are still identical
    code, out = diff_json(b, b, capsys)
    assert code == 0 and out["duplicate_ids"][0]["same"] is True


def test_two_chunks_under_one_id_are_named_as_such(tmp_path, capsys):
    a = segmented(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)

    def two_under_one_id(chunks: list[dict]) -> list[dict]:
        chunks[3]["chunk_id"] = chunks[2]["chunk_id"]
        return chunks

    edit(b, two_under_one_id)
    assert main(["diff", str(a), str(b)]) == 1
    text = capsys.readouterr().out
    assert f"{S3}  duplicate id: 1 chunk(s) carry it in A, 2 in B" in text
    assert main(["report", str(b), "--compare", str(a)]) == 0
    _, diff = (Path(p) for p in capsys.readouterr().out.split())
    assert "duplicate id, 1 chunk(s) carry it in A, 2 in B" in diff.read_text()


# --------------------------------------------------------------------------- run identity


def test_run_json_records_the_identity_and_diff_reads_it_back(tmp_path):
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", api_key="sk-x", model="m-1")
    identity = run_identity(settings, now=lambda: 1_800_000_000.0)
    Ledger("m-1", prices={}, identity=identity).write(tmp_path)
    assert json.loads((tmp_path / RUN_FILE).read_text())["identity"] == identity
    assert identity["started_at"] == "2027-01-15T08:00:00Z"
    assert identity["prompts_sha256"] == prompt_hash()
    schema = (ROOT / "schemas" / "chunk.schema.json").read_bytes()
    assert identity["schema_sha256"] == hashlib.sha256(schema).hexdigest()
    concepts = resource_path("schemas", "buffett_concepts.json").read_bytes()
    assert identity["vocabularies"]["buffett_concepts.json"] == hashlib.sha256(concepts).hexdigest()
    assert set(identity["prompt_files"]) == {p.stem for p in (ROOT / "prompts").glob("*.md")}
    got = read_identity(tmp_path, "enriched")
    assert got.to_dict() == {
        "folder": str(tmp_path),
        "ledger": True,
        "stage": "enriched",
        "problem": None,
        "status": "running",
        **identity,
    }
    # a ledger written before the identity block: model and status, nothing else
    old = read_identity(OLD_RUN, "enriched")
    assert (old.ledger, old.model, old.status) == (True, MODEL, "complete")
    assert (old.started_at, old.prompts_sha256, old.prompt_files) == (None, None, {})


def _timed(folder: Path, started: str | None) -> Path:
    segmented(folder)
    if started is not None:
        (folder / RUN_FILE).write_text(json.dumps({"identity": {"started_at": started}}))
    return folder


def test_runs_are_ordered_oldest_first_untimed_ones_first_as_given(tmp_path):
    late = _timed(tmp_path / "late", "2026-11-26T10:00:00Z")
    early = _timed(tmp_path / "early", "2025-01-01T00:00:00Z")
    seg2 = _timed(tmp_path / "seg2", None)
    seg1 = _timed(tmp_path / "seg1", None)
    runs = [read_run(p) for p in (late, seg2, early, seg1)]
    assert [Path(r.folder).name for r in run_order(runs)] == ["seg2", "seg1", "early", "late"]


# --------------------------------------------------------------------------- the real recordings


def replay_today(out: Path) -> Path:
    """Today's code replaying today's cassettes/1977.yaml, run.json written as a run writes
    it."""
    from letterchunk.llm.replay import replayed_client
    from letterchunk.runner.pipeline import RunOptions, run_paths
    from letterchunk.runner.session import ledger_session

    with (
        replayed_client(ROOT / "cassettes" / "1977.yaml") as (client, played),
        ledger_session(out, client) as hooks,
    ):
        options = RunOptions(workers=1, on_failure="skip", source_label="cassette")
        run_paths([LETTERS / "1977.txt"], out, client, options, hooks)
    assert played.all_played
    return out


def test_two_recordings_of_1977_differ_field_by_field(tmp_path, capsys):
    pytest.importorskip("vcr")
    today = replay_today(tmp_path / "today")
    d = diff_runs(read_run(OLD_RUN), read_run(today))
    # the runs side by side: the old ledger predates the identity block
    assert (d.a.model, d.a.started_at, d.a.prompts_sha256) == (MODEL, None, None)
    assert (d.b.model, d.b.mode, d.b.prompts_sha256) == (MODEL, "JSON_SCHEMA", prompt_hash())
    assert d.b.started_at is not None and d.b.stage == d.a.stage == "enriched"
    # same segmentation, same cleaned text: every chunk matched, every chunk re-enriched
    assert (d.only_in_a, d.only_in_b, d.cleaned_changed) == ((), (), ())
    assert d.counts() == {
        "chunks_a": 7,
        "chunks_b": 7,
        "unchanged": 0,
        "changed": 7,
        "rebounded": 0,
        "moved": 0,
        "added": 0,
        "removed": 0,
    }
    per = {c.chunk_id: {ch.field: ch for ch in c.changes} for c in d.chunks}
    assert list(per) == [S1, S2, S3, S4, T3, S5, S6]
    # the confession questions of the new prompts flip two chunks
    flips = {
        cid: (f["content_type"].before, f["content_type"].after)
        for cid, f in per.items()
        if "content_type" in f
    }
    assert flips == {
        S2: ("narrative", "mistake_confession"),
        S3: ("narrative", "mistake_confession"),
    }
    # judged rule sentences become principles in five narrative chunks; none is dropped, and
    # S5, whose candidates all stay under the rule threshold, has none in either run
    principles = {cid: f["principles"] for cid, f in per.items() if "principles" in f}
    assert set(principles) == {S1, S2, S3, S4, S6}
    assert all(p.added and p.removed == () for p in principles.values())
    # each chunk keeps its three most probable principles (4, 4, 9, 14 and 3 above the
    # threshold before the cap)
    assert [len(principles[c].added) for c in (S1, S2, S3, S4, S6)] == [3, 3, 3, 3, 3]
    [roe] = [a for a in principles[S1].added if a.startswith("Return on equity capital is a")]
    assert roe.endswith("[valuation]")  # a principle is shown with its category
    assert per[S1]["section_title"].before == "Textile Operations (section 1)"
    assert per[S1]["section_title"].after == "Financial Performance"
    for level in ("retrieval_priority", "abstraction_level"):
        assert level not in per[S1]
    assert [cid for cid, f in per.items() if "retrieval_priority" in f] == [S2, S4]
    assert (per[S3]["abstraction_level"].before, per[S3]["abstraction_level"].after) == (
        "medium",
        "high",
    )
    # every summary rewritten, from nearly the same (S6) to another text (S1)
    ratios = {cid: f["contextual_summary"].similarity for cid, f in per.items()}
    assert set(ratios) == set(per) and ratios[S6] >= 0.7 and ratios[S1] < 0.4
    assert [cid for cid, f in per.items() if "table_data[0].summary" in f] == [T3]
    # entity lists offer only names typed person/organisation: S2 drops its four
    companies = per[S2]["entities.companies"]
    assert (set(companies.removed), companies.added) == (
        {"Ken Chace", "Manchester", "New Bedford", "Textile Operations"},
        (),
    )
    assert set(per[S2]["entities.people"].removed) == {
        "Ken Chace",
        "Management",
        "Textile Operations",
    }
    # the concepts are now chosen among ranked candidates: every chunk's set changed
    assert [cid for cid, f in per.items() if "buffett_concepts" in f] == list(per)
    fields = {f.field: f for f in d.fields()}
    assert fields["content_type"].transitions == (("narrative", "mistake_confession", 2),)
    assert (fields["principles"].chunks, fields["principles"].added) == (5, 15)
    assert fields["contextual_summary"].chunks == 7
    # the command says the same, and that the runs differ
    assert main(["diff", str(OLD_RUN), str(today), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(d.to_dict()))
