"""report.html in a real headless browser (Debian's chromium), asserting on the rendered DOM.

The page fills its totals, cards and filters with JavaScript from the JSON embedded in it, so
these checks only pass when the script really ran: the served HTML has no totals rows at all.

Without chromium the test is skipped locally, and FAILS when ``CI`` is set (``apt-get install
-y chromium``); ``LETTERCHUNK_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, answer
from letterchunk.cli import main
from letterchunk.contract.schema import Chunk
from letterchunk.io import append_lines
from letterchunk.report.analyze import analyze_dir
from letterchunk.report.html import build_html, collect, evidence_marks, word_diff
from letterchunk.report.records import AttemptRecord, RepairReport, runs_by_chunk
from rich_answers import rich_answer

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "letters"

S1, S2, T3 = "1987-S1-T1-001", "1987-S2-T1-001", "1987-S2-T3-001"
EVIL = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"


def chromium() -> str:
    for name in (
        os.environ.get("LETTERCHUNK_CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    ):
        if name and shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    if os.environ.get("CI"):
        pytest.fail(
            "headless chromium is required in CI: apt-get install -y chromium "
            "(or set LETTERCHUNK_CHROMIUM)"
        )
    pytest.skip("chromium not installed (apt-get install -y chromium); CI fails instead")


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    url = page.resolve().as_uri() + fragment
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def mutate(chunk: Chunk, edit) -> Chunk:
    data = chunk.model_dump(mode="json")
    edit(data["metadata"])
    return Chunk.model_validate(data)


@pytest.fixture
def report_dir(enriched_letter, write_letter, tmp_path, monkeypatch) -> tuple[Path, dict]:
    """A folder repaired by `letterchunk repair` (one LLM re-ask, one mechanical fix, one valid
    chunk), plus a second report whose text tries to break out of the page."""
    letter = copy.deepcopy(enriched_letter)
    letter.chunks[1] = mutate(letter.chunks[1], lambda md: md.update(char_count=1))
    letter.chunks[0] = mutate(
        letter.chunks[0], lambda md: md["entities"].update(people=["Charlie Munger", "Ben Graham"])
    )
    folder = tmp_path / "out"
    path = write_letter(letter, folder)
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        server.enqueue(
            answer(
                {
                    "entities": {
                        "companies": [],
                        "people": ["Charlie Munger"],
                        "metrics": ["book value"],
                    }
                }
            )
        )
        assert main(["repair", str(path), "--cache", "off", "--quiet"]) == 0
        served = server.usage_total
    hostile = {
        "chunk_id": "2001-S1-T1-001",
        "letter_year": 2001,
        "attempt": 1,
        "kind": "check",
        "asked_fields": [],
        "changes": [{"field": "metadata.themes", "by": "code", "before": EVIL, "after": "safe"}],
        "violations": [
            {
                "code": "summary.missing",
                "field": "metadata.contextual_summary",
                "message": EVIL,
                "severity": "error",
                "rule_kind": "semantic",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "latency_s": None,
        "source": "file",
        "error": None,
        "outcome": "needs-llm",
        "span": None,
        "content": "Text " + EVIL,
    }
    (folder / "other.report.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
    assert main(["report", str(folder)]) == 0
    return folder, {
        "prompt_tokens": served.prompt_tokens,
        "completion_tokens": served.completion_tokens,
    }


@pytest.mark.browser
def test_report_renders_totals_diffs_and_highlights(report_dir, tmp_path):
    folder, served = report_dir
    page = folder / "report.html"
    raw = page.read_text(encoding="utf-8")
    # nothing external, and nothing that JS computes is in the served HTML
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", raw)
    assert 'data-outcome="repaired"' not in raw and "<mark" not in raw and "<del" not in raw

    dom = dump_dom(page, "", tmp_path / "profile")

    assert 'data-ready="yes"' in dom
    summary = re.search(r'<p id="summary"([^>]*)>([^<]*)</p>', dom)
    assert summary, dom[:2000]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', summary.group(1)))
    assert attrs["data-chunks"] == "4"  # 3 chunks of 1987 + the hostile one
    assert int(attrs["data-prompt-tokens"]) == served["prompt_tokens"]
    assert int(attrs["data-completion-tokens"]) == served["completion_tokens"]

    def count(table: str, key: str, value: str) -> int:
        row = re.search(rf'<tr data-{key}="{re.escape(value)}"[^>]*>(.*?)</tr>', dom, re.S)
        assert row, f"no {table} row for {value}"
        return int(re.findall(r'<td class="n"[^>]*>(\d+)</td>', row.group(1))[0])

    assert count("outcome", "outcome", "repaired") == 2  # S1 by the LLM, S2 by code
    assert count("outcome", "outcome", "valid") == 1
    assert count("outcome", "outcome", "needs-llm") == 1
    assert count("letter", "letter", "1987") == 3
    assert count("rule", "rule", "entity.not_found") == 1
    assert count("rule", "rule", "count.chars") == 1

    # a before/after diff of the LLM repair: Ben Graham removed
    card = re.search(rf'<section class="chunk"[^>]*id="chunk-{S1}"[^>]*>(.*?)</section>', dom, re.S)
    assert card
    assert re.search(r'<div class="diff">.*<del>[^<]*Ben Graham[^<]*</del>', card.group(1), re.S)
    assert "answer.entities" in card.group(1)
    # evidence quotes highlighted in the chunk text
    marks = re.findall(r"<mark[^>]*>([^<]*)</mark>", card.group(1))
    assert any("circle of competence" in m for m in marks)
    # the mechanical fix of S2 shows its numbers
    card2 = re.search(rf'id="chunk-{S2}"[^>]*>(.*?)</section>', dom, re.S)
    assert re.search(r"<del>1</del><ins>\d+</ins>", card2.group(1))

    # hostile text stays text
    assert (
        "<img" not in dom
        and "<b>bold" not in dom
        and "pwned" not in re.sub(r"&[a-z]+;", "", dom.split("<body", 1)[0])
    )
    assert "&lt;img src=x" in dom


@pytest.mark.browser
@pytest.mark.parametrize(
    ("fragment", "shown", "visible"),
    [
        ("", 4, {S1, S2, T3, "2001-S1-T1-001"}),
        ("#outcome=repaired", 2, {S1, S2}),
        ("#rule=entity.not_found", 1, {S1}),
        ("#letter=1987&outcome=valid", 1, {T3}),
        ("#letter=2001", 1, {"2001-S1-T1-001"}),
    ],
    ids=["all", "outcome", "rule", "letter+outcome", "letter"],
)
def test_report_filters(report_dir, tmp_path, fragment, shown, visible):
    folder, _ = report_dir
    dom = dump_dom(folder / "report.html", fragment, tmp_path / "profile")
    assert re.search(rf'<span id="shown" data-shown="{shown}">', dom)
    cards = re.findall(r'<section class="chunk"([^>]*)>', dom)
    open_ids = {re.search(r'id="chunk-([^"]+)"', c).group(1) for c in cards if "hidden" not in c}
    assert open_ids == visible


# ----------------------------------------------------------------- pure helpers (no browser)


def test_word_diff_marks_only_what_changed():
    assert word_diff("one two three", "one 2 three") == [
        ["eq", "one "],
        ["del", "two"],
        ["ins", "2"],
        ["eq", " three"],
    ]
    assert word_diff(["a", "b"], ["a"]) == [["eq", '["a"'], ["del", ', "b"'], ["eq", "]"]]


def test_evidence_marks_ignore_whitespace_and_overlaps():
    text = "We never buy\n  what we do not understand. Then more."
    marks = evidence_marks(
        text, {"a": ["We never buy what we do not understand."], "b": ["buy what", "Not in text"]}
    )
    end = text.index("understand.") + len("understand.")
    assert marks == [[0, end, "a"]]  # "buy what" overlaps it and is dropped


def test_build_html_escapes_the_embedded_json(tmp_path):
    (tmp_path / "x.report.jsonl").write_text(
        json.dumps(
            {
                "chunk_id": "2001-S1-T1-001",
                "attempt": 1,
                "outcome": "failed",
                "content": EVIL,
                "violations": [],
                "changes": [],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    html_text = build_html(tmp_path).read_text(encoding="utf-8")
    script = html_text.split('<script id="report-data" type="application/json">', 1)[1]
    payload = script.split("</script>", 1)[0]
    assert "<" not in payload and ">" not in payload
    assert json.loads(payload)["chunks"][0]["content"] == EVIL


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: d / "missing", "not a folder"),
        (lambda d: d, "holds no chunk files (*.jsonl) and no *.report.jsonl"),
    ],
    ids=["no-folder", "no-reports"],
)
def test_report_command_says_what_to_do(tmp_path, capsys, make, needle):
    assert main(["report", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert needle in err and "letterchunk run" in err


# ----------------------------------------------------------------- a real run, twice


def text(value: str) -> str:
    """``value`` as the DOM dump writes text."""
    return html.escape(value, quote=False)


def text_in(fragment: str, value: str) -> bool:
    return text(value) in fragment


def jsonl(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def card_of(dom: str, chunk_id: str) -> str:
    card = re.search(
        rf'<section class="chunk"[^>]*id="chunk-{re.escape(chunk_id)}"[^>]*>(.*?)</section>',
        dom,
        re.DOTALL,
    )
    assert card, f"no card for {chunk_id}"
    return card.group(1)


def visible_ids(dom: str) -> set[str]:
    cards = re.findall(r'<section class="chunk"([^>]*)>', dom)
    return {re.search(r'id="chunk-([^"]+)"', c).group(1) for c in cards if "hidden" not in c}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    """1977 run live through the real CLI, then again from the answer cache (a cached rerun),
    then `letterchunk report`.  The first run's records must survive the second."""
    base = tmp_path_factory.mktemp("two-runs")
    out, cache = base / "out", base / "cache"
    mp = pytest.MonkeyPatch()
    args = [
        "run",
        str(CORPUS / "1977.txt"),
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        "--quiet",
    ]
    try:
        with FakeOpenAI(rich_answer) as server:
            mp.setenv("OPENAI_BASE_URL", server.base_url)
            mp.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
            mp.setenv("LETTERCHUNK_MODEL", "fake-model")
            for name in (
                "OPENAI_TPM_LIMIT",
                "OPENAI_RPM_LIMIT",
                "LETTERCHUNK_PRICES",
                "LETTERCHUNK_CACHE_DIR",
            ):
                mp.delenv(name, raising=False)
            assert main(args) == 0
            live = server.answers_usage_total  # the report records structured calls only
            first = jsonl(out / "1977.report.jsonl")
            assert main(args) == 0
            assert server.chat_count == len([r for r in first if r["kind"] in ("enrich", "reask")])
    finally:
        mp.undo()
    assert main(["report", str(out)]) == 0
    return {"out": out, "first": first, "live": live}


def test_a_rerun_appends_its_records_and_keeps_the_live_run(two_runs):
    first = two_runs["first"]
    records = jsonl(two_runs["out"] / "1977.report.jsonl")
    assert records[: len(first)] == first  # the live run's lines, untouched
    run_ids = list(dict.fromkeys(r["run_id"] for r in records))
    assert len(run_ids) == 2 and all(r["run_id"] for r in records)
    live = [r for r in records if r["run_id"] == run_ids[0]]
    cached = [r for r in records if r["run_id"] == run_ids[1]]
    assert {r["source"] for r in live} == {"live"} and {r["source"] for r in cached} == {"cache"}
    # every live call has its real latency, first-attempt-valid chunks included
    assert all(isinstance(r["latency_s"], float) and r["latency_s"] > 0 for r in live)
    assert any(r["kind"] == "enrich" and r["outcome"] == "valid" for r in live)
    served = two_runs["live"]
    assert sum(r["usage"]["prompt_tokens"] for r in live) == served.prompt_tokens
    assert sum(r["usage"]["completion_tokens"] for r in live) == served.completion_tokens


def test_report_shows_the_latest_run_with_the_earlier_one_as_history(two_runs):
    data = collect(two_runs["out"])
    chunks = [c for c in data["chunks"] if c["attempts"]]
    assert chunks and len(chunks) == len({r["chunk_id"] for r in two_runs["first"]})
    for c in chunks:
        assert {a["source"] for a in c["attempts"]} == {"cache"}
        [earlier] = c["history"]
        assert {a["source"] for a in earlier["attempts"]} == {"live"}
        assert all(a["latency_s"] is not None for a in earlier["attempts"])
    history_tokens = sum(
        a["usage"]["prompt_tokens"] for c in chunks for a in c["history"][0]["attempts"]
    )
    assert history_tokens == two_runs["live"].prompt_tokens


def test_analyze_totals_every_run_and_counts_each_chunk_once(two_runs):
    rep = analyze_dir(two_runs["out"])["repairs"]
    ids = {r["chunk_id"] for r in two_runs["first"]}
    assert rep["runs"] == 2
    assert rep["records"] == 2 * len(two_runs["first"])
    assert rep["chunks"] == len(ids) and sum(rep["outcomes"].values()) == len(ids)
    assert rep["tokens"] == {
        "prompt_tokens": two_runs["live"].prompt_tokens,
        "completion_tokens": two_runs["live"].completion_tokens,
    }


@pytest.mark.browser
def test_page_shows_what_the_llm_gave_a_first_attempt_valid_chunk(two_runs, tmp_path):
    out = two_runs["out"]
    written = {c["chunk_id"]: c for c in jsonl(out / "1977.jsonl")}
    first_valid = [
        r["chunk_id"]
        for r in two_runs["first"]
        if r["kind"] == "enrich" and r["attempt"] == 1 and r["outcome"] == "valid"
    ]
    chosen = next(
        cid
        for cid in first_valid
        if any(written[cid]["metadata"]["entities"][k] for k in ("companies", "people"))
    )
    md = written[chosen]["metadata"]
    dom = dump_dom(out / "report.html", "", tmp_path / "profile")
    card = card_of(dom, chosen)
    assert f'data-field="summary">{text(md["contextual_summary"])}</dd>' in card
    assert f'<span data-field="content_type">{md["content_type"]}</span>' in card
    for kind in ("companies", "people"):
        tags = re.search(rf'<span data-field="entities.{kind}">(.*?)</span></dd>', card, re.DOTALL)
        assert tags, kind
        assert re.findall(r'<span class="tag">([^<]*)</span>', tags.group(1)) == [
            text(n) for n in md["entities"][kind]
        ] or (not md["entities"][kind] and "none" in tags.group(1))
    for concept in md["buffett_concepts"]:
        assert f'<span class="tag">{text(concept)}</span>' in card
    # the latest run (from the cache) and the live run as history, with its latency in seconds
    assert "latest run " in card and "· cache ·" in card
    assert re.search(r'<details class="history"><summary>1 earlier run', card)
    assert re.search(r"· live · \d+\+\d+ tokens · \d+\.\d\d s ·", card)


@pytest.mark.browser
def test_content_type_filter(two_runs, tmp_path):
    chunks = collect(two_runs["out"])["chunks"]
    by_type: dict[str, set[str]] = {}
    for c in chunks:
        by_type.setdefault(c["content_type"], set()).add(c["chunk_id"])
    assert len(by_type) >= 2, by_type
    for ctype in sorted(by_type, key=lambda t: len(by_type[t]))[:2]:
        dom = dump_dom(two_runs["out"] / "report.html", f"#type={ctype}", tmp_path / ctype)
        assert re.search(rf'<span id="shown" data-shown="{len(by_type[ctype])}">', dom)
        assert visible_ids(dom) == by_type[ctype]
        assert f'<option value="{ctype}">{ctype}</option>' in dom


@pytest.mark.browser
def test_segment_only_folder_renders_chunks_and_validator_findings(tmp_path):
    out = tmp_path / "seg"
    assert main(["segment", str(CORPUS / "1977.txt"), "--out", str(out), "-q"]) == 0
    lines = (out / "1977.jsonl").read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])
    broken["metadata"]["char_count"] += 1  # a finding the validator must show on this card
    lines[1] = json.dumps(broken)
    (out / "1977.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert not list(out.glob("*.report.jsonl"))

    assert main(["report", str(out)]) == 0
    dom = dump_dom(out / "report.html", "", tmp_path / "profile")
    ids = [json.loads(line)["chunk_id"] for line in lines]
    assert re.search(rf'<span id="shown" data-shown="{len(ids)}">', dom)
    assert visible_ids(dom) == set(ids)
    assert re.search(
        r'<tr data-outcome="segmented"><td>segmented</td><td class="n"[^>]*>(\d+)</td>', dom
    ).group(1) == str(len(ids))
    first = json.loads(lines[0])
    card = card_of(dom, first["chunk_id"])
    assert text_in(card, first["metadata"]["section_title"]) and "tier 1" in card
    assert f"{first['metadata']['token_count']} tokens" in card
    assert "validator, stage segmented" in card
    bad = card_of(dom, broken["chunk_id"])
    assert 'data-rule="count.chars"' in bad
    assert '<tr data-file="1977.jsonl"><td>1977.jsonl</td><td>segmented</td>' in dom
    tables = [json.loads(line) for line in lines if json.loads(line)["metadata"]["table_data"]]
    assert tables  # 1977 has a Tier-3 table; its parsed cells are drawn one by one
    t = tables[0]["metadata"]["table_data"][0]
    table_card = card_of(dom, tables[0]["chunk_id"])
    assert f"<th>{text(t['columns'][-1])}</th>" in table_card
    assert f"<td>{text(t['rows'][0][-1])}</td>" in table_card
    dom = dump_dom(out / "report.html", "#rule=count.chars", tmp_path / "profile2")
    assert visible_ids(dom) == {broken["chunk_id"]}


# ----------------------------------------------------------------- appending (no browser)


def test_records_are_appended_as_whole_lines_after_a_torn_one(tmp_path):
    path = tmp_path / "1987.report.jsonl"
    one = RepairReport(path, run_id="run-1")
    one.add([AttemptRecord(S1, 1987, 1, "check", "valid")])
    with path.open("a", encoding="utf-8") as fh:  # a writer killed in the middle of a line
        fh.write('{"chunk_id": "1987-S2-T1-001", "attem')
    two = RepairReport(path)
    two.add([AttemptRecord(S1, 1987, 1, "check", "repaired")])
    two.records.append(AttemptRecord(S2, 1987, 1, "check", "failed"))
    two.flush()
    two.flush()  # nothing new: nothing written twice
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and lines[1].startswith('{"chunk_id": "1987-S2-T1-001", "attem')
    good = [json.loads(x) for x in (lines[0], lines[2], lines[3])]
    assert [r["run_id"] for r in good] == ["run-1", two.run_id, two.run_id]
    assert two.run_id != "run-1" and re.fullmatch(r"\d{8}T\d{6}Z-\d+-[0-9a-f]{4}", two.run_id)
    runs = runs_by_chunk(good)
    assert [(r.run_id, r.outcome) for r in runs[S1]] == [
        ("run-1", "valid"),
        (two.run_id, "repaired"),
    ]
    assert [r.outcome for r in runs[S2]] == ["failed"]


def test_append_lines_creates_the_file_even_with_nothing_to_add(tmp_path):
    path = tmp_path / "sub" / "x.report.jsonl"
    append_lines(path, [])
    assert path.is_file() and path.read_bytes() == b""


def test_a_second_repair_keeps_the_first_repairs_records(report_dir, capsys):
    folder, served = report_dir
    before = jsonl(folder / "1987.report.jsonl")
    assert main(["repair", str(folder / "1987.jsonl"), "--quiet"]) == 0  # valid now: no LLM
    after = jsonl(folder / "1987.report.jsonl")
    assert after[: len(before)] == before
    assert len({r["run_id"] for r in after}) == 2
    chunk = next(c for c in collect(folder)["chunks"] if c["chunk_id"] == S1)
    assert chunk["outcome"] == "valid" and [a["kind"] for a in chunk["attempts"]] == ["check"]
    [earlier] = chunk["history"]
    assert earlier["outcome"] == "repaired"
    assert sum(a["usage"]["prompt_tokens"] for a in earlier["attempts"]) == served["prompt_tokens"]
    rep = analyze_dir(folder)["repairs"]
    assert rep["tokens"]["prompt_tokens"] == served["prompt_tokens"]
    assert rep["outcomes"]["valid"] == 3  # the three 1987 chunks, each counted once
