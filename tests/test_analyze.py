"""`letterchunk analyze`: statistics of real corpus output (segmented: the whole shipped corpus;
enriched: two letters run through the real pipeline against the local fake server)."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from letterchunk.cli import main
from letterchunk.contract.schema import Chunk
from letterchunk.contract.vocabulary import load_concepts
from letterchunk.report.analyze import analyze_dir, distribution, render_text
from letterchunk.report.records import AttemptRecord, RepairReport, ViolationNote
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter
from rich_answers import rich_answer

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "letters"


def read_chunks(folder: Path) -> list[Chunk]:
    return [
        Chunk.model_validate_json(line)
        for p in sorted(folder.glob("[0-9][0-9][0-9][0-9].jsonl"))
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    out = tmp_path_factory.mktemp("segmented")
    assert main(["segment", str(CORPUS), "--out", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def enriched(tmp_path_factory):
    out = tmp_path_factory.mktemp("enriched")
    mp = pytest.MonkeyPatch()
    with FakeOpenAI(rich_answer) as server:
        mp.setenv("OPENAI_BASE_URL", server.base_url)
        mp.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        mp.setenv("LETTERCHUNK_MODEL", "fake-model")
        for name in ("OPENAI_TPM_LIMIT", "OPENAI_RPM_LIMIT", "LETTERCHUNK_PRICES"):
            mp.delenv(name, raising=False)
        code = main(
            [
                "run",
                str(CORPUS / "1977.txt"),
                str(CORPUS / "1978.txt"),
                "--out",
                str(out),
                "--cache",
                "off",
                "--quiet",
                "--concurrency",
                "3",
            ]
        )
    mp.undo()
    assert code == 0
    return out


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], {"n": 0, "min": None, "median": None, "p90": None, "max": None, "mean": None}),
        ([7], {"n": 1, "min": 7, "median": 7, "p90": 7, "max": 7, "mean": 7.0}),
        (list(range(1, 11)), {"n": 10, "min": 1, "median": 5.5, "p90": 9, "max": 10, "mean": 5.5}),
        (
            [300, 100, 200],
            {"n": 3, "min": 100, "median": 200, "p90": 300, "max": 300, "mean": 200.0},
        ),
    ],
)
def test_distribution(values, expected):
    assert distribution(values) == expected


def test_whole_segmented_corpus(segmented, capsys):
    a = analyze_dir(segmented)
    letters = sorted(CORPUS.glob("*.txt"))
    direct = {load_letter(p).year: segment_letter(load_letter(p)) for p in letters}
    assert sorted(int(y) for y in a["letters"]) == sorted(direct)
    for year, chunks in direct.items():
        row = a["letters"][str(year)]
        assert row["chunks"] == len(chunks)
        assert row["tiers"] == {
            str(t): n for t, n in sorted(Counter(c.metadata.chunk_tier for c in chunks).items())
        }
        assert row["tokens"] == sum(c.metadata.token_count for c in chunks)
    everything = [c for cs in direct.values() for c in cs]
    tokens = sorted(c.metadata.token_count for c in everything)
    assert a["chunks"] == len(everything) > 900
    assert a["tokens"]["all"]["min"] == tokens[0] and a["tokens"]["all"]["max"] == tokens[-1]
    assert a["tokens"]["all"]["median"] == statistics.median(tokens)
    assert a["tokens"]["all"]["p90"] == tokens[math.ceil(0.9 * len(tokens)) - 1]  # nearest rank
    assert a["content_types"] == dict(
        sorted(Counter(c.metadata.content_type for c in everything).items())
    )
    below = sum(
        1
        for c in everything
        if c.metadata.chunk_tier == 1
        and c.metadata.token_count < 250
        and not c.metadata.standalone_exception
    )
    assert a["size"]["tier1"]["below_minimum"] == below
    # segmented output carries no semantic fields yet
    assert a["enriched_chunks"] == 0 and sum(a["mistake_confessions"].values()) == 0
    assert a["repairs"] is None and a["skipped"] == []

    assert main(["analyze", str(segmented), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == a
    assert main(["analyze", str(segmented)]) == 0
    text = capsys.readouterr().out
    assert f"{a['chunks']} chunks in {len(direct)} letters" in text
    assert "not enriched yet" in text


def test_enriched_letters(enriched, capsys):
    a = analyze_dir(enriched, top=50)
    chunks = read_chunks(enriched)
    assert a["chunks"] == a["enriched_chunks"] == len(chunks) > 0
    confessions = Counter(
        c.metadata.letter_year for c in chunks if c.metadata.content_type == "mistake_confession"
    )
    assert sum(confessions.values()) > 0  # 1977's textile section admits a mistaken forecast
    assert a["mistake_confessions"] == {y: confessions.get(int(y), 0) for y in ("1977", "1978")}
    concepts = Counter(x for c in chunks for x in set(c.metadata.buffett_concepts))
    assert dict(map(tuple, a["top"]["buffett_concepts"])) == dict(concepts)
    assert {k for k, _ in a["top"]["buffett_concepts"]} <= load_concepts()
    companies = Counter(x for c in chunks for x in set(c.metadata.entities.companies))
    assert dict(map(tuple, a["top"]["companies"])) == dict(companies)
    themes = a["top"]["themes"]
    assert [n for _, n in themes] == sorted((n for _, n in themes), reverse=True)
    # one structured call per chunk, plus the yes/no follow-ups run.json counts apart
    questions = a["run"]["questions"]
    assert questions >= sum(1 for c in chunks if c.metadata.chunk_tier != 3)
    assert a["run"]["status"] == "complete" and a["run"]["requests"] == len(chunks) + questions

    assert main(["analyze", str(enriched), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "mistake confessions per year" in text and "top buffett_concepts: " in text
    top3 = analyze_dir(enriched, top=3)["top"]["buffett_concepts"]
    assert len(top3) == 3 and f"{top3[0][0]} ({top3[0][1]})" in text


def test_repairs_by_rule_from_the_report_files(enriched, tmp_path):
    folder = tmp_path / "with-report"
    folder.mkdir()
    for p in enriched.iterdir():  # the run's own reports left out: records are appended
        if not p.name.endswith(".report.jsonl"):
            (folder / p.name).write_bytes(p.read_bytes())

    def v(code: str, fixed: bool) -> ViolationNote:
        return ViolationNote(code, "x", "m", "error", "semantic", fixed)

    def rec(chunk_id: str, attempt: int, kind, outcome, *violations) -> AttemptRecord:
        year = int(chunk_id[:4])
        return AttemptRecord(chunk_id, year, attempt, kind, outcome, violations=violations)

    RepairReport.for_letter(folder, 1977).add(
        [
            rec(
                "1977-S1-T1-001",
                1,
                "enrich",
                "retry",
                v("evidence.not_found", False),
                v("concept.case", True),
            ),
            rec("1977-S1-T1-001", 2, "reask", "repaired"),
            rec("1977-S2-T1-001", 1, "enrich", "valid"),
        ]
    )
    RepairReport.for_letter(folder, 1978).add(
        [rec("1978-S3-T1-001", 1, "enrich", "failed", v("evidence.not_found", False))]
    )
    rep = analyze_dir(folder)["repairs"]
    assert rep["by_rule"] == {
        "concept.case": {"found": 1, "fixed": 1},
        "evidence.not_found": {"found": 2, "fixed": 0},
    }
    assert rep["outcomes"] == {"failed": 1, "repaired": 1, "valid": 1}
    assert rep["chunks"] == 3 and rep["records"] == 4 and rep["runs"] == 2  # one per letter
    assert "evidence.not_found" in render_text(analyze_dir(folder))


def test_unreadable_lines_are_skipped_and_named(segmented, tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    good = (segmented / "1977.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "1977.jsonl").write_text(
        "\n".join([good[0], "{not json", good[1]]) + "\n", encoding="utf-8"
    )
    a = analyze_dir(folder)
    assert a["chunks"] == 2
    assert [(s["file"], s["line"]) for s in a["skipped"]] == [("1977.jsonl", 2)]
    assert main(["analyze", str(folder)]) == 0
    assert "letterchunk validate" in capsys.readouterr().err


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p])
def test_unusable_folder_exits_2(tmp_path, capsys, make):
    assert main(["analyze", str(make(tmp_path))]) == 2
    assert "letterchunk" in capsys.readouterr().err
