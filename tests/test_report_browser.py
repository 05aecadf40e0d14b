"""report.html in a real headless browser (Debian's chromium), asserting on the rendered DOM.

The page fills its totals, cards and filters with JavaScript from the JSON embedded in it, so
these checks only pass when the script really ran: the served HTML has no totals rows at all.

Without chromium the test is skipped locally, and FAILS when ``CI`` is set (``apt-get install
-y chromium``); ``LETTERCHUNK_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from letterchunk.cli import main
from letterchunk.report import build_html, evidence_marks, word_diff
from letterchunk.schema import Chunk
from fake_openai import FakeOpenAI, answer

S1, S2, T3 = "1987-S1-T1-001", "1987-S2-T1-001", "1987-S2-T3-001"
EVIL = '</script><img src=x onerror="document.title=\'pwned\'"><b>bold</b>'


def chromium() -> str:
    for name in (os.environ.get("LETTERCHUNK_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    if os.environ.get("CI"):
        pytest.fail("headless chromium is required in CI: apt-get install -y chromium "
                    "(or set LETTERCHUNK_CHROMIUM)")
    pytest.skip("chromium not installed (apt-get install -y chromium); CI fails instead")


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    url = page.resolve().as_uri() + fragment
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=False,
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
    letter.chunks[0] = mutate(letter.chunks[0], lambda md: md["entities"].update(
        people=["Charlie Munger", "Ben Graham"]))
    folder = tmp_path / "out"
    path = write_letter(letter, folder)
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        server.enqueue(answer({"entities": {"companies": [], "people": ["Charlie Munger"],
                                            "metrics": ["book value"]}}))
        assert main(["repair", str(path), "--cache", "off", "--quiet"]) == 0
        served = server.usage_total
    hostile = {"chunk_id": "2001-S1-T1-001", "letter_year": 2001, "attempt": 1, "kind": "check",
               "asked_fields": [], "changes": [{"field": "metadata.themes", "by": "code",
                                                "before": EVIL, "after": "safe"}],
               "violations": [{"code": "summary.missing", "field": "metadata.contextual_summary",
                               "message": EVIL, "severity": "error", "rule_kind": "semantic"}],
               "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "latency_s": None,
               "source": "file", "error": None, "outcome": "needs-llm", "span": None,
               "content": "Text " + EVIL}
    (folder / "other.report.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
    assert main(["report", str(folder)]) == 0
    return folder, {"prompt_tokens": served.prompt_tokens,
                    "completion_tokens": served.completion_tokens}


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
    assert "<img" not in dom and "<b>bold" not in dom and "pwned" not in re.sub(
        r"&[a-z]+;", "", dom.split("<body", 1)[0])
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
        ["eq", "one "], ["del", "two"], ["ins", "2"], ["eq", " three"]]
    assert word_diff(["a", "b"], ["a"]) == [["eq", '["a"'], ["del", ', "b"'], ["eq", "]"]]


def test_evidence_marks_ignore_whitespace_and_overlaps():
    text = "We never buy\n  what we do not understand. Then more."
    marks = evidence_marks(text, {"a": ["We never buy what we do not understand."],
                                  "b": ["buy what", "Not in text"]})
    end = text.index("understand.") + len("understand.")
    assert marks == [[0, end, "a"]]  # "buy what" overlaps it and is dropped


def test_build_html_escapes_the_embedded_json(tmp_path):
    (tmp_path / "x.report.jsonl").write_text(json.dumps({
        "chunk_id": "2001-S1-T1-001", "attempt": 1, "outcome": "failed", "content": EVIL,
        "violations": [], "changes": []}) + "\n", encoding="utf-8")
    html_text = build_html(tmp_path).read_text(encoding="utf-8")
    script = html_text.split('<script id="report-data" type="application/json">', 1)[1]
    payload = script.split("</script>", 1)[0]
    assert "<" not in payload and ">" not in payload
    assert json.loads(payload)["chunks"][0]["content"] == EVIL


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: d / "missing", "not a folder"),
        (lambda d: d, "holds no *.report.jsonl"),
    ],
    ids=["no-folder", "no-reports"],
)
def test_report_command_says_what_to_do(tmp_path, capsys, make, needle):
    assert main(["report", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert needle in err and "letterchunk run" in err
