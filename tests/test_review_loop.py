"""The analysts' loop on a real run: 1977 replayed once from its cassette (filling an answer
cache), reviews written, then rerun from the cache: the corrections are in the chunk file, the
evidence and the repair report mark them ``by: review``, the file validates; a re-segmentation
re-anchors reviews by their quote or lists them stale; thresholds written by calibrate are used
by the next run and recorded in run.json."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.cli import main
from letterchunk.contract.predicates import normalise_ws
from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError
from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.replay import REPLAY_ENV, recorder
from letterchunk.repair.job import repair_file
from letterchunk.review.anchor import anchor_reviews
from letterchunk.review.apply import apply_reviews, folder_reviews, validate_review
from letterchunk.review.folder import read_letter, read_run, run_identity_of
from letterchunk.review.labelstudio import export_label_studio, import_label_studio
from letterchunk.review.records import (
    REVIEWS_FILE,
    append_review,
    new_record,
    read_reviews,
    text_sha256,
)
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter
from letterchunk.text.sentences import sentences

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"

pytestmark = pytest.mark.replay


def _run_args(out: Path, cache: Path, mode: str) -> list[str]:
    return [
        "run",
        str(LETTER),
        "--out",
        str(out),
        "--model",
        MODEL_ID,
        "--mode",
        "JSON_SCHEMA",
        "--retries",
        "0",
        "--cache-dir",
        str(cache),
        "--cache",
        mode,
        "--on-failure",
        "skip",
        "--quiet",
    ]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """``(folder, cache)``: 1977 run once from its cassette, its answers in the cache."""
    base = tmp_path_factory.mktemp("loop")
    out, cache = base / "out", base / "cache"
    saved = {k: os.environ.get(k) for k in REPLAY_ENV}
    os.environ.update(REPLAY_ENV)
    try:
        with recorder("none").use_cassette(
            str(ROOT / "cassettes" / "1977.yaml"), allow_playback_repeats=False
        ):
            assert main(_run_args(out, cache, "use")) == 0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out, cache


@pytest.fixture
def folder(replayed, tmp_path, monkeypatch):
    """A copy of the replayed folder, and a rerun of it from the answer cache (no request)."""
    out = tmp_path / "out"
    shutil.copytree(replayed[0], out)
    for k, v in REPLAY_ENV.items():
        monkeypatch.setenv(k, v)

    def rerun() -> int:
        return main(_run_args(out, replayed[1], "offline"))

    return out, rerun


def _chunks(out: Path) -> dict[str, Chunk]:
    lines = (out / "1977.jsonl").read_text(encoding="utf-8").splitlines()
    return {c.chunk_id: c for c in (Chunk.model_validate_json(x) for x in lines)}


def _evidence(out: Path) -> dict[str, dict]:
    lines = (out / "1977.evidence.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["chunk_id"]: r for r in map(json.loads, lines)}


def _first_sentence(out: Path, chunk_id: str) -> str:
    return sentences(_chunks(out)[chunk_id].content)[0]


def review(out: Path, chunk_id: str, field: str, value, *, target=None, **more):
    chunk = _chunks(out)[chunk_id]
    record = new_record(
        chunk_id=chunk_id,
        letter="1977",
        text_sha256=text_sha256(chunk.content),
        quote=more.pop("quote", target),
        field=field,
        target=target,
        model_value=more.pop("model_value", None),
        model_p=more.pop("model_p", None),
        threshold=more.pop("threshold", None),
        decision=more.pop("decision", "edit" if not isinstance(value, bool) else "accept"),
        value=value,
        reviewer=more.pop("reviewer", "ann"),
        run=run_identity_of(read_run(out)),
        **more,
    )
    assert validate_review(out, record) is None
    append_review(out, record)
    return record


def test_a_rerun_from_the_cache_carries_the_corrections_and_validates(folder, capsys):
    out, rerun = folder
    ev = _evidence(out)
    s2 = ev["1977-S2-T1-001"]["judgements"]["confession_paragraphs"][0]["sentence"]
    s4 = ev["1977-S4-T1-001"]["judgements"]["confession_paragraphs"][0]["sentence"]
    dropped = ev["1977-S1-T1-001"]["principle_evidence"][0]
    added = next(
        r["sentence"]
        for r in ev["1977-S6-T1-001"]["judgements"]["rule_p_yes"]
        if r["sentence"] not in ev["1977-S6-T1-001"]["principle_evidence"]
        and r["sentence"].startswith("Both Wesco")
    )
    review(out, "1977-S2-T1-001", "confession", False, target=s2, decision="reject")
    review(out, "1977-S4-T1-001", "confession", True, target=s4)
    review(out, "1977-S1-T1-001", "rule", False, target=dropped, decision="reject")
    review(out, "1977-S6-T1-001", "rule", True, target=added)
    review(out, "1977-S1-T1-001", "concepts", ["float economics"])
    summary = "<b>An analyst:</b> " + _first_sentence(out, "1977-S5-T1-001")
    review(out, "1977-S5-T1-001", "summary", summary)
    assert rerun() == 0
    chunks, ev = _chunks(out), _evidence(out)
    assert chunks["1977-S2-T1-001"].metadata.content_type == "narrative"
    assert chunks["1977-S4-T1-001"].metadata.content_type == "mistake_confession"
    assert ev["1977-S4-T1-001"]["content_type_evidence"] == [s4]
    assert dropped not in ev["1977-S1-T1-001"]["principle_evidence"]
    assert ev["1977-S6-T1-001"]["principle_evidence"][0] == added
    assert chunks["1977-S1-T1-001"].metadata.buffett_concepts == ["float economics"]
    assert chunks["1977-S5-T1-001"].metadata.contextual_summary == summary
    marks = [m for r in ev.values() for m in r.get("reviews", [])]
    assert len(marks) == 6 and {m["by"] for m in marks} == {"review"}
    report = [json.loads(x) for x in (out / "1977.report.jsonl").read_text().splitlines()]
    by_review = [c for r in report if r["kind"] == "review" for c in r["changes"]]
    assert {c["by"] for c in by_review} == {"review"} and len(by_review) == 6
    assert {c["reviewer"] for c in by_review} == {"ann"}
    assert main(["validate", str(out), "--stage", "enriched", "--errors-only"]) == 0
    capsys.readouterr()


def test_a_correction_that_breaks_the_schema_is_refused_when_saved(folder):
    out, _ = folder
    chunk = _chunks(out)["1977-S1-T1-001"]
    wrong = new_record(
        chunk_id=chunk.chunk_id,
        letter="1977",
        text_sha256=text_sha256(chunk.content),
        field="concepts",
        decision="edit",
        value=["not a concept of the vocabulary"],
        reviewer="ann",
    )
    message = validate_review(out, wrong)
    assert message is not None and "concept" in message
    unknown = new_record(
        chunk_id="1977-S99-T1-001",
        letter="1977",
        text_sha256="0" * 64,
        field="summary",
        decision="edit",
        value="x",
        reviewer="ann",
    )
    assert "not in this folder" in (validate_review(out, unknown) or "")


def test_a_review_of_a_chunk_not_in_the_folder_is_listed_not_applied(folder, capsys):
    out, rerun = folder
    before = (out / "1977.jsonl").read_bytes()
    ghost = new_record(
        chunk_id="1977-S99-T1-001",
        letter="1977",
        text_sha256="0" * 64,
        quote="A sentence no letter holds.",
        field="rule",
        target="A sentence no letter holds.",
        decision="accept",
        value=True,
        reviewer="bob",
    )
    other_letter = new_record(
        chunk_id="1980-S1-T1-001",
        letter="1980",
        text_sha256="0" * 64,
        field="summary",
        decision="edit",
        value="x",
        reviewer="bob",
    )
    append_review(out, ghost)
    append_review(out, other_letter)
    assert rerun() == 0
    assert (out / "1977.jsonl").read_bytes() == before
    found = folder_reviews(out)
    reasons = {s.record.id: s.reason for s in found.unapplied}
    assert "not in this folder" in reasons[ghost.id] and "no chunk" in reasons[ghost.id]
    assert "letter 1980 is not in this folder" in reasons[other_letter.id]
    capsys.readouterr()


def test_a_corrupt_reviews_line_stops_the_run_naming_it_and_nothing_is_lost(folder, capsys):
    out, rerun = folder
    review(out, "1977-S5-T1-001", "summary", _first_sentence(out, "1977-S5-T1-001"))
    path = out / REVIEWS_FILE
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"broken": \n')
    review_bytes, chunk_bytes = path.read_bytes(), (out / "1977.jsonl").read_bytes()
    assert rerun() == 2
    err = capsys.readouterr().err
    assert f"{REVIEWS_FILE}:2:" in err and "fix or delete that line" in err
    assert path.read_bytes() == review_bytes and (out / "1977.jsonl").read_bytes() == chunk_bytes


def test_calibrated_thresholds_are_used_by_the_next_run_and_recorded(
    folder, tmp_path, capsys, monkeypatch
):
    out, rerun = folder
    identity = run_identity_of(read_run(out))
    settings = tmp_path / "config" / "letterchunk" / "thresholds.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps({"thresholds": [{**identity, "confession_paragraph": 0.95}]}), encoding="utf-8"
    )
    assert rerun() == 0
    recorded = read_run(out)["thresholds"]
    assert recorded["confession_paragraph"] == 0.95 and recorded["rule_sentence"] == 0.7
    assert recorded["source"]["confession_paragraph"] == str(settings)
    chunks = _chunks(out)  # no paragraph of 1977 reaches 0.95: no confession is left
    assert all(c.metadata.content_type != "mistake_confession" for c in chunks.values())
    capsys.readouterr()


# -- re-anchoring -----------------------------------------------------------------------------


def test_reviews_are_reanchored_by_their_quote_when_ids_shift(replayed):
    out, _ = replayed
    letter = read_letter(out, "1977")
    ev = letter.evidence
    quote = ev["1977-S4-T1-001"]["principle_evidence"][0]
    chunk = next(c for c in letter.chunks if c.chunk_id == "1977-S4-T1-001")
    r = new_record(
        chunk_id="1977-S4-T1-001",
        letter="1977",
        text_sha256=text_sha256(chunk.content),
        quote=quote,
        field="rule",
        target=quote,
        decision="reject",
        value=False,
        reviewer="ann",
    )
    # the same letter with one more section before: every later id moves by one
    shifted = [
        c.model_copy(update={"chunk_id": c.chunk_id.replace("-S4-", "-S5-")})
        if "-S4-" in c.chunk_id
        else c
        for c in letter.chunks
    ]
    edited = [
        c.model_copy(update={"content": c.content + " An added sentence."})
        if "-S5-T1" in c.chunk_id
        else c
        for c in shifted
    ]
    done = apply_reviews("1977", edited, ev_by_new_id(ev, "-S4-", "-S5-"), [r])
    assert [(a.placed.chunk_id, a.placed.how) for a in done.applied] == [
        ("1977-S5-T1-001", "re-anchored")
    ]
    assert not done.unapplied


def ev_by_new_id(ev: dict, old: str, new: str) -> dict:
    return {k.replace(old, new): {**v, "chunk_id": k.replace(old, new)} for k, v in ev.items()}


def test_reviews_read_back_from_the_folder_after_a_rerun(folder):
    out, rerun = folder
    summary = _first_sentence(out, "1977-S5-T1-001")
    review(out, "1977-S5-T1-001", "summary", summary)
    assert rerun() == 0
    assert [r.field for r in read_reviews(out)] == ["summary"]
    assert _chunks(out)["1977-S5-T1-001"].metadata.contextual_summary == summary


# -- Label Studio ----------------------------------------------------------------------------


def test_label_studio_tasks_carry_predictions_and_annotations_come_back_as_reviews(folder):
    out, _ = folder
    tasks_file = out.parent / "tasks.json"
    n = export_label_studio(out, tasks_file)
    tasks = json.loads(tasks_file.read_text(encoding="utf-8"))
    assert n == len(tasks) > 10
    first = tasks[0]
    [prediction] = first["predictions"]
    [choice] = prediction["result"]
    p, t = first["data"]["model_p"], first["data"]["threshold"]
    assert choice["value"]["choices"] == ["Yes" if p >= t else "No"]
    assert prediction["score"] == round(p if p >= t else 1 - p, 4)
    assert {first["data"]["field"]} <= {"confession", "rule"}

    def annotated(task, label, **more):
        result = [{"from_name": "decision", "to_name": "text", "type": "choices",
                   "value": {"choices": [label]}}]  # fmt: skip
        return {**task, "id": more.pop("tid"), "annotations": [{"id": 7, "result": result, **more}]}

    export = [
        annotated(tasks[0], "No", tid=1, completed_by={"email": "<script>a@b</script>"}),
        annotated(tasks[1], "Yes", tid=2, created_at="2026-11-29T01:00:00Z"),
        annotated(tasks[2], "Yes", tid=3, was_cancelled=True),
        {**tasks[3], "id": 4},  # not annotated
    ]
    source = out.parent / "export.json"
    source.write_text(json.dumps(export), encoding="utf-8")
    assert import_label_studio(out, source, None) == 2
    assert import_label_studio(out, source, None) == 0  # the same export twice adds nothing
    got = read_reviews(out)
    assert [(r.value, r.decision) for r in got] == [(False, "reject"), (True, "accept")]
    assert got[0].reviewer == "<script>a@b</script>" and got[1].reviewer == "label-studio"
    assert got[0].model_p == tasks[0]["data"]["model_p"] and got[1].time == "2026-11-29T01:00:00Z"
    source.write_text(json.dumps([{"data": {"field": "colour"}, "annotations": [
        {"result": [{"from_name": "decision", "value": {"choices": ["Yes"]}}]}]}]))  # fmt: skip
    with pytest.raises(InputError, match=r"export\.json: task 1: field 'colour'"):
        import_label_studio(out, source, "ann")
    assert len(read_reviews(out)) == 2


# -- report, validate, analyze, diff ---------------------------------------------------------


def _page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    start = text.index('<script id="report-data" type="application/json">') + len(
        '<script id="report-data" type="application/json">'
    )
    return json.loads(text[start : text.index("</script>", start)])


def test_report_validate_analyze_and_diff_show_the_reviews(folder, capsys):
    out, rerun = folder
    before = out.parent / "before"
    shutil.copytree(out, before)
    ev = _evidence(out)
    s4 = ev["1977-S4-T1-001"]["judgements"]["confession_paragraphs"][0]["sentence"]
    hostile = "<script>alert('x')</script> & Ann"
    review(out, "1977-S4-T1-001", "confession", True, target=s4, reviewer=hostile,
           model_value=False, model_p=0.3892)  # fmt: skip
    ghost = new_record(chunk_id="1977-S99-T1-001", letter="1977", text_sha256="0" * 64,
                       field="summary", decision="edit", value="x", reviewer="bob")  # fmt: skip
    append_review(out, ghost)
    assert rerun() == 0
    capsys.readouterr()

    assert main(["report", str(out)]) == 0
    err = capsys.readouterr().err
    assert "stale review 1977 1977-S99-T1-001 summary (bob" in err
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page  # the reviewer's name is data, never markup
    data = _page_data(out / "report.html")
    assert data["reviews"]["applied"] == 1 and data["reviews"]["in_force"] == 2
    assert [u["kind"] for u in data["reviews"]["unapplied"]] == ["stale"]
    card = next(c for c in data["chunks"] if c["chunk_id"] == "1977-S4-T1-001")
    assert card["reviewed"][0]["reviewer"] == hostile and card["content_type"] == (
        "mistake_confession"
    )
    assert card["judged"]["confession"][0] == {"sentence": s4, "p": 0.3892, "threshold": 0.5}
    assert any(r["kept"] for r in card["judged"]["rules"])

    assert main(["validate", str(out), "--stage", "enriched", "--errors-only"]) == 0
    text = capsys.readouterr().out
    assert "stale review 1977 1977-S99-T1-001 summary: chunk 1977-S99-T1-001 is not" in text
    assert "2 decision(s) in force, 1 applied, 1 not applied" in text

    assert main(["analyze", str(out), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["reviews"]
    assert counts == {
        "confession": {"reviewed": 1, "accepted": 0, "rejected": 1},
        "summary": {"reviewed": 1, "accepted": 0, "rejected": 1},
    }

    assert main(["diff", str(before), str(out), "--json"]) == 1
    split = json.loads(capsys.readouterr().out)["changed_by"]
    assert {"letter": "1977", "chunk_id": "1977-S4-T1-001", "field": "content_type"} in split[
        "by_review"
    ]
    assert main(["diff", str(before), str(out)]) == 1
    assert "changed by review: " in capsys.readouterr().out


# -- re-anchoring over generated edits of the letter -----------------------------------------


@st.composite
def _edits(draw):
    """An edit of the letter's text: a new section or paragraph inserted, or a paragraph
    deleted, at a paragraph break."""
    kind = draw(st.sampled_from(["section", "paragraph", "delete"]))
    where = draw(st.integers(0, 10_000))
    words = draw(st.lists(st.sampled_from(["float", "moat", "Omaha", "textile", "gain"]),
                          min_size=8, max_size=40))  # fmt: skip
    return kind, where, " ".join(words)


def _apply_edit(text: str, edit) -> str:
    kind, where, words = edit
    breaks = [i for i in range(len(text)) if text.startswith("\n\n", i)]
    at = breaks[where % len(breaks)]
    if kind == "section":
        return text[:at] + "\n\nA NEW HEADING\n\n" + words.capitalize() + "." + text[at:]
    if kind == "paragraph":
        return text[:at] + "\n\n" + words.capitalize() + "." + text[at:]
    end = text.find("\n\n", at + 2)
    return text[:at] + (text[end:] if end > 0 else "")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit=_edits())
def test_reviews_after_a_resegmentation_land_on_their_quote_or_are_stale(
    replayed, tmp_path_factory, edit
):
    out, _ = replayed
    letter = read_letter(out, "1977")
    reviews = []
    for c in letter.chunks:  # one rule decision per chunk, on its first judged sentence
        judged = letter.evidence.get(c.chunk_id, {}).get("judgements", {}).get("rule_p_yes", [])
        if judged:
            s = judged[0]["sentence"]
            reviews.append(new_record(chunk_id=c.chunk_id, letter="1977",
                text_sha256=text_sha256(c.content), quote=s, field="rule", target=s,
                decision="reject", value=False, reviewer="ann"))  # fmt: skip
    path = tmp_path_factory.mktemp("edit") / "1977.txt"
    path.write_text(_apply_edit(LETTER.read_text(encoding="utf-8"), edit), encoding="utf-8")
    chunks = segment_letter(load_letter(path))
    placed, stale = anchor_reviews(reviews, "1977", chunks)
    by_id = {c.chunk_id: c for c in chunks}
    assert len(placed) + len(stale) == len(reviews)  # never dropped silently
    for p in placed:  # never applied to different text
        assert normalise_ws(p.record.quote) in normalise_ws(by_id[p.chunk_id].content)
    for s in stale:
        hits = [c for c in chunks if "-T1-" in c.chunk_id
                and normalise_ws(s.record.quote) in normalise_ws(c.content)]  # fmt: skip
        assert len(hits) != 1, s.reason  # a unique quote is always found again


def test_a_broken_thresholds_file_stops_the_run_before_any_work(
    folder, tmp_path, capsys, monkeypatch
):
    out, rerun = folder
    bad = tmp_path / "thresholds.json"
    bad.write_text('{"thresholds": [{"model": "m", "rule_sentence": 7}]}', encoding="utf-8")
    monkeypatch.setenv("LETTERCHUNK_THRESHOLDS", str(bad))
    before = (out / "1977.jsonl").read_bytes()
    assert rerun() == 2
    assert "rule_sentence 7 of model 'm' is not a threshold" in capsys.readouterr().err
    assert (out / "1977.jsonl").read_bytes() == before


def test_repair_applies_the_reviews_beside_the_file(folder):
    out, _ = folder
    summary = _first_sentence(out, "1977-S6-T1-001")
    review(out, "1977-S6-T1-001", "summary", summary)
    assert repair_file(out / "1977.jsonl").valid  # mechanical only: no client
    assert _chunks(out)["1977-S6-T1-001"].metadata.contextual_summary == summary
    [mark] = _evidence(out)["1977-S6-T1-001"]["reviews"]
    assert mark["by"] == "review" and mark["field"] == "summary"
    report = [json.loads(x) for x in (out / "1977.report.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in report if r["chunk_id"] == "1977-S6-T1-001"][-1] == "review"
