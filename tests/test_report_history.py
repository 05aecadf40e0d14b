"""`letterchunk report DIR --compare RUN ...`: each chunk's fields across runs (as-of view) on the
report page, and the diff page beside it; hostile text stays text on both."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from letterchunk.cli import main
from letterchunk.contract.files import load_chunks
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.layout import RUN_FILE
from test_report_browser import EVIL, chromium, dump_dom

ROOT = Path(__file__).resolve().parents[1]
OLD_RUN = ROOT / "tests" / "data" / "runs" / "1977-b827e20"
S1, S2 = "1977-S1-T1-001", "1977-S2-T1-001"


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    payload = text.split('<script id="report-data" type="application/json">', 1)[1]
    return json.loads(payload.split("</script>", 1)[0])


def rerun(folder: Path, started: str, summary: str | None = None) -> Path:
    """A copy of the old run, started at ``started``, with S2's summary replaced."""
    shutil.copytree(OLD_RUN, folder)
    path = folder / "1977.jsonl"
    chunks = [c.model_dump(mode="json") for c in load_chunks(path)]
    for c in chunks:
        if c["chunk_id"] == S2 and summary is not None:
            c["metadata"]["contextual_summary"] = summary
    path.write_text(
        "".join(dump_chunk(Chunk.model_validate(c)) + "\n" for c in chunks), encoding="utf-8"
    )
    ledger = json.loads((folder / RUN_FILE).read_text())
    ledger["identity"] = {"started_at": started, "model": "m-" + started[:4]}
    (folder / RUN_FILE).write_text(json.dumps(ledger))
    return folder


def test_compare_writes_the_as_of_view_and_the_diff_page(tmp_path, capsys):
    seg = tmp_path / "seg"
    assert main(["segment", str(ROOT / "corpus" / "letters" / "1977.txt"), "--out", str(seg)]) == 0
    late = rerun(tmp_path / "late", "2026-11-26T10:00:00Z", "Textile had a dismal year.")
    early = rerun(tmp_path / "early", "2026-01-01T00:00:00Z")
    capsys.readouterr()
    assert main(["report", str(late), "--compare", str(early), str(seg)]) == 0
    page, diff = (Path(p) for p in capsys.readouterr().out.split())
    assert (page, diff) == (late / "report.html", late / "report.diff.html")
    data = page_data(page)
    # oldest first: the segment-only folder has no time, then by the time run.json records
    assert [(Path(r["folder"]).name, r["current"]) for r in data["runs"]] == [
        ("seg", False),
        ("early", False),
        ("late", True),
    ]
    assert data["diff_page"] == "./report.diff.html"
    asof = {c["chunk_id"]: c["asof"] for c in data["chunks"]}
    rows = {r["field"]: r["values"] for r in asof[S2]["rows"]}
    old_summary = rows["contextual_summary"][1]
    assert rows["contextual_summary"] == ["", old_summary, "Textile had a dismal year."]
    assert asof[S2]["present"] == [True, True, True]
    assert "chars" not in rows  # the same span in every run
    # the diff page: seg -> early (enrichment), early -> late (one summary rewritten)
    text = diff.read_text(encoding="utf-8")
    pairs = re.findall(r"<section class='pair' data-identical='(\w+)'>", text)
    assert pairs == ["no", "no"]
    last = text.split("<section class='pair'")[-1]
    assert re.findall(r"data-chunk='([^']+)' data-status='(\w+)'", last) == [(S2, "changed")]
    assert "data-changed='1'" in last and "data-unchanged='6'" in last
    assert f"<td>{html.escape('m-2026')}</td>" in last


def test_a_chunk_missing_from_a_run_is_shown_absent(tmp_path, capsys):
    new = rerun(tmp_path / "new", "2026-11-26T10:00:00Z")
    old = tmp_path / "old"
    shutil.copytree(OLD_RUN, old)
    path = old / "1977.jsonl"
    path.write_text(
        "".join(line + "\n" for line in path.read_text().splitlines() if S1 not in line[:40])
    )
    assert main(["report", str(new), "--compare", str(old)]) == 0
    asof = {c["chunk_id"]: c["asof"] for c in page_data(new / "report.html")["chunks"]}
    assert asof[S1]["present"] == [False, True]
    assert asof[S1]["rows"] == [] and asof[S1]["same"] > 20
    diff = (new / "report.diff.html").read_text()
    assert f"data-chunk='{S1}' data-status='added'" in diff


def test_unusable_compare_folder_exits_2_and_writes_nothing(tmp_path, capsys):
    new = rerun(tmp_path / "new", "2026-11-26T10:00:00Z")
    assert main(["report", str(new), "--compare", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "missing") in err and "no such folder" in err
    assert not (new / "report.html").exists() and not (new / "report.diff.html").exists()


def test_hostile_text_stays_text_on_both_pages(tmp_path, capsys):
    new = rerun(tmp_path / "new", "2026-11-26T10:00:00Z", EVIL)
    hostile_name = tmp_path / "o'ld<b>"
    shutil.copytree(OLD_RUN, hostile_name)
    assert main(["report", str(new), "--compare", str(hostile_name)]) == 0
    page = (new / "report.html").read_text()
    diff = (new / "report.diff.html").read_text()
    for text in (page, diff):
        assert "<img" not in text and "<b>bold" not in text and "o'ld<b>" not in text
    # the new summary is all there once the deleted words and the page's own tags are gone
    # (no tag came from the text)
    after = re.sub(r"<[^>]+>", "", re.sub(r"<del>.*?</del>", "", diff))
    assert EVIL in html.unescape(after)
    assert any(
        r["values"][-1] == EVIL
        for c in page_data(new / "report.html")["chunks"]
        for r in c["asof"]["rows"]
        if r["field"] == "contextual_summary"
    )


def test_the_as_of_view_renders_in_a_browser(tmp_path):
    chromium()  # skips without a browser (fails in CI)
    new = rerun(tmp_path / "new", "2026-11-26T10:00:00Z", EVIL)
    old = rerun(tmp_path / "old", "2026-01-01T00:00:00Z")
    assert main(["report", str(new), "--compare", str(old), "-q"]) == 0
    dom = dump_dom(new / "report.html", "", tmp_path / "profile")
    assert 'data-ready="yes"' in dom and "pwned" not in dom.split("<title>")[1][:40]
    box = dom.split('id="runs-box"', 1)[1].split("</div>", 1)[0]
    assert 'href="./report.diff.html"' in box
    assert re.findall(r'<tr data-run="(\d)" class="(\w*)">', box) == [("1", ""), ("2", "current")]
    card = dom.split(f'id="chunk-{S2}"', 1)[1].split("</section>", 1)[0]
    table = card.split('<details class="asof" open="">', 1)[1].split("</details>", 1)[0]
    row = table.split('<tr data-field="contextual_summary">', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[0] == "contextual_summary" and cells[2] == html.escape(EVIL, quote=False)
    assert "<img" not in card
    dom = dump_dom(new / "report.diff.html", "", tmp_path / "profile")
    assert "<img" not in dom and "pwned" not in dom.split("<title>")[1][:60]
