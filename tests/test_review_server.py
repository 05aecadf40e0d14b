"""The review queue and the review page's server over HTTP, hostile requests included.

A small hand-made enriched folder (two chunks, their judgements and a repair report) is served
once per module on a free port; each test that writes decisions copies it first, so the tests
stay independent.  No browser here: tests/test_review_browser.py drives the page itself.
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import pytest

from letterchunk.cli import main
from letterchunk.enrich import judges
from letterchunk.review import queuecache
from letterchunk.review.queue import Queue, build_queue, quote_span
from letterchunk.review.queuecache import CACHE_FILE, cached_queue
from letterchunk.review.records import REVIEWS_FILE, read_reviews
from letterchunk.review.server import ReviewServer

LETTERS = Path(__file__).resolve().parents[1] / "corpus" / "letters"
EVIL = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
RULE_A = "Never   invest in a business\n     you cannot understand."  # spread over lines
RULE_B = "Price is what you pay; value is what you get."
RULE_C = "We bought more shares this year."
CONFESSION = "I was wrong to buy the textile mill."
CONTENT_1 = f"Our rules.\n\n     {RULE_A} {RULE_B}\n\n     {RULE_C}\n\n     {CONFESSION}"
CONTENT_2 = "A second chunk about insurance float and nothing else."


def _chunk(chunk_id: str, content: str, principles: list[str]) -> dict:
    return {
        "chunk_id": chunk_id,
        "content": content,
        "metadata": {
            "letter_year": 1977,
            "contextual_summary": "A summary of the chunk.",
            "buffett_concepts": ["float economics"],
            "principles": [{"statement": s, "category": "general"} for s in principles],
        },
    }


def write_folder(folder: Path, thresholds: dict | None = None) -> Path:
    """Two chunks: the first with four rule candidates (two kept as principles) and a
    confession paragraph; the second repaired in its latest run."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = [
        _chunk("1977-S1-T1-001", CONTENT_1, ["Invest only in what you understand.", RULE_B]),
        _chunk("1977-S2-T1-001", CONTENT_2, []),
    ]
    evidence = [
        {
            "chunk_id": "1977-S1-T1-001",
            "principle_evidence": [" ".join(RULE_A.split()), RULE_B],
            "judgements": {
                # distances from the thresholds in force (0.5, 0.7): 0.0, 0.29, 0.01, 0.2, 0.25
                "confession_paragraphs": [{"sentence": CONFESSION, "p_yes": 0.5}],
                "principle_p_yes": [0.99, 0.71],
                "rule_p_yes": [
                    {"sentence": " ".join(RULE_A.split()), "p_yes": 0.99},
                    {"sentence": RULE_B, "p_yes": 0.71},
                    {"sentence": RULE_C, "p_yes": 0.5},
                    {"sentence": "A sentence the chunk does not hold.", "p_yes": 0.45},
                ],
            },
        },
        {"chunk_id": "1977-S2-T1-001", "principle_evidence": []},
    ]
    report = [
        {"chunk_id": "1977-S2-T1-001", "attempt": 1, "outcome": "retry", "run_id": "r1"},
        {
            "chunk_id": "1977-S2-T1-001",
            "attempt": 2,
            "outcome": "repaired",
            "run_id": "r1",
            "violations": [{"code": "summary.length", "message": "too long"}],
        },
        {"chunk_id": "1977-S1-T1-001", "attempt": 1, "outcome": "valid", "run_id": "r1"},
    ]
    for name, rows in (
        ("1977.jsonl", chunks),
        ("1977.evidence.jsonl", evidence),
        ("1977.report.jsonl", report),
    ):
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (folder / name).write_text(text, encoding="utf-8")
    run = {"identity": {"model": "m", "prompts_sha256": "h"}}
    if thresholds is not None:
        run["thresholds"] = thresholds
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = write_folder(tmp_path_factory.mktemp("review") / "out")
    with ReviewServer(folder, reviewer="ana") as server:
        yield server


@pytest.fixture
def fresh(tmp_path):
    """A server of its own over a fresh copy of the folder (for tests that write).  The
    hand-made chunks are not schema-valid, so edits are not run through the validator here
    (tests/test_review_browser.py checks that refusal on a replayed letter)."""
    folder = write_folder(tmp_path / "out")
    with ReviewServer(folder, reviewer="ana", validate=None) as server:
        yield server


def call(server, method, path, body=None, *, token=True, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sent = {"Host": f"127.0.0.1:{server.port}"}
    if token:
        sent["X-Review-Token"] = server.token if token is True else token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    sent.update(headers or {})
    conn.request(method, path, body=data, headers=sent)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    kind = resp.getheader("Content-Type") or ""
    return resp.status, (json.loads(raw) if kind.startswith("application/json") else raw), resp


def items_by(server):
    status, data, _ = call(server, "GET", "/api/queue")
    assert status == 200
    return data


# ---------------------------------------------------------------------------- the queue


def test_the_queue_is_most_uncertain_first_by_the_threshold_in_force(tmp_path):
    q = build_queue(write_folder(tmp_path / "out"))
    judged = [(i.kind, i.p) for i in q.items if i.p is not None]
    # |p - threshold|: confession 0.5-0.5=0, rule 0.71-0.7, 0.5 (0.2), 0.45 (0.25), 0.99 (0.29)
    assert judged == [("confession", 0.5), ("rule", 0.71), ("rule", 0.5), ("rule", 0.45)] + [
        ("rule", 0.99)
    ]
    # then the repaired chunk, then the concepts of each chunk (no probability)
    rest = [(i.kind, i.target) for i in q.items if i.p is None]
    assert rest == [("chunk", "repaired"), ("concepts", None), ("concepts", None)]


def test_the_thresholds_of_run_json_reorder_the_queue(tmp_path):
    folder = write_folder(tmp_path / "out", {"confession_paragraph": 0.9, "rule_sentence": 0.5})
    q = build_queue(folder)
    assert (q.thresholds.confession, q.thresholds.rule) == (0.9, 0.5)
    first = q.items[0]
    assert (first.kind, first.p, first.uncertainty, first.model_value) == ("rule", 0.5, 0.0, True)


def test_without_thresholds_in_run_json_the_judges_constants_apply(tmp_path):
    q = build_queue(write_folder(tmp_path / "out"))
    assert q.thresholds.confession == judges.PARAGRAPH_THRESHOLD
    assert q.thresholds.rule == judges.PRINCIPLE_THRESHOLD


def test_every_judged_rule_candidate_is_an_item_not_only_the_principles(tmp_path):
    q = build_queue(write_folder(tmp_path / "out"))
    rules = {i.target for i in q.items if i.kind == "rule"}
    assert len(rules) == 4 and len(q.chunks[0].principles) == 2


def test_the_quote_offsets_point_at_the_sentence_in_the_chunk(tmp_path):
    q = build_queue(write_folder(tmp_path / "out"))
    for item in q.items:
        if item.kind in ("rule", "confession") and item.start is not None:
            assert item.end is not None
            found = q.chunks[item.chunk].content[item.start : item.end]
            assert found.split() == (item.quote or "").split()
    missing = [i for i in q.items if i.target == "A sentence the chunk does not hold."]
    assert (missing[0].start, missing[0].end) == (None, None)
    assert quote_span("a  b\n c", "b c") == (3, 7)


def _same_queue(got: Queue, built: Queue) -> None:
    assert (got.chunks, got.items, got.letters) == (built.chunks, built.items, built.letters)
    assert (got.vocabulary, got.thresholds, got.run) == (
        built.vocabulary,
        built.thresholds,
        built.run,
    )


def test_the_queue_kept_beside_the_folder_is_the_built_one_and_is_read_again(tmp_path, monkeypatch):
    folder = write_folder(tmp_path / "out")
    _same_queue(cached_queue(folder), build_queue(folder))
    assert (folder / CACHE_FILE).is_file()

    def not_again(*_args: object) -> Queue:
        raise AssertionError("the queue was built again although nothing changed")

    monkeypatch.setattr(queuecache, "queue_of", not_again)
    _same_queue(cached_queue(folder), build_queue(folder))


def _rewrite_keeping_size_and_time(path: Path, old: str, new: str) -> None:
    """Change ``path``'s text with its size and modification time as they were."""
    info = path.stat()
    text = path.read_text(encoding="utf-8")
    assert old in text and len(old) == len(new)
    path.write_text(text.replace(old, new), encoding="utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size


@pytest.mark.parametrize(
    "change",
    ["evidence in place", "chunk in place", "report in place", "run.json", "new letter", "gone"],
)
def test_the_kept_queue_is_never_stale(tmp_path, change):
    folder = write_folder(tmp_path / "out")
    before = cached_queue(folder)
    if change == "evidence in place":  # a probability: same size, same time
        _rewrite_keeping_size_and_time(
            folder / "1977.evidence.jsonl", '"p_yes": 0.71', '"p_yes": 0.81'
        )
    elif change == "chunk in place":
        _rewrite_keeping_size_and_time(folder / "1977.jsonl", "Our rules.", "Our rulez.")
    elif change == "report in place":
        _rewrite_keeping_size_and_time(folder / "1977.report.jsonl", '"repaired"', '"failed"  ')
    elif change == "run.json":
        write_folder(folder, {"confession_paragraph": 0.9, "rule_sentence": 0.5})
    elif change == "new letter":
        for suffix in (".jsonl", ".evidence.jsonl", ".report.jsonl"):
            text = (folder / f"1977{suffix}").read_text(encoding="utf-8")
            (folder / f"1978{suffix}").write_text(text.replace("1977-", "1978-"), encoding="utf-8")
    else:
        (folder / "1977.report.jsonl").unlink()
    built = build_queue(folder)
    assert (built.chunks, built.items, built.thresholds) != (
        before.chunks,
        before.items,
        before.thresholds,
    )
    _same_queue(cached_queue(folder), built)


@pytest.mark.parametrize("kept", ["not json", "[]", '{"key": "0"}', "foreign"])
def test_an_unusable_kept_queue_is_built_again(tmp_path, kept):
    folder = write_folder(tmp_path / "out")
    cached_queue(folder)
    if kept == "foreign":  # the right key, the rest not a queue
        key = json.loads((folder / CACHE_FILE).read_text(encoding="utf-8"))["key"]
        kept = json.dumps({"key": key, "chunks": [[1]], "items": [], "letters": []})
    (folder / CACHE_FILE).write_text(kept, encoding="utf-8")
    _same_queue(cached_queue(folder), build_queue(folder))
    _same_queue(cached_queue(folder), build_queue(folder))


def test_the_page_lists_the_validator_warnings_once_computed(served):
    status, data, _ = call(served, "GET", "/api/warnings")
    assert status == 200 and data["ready"] is True
    assert data["first"] == len(build_queue(served.folder).items)


# ---------------------------------------------------------------------------- hostile


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/decide", {"item": 0, "decision": "reject"}),
        ("/api/edit", {"chunk": 0, "field": "summary", "value": "x"}),
        ("/api/undo", {"id": "0" * 32}),
    ],
)
@pytest.mark.parametrize("token", [False, "wrong-token"])
def test_a_write_without_the_token_is_refused(fresh, path, body, token):
    status, data, _ = call(fresh, "POST", path, body, token=token)
    assert status == 403 and "token" in data["error"]
    assert not (fresh.folder / REVIEWS_FILE).exists()


def test_the_token_in_the_query_does_not_authorise_a_write(fresh):
    status, _, _ = call(fresh, "POST", f"/api/decide?t={fresh.token}", {"item": 0}, token=False)
    assert status == 403
    assert not (fresh.folder / REVIEWS_FILE).exists()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Host": "evil.example"},  # DNS rebinding: another name resolved to 127.0.0.1
        {"Host": "127.0.0.1:1"},
    ],
)
def test_a_cross_origin_or_rebound_write_is_refused(fresh, headers):
    status, _, _ = call(
        fresh, "POST", "/api/decide", {"item": 0, "decision": "reject"}, headers=headers
    )
    assert status == 403
    assert not (fresh.folder / REVIEWS_FILE).exists()


def test_a_form_post_is_refused(fresh):
    status, _, _ = call(
        fresh,
        "POST",
        "/api/decide",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status in (403, 415)
    assert not (fresh.folder / REVIEWS_FILE).exists()


@pytest.mark.parametrize(
    ("path", "token", "host", "expected"),
    [
        ("/", False, None, 403),
        ("/?t=wrong", False, None, 403),
        ("/api/queue", False, None, 403),
        ("/api/queue", True, "evil.example:80", 403),
        ("/?t={token}", False, None, 200),
        ("/api/queue", True, "localhost:{port}", 200),
    ],
)
def test_reading_needs_the_token_and_our_host(served, path, token, host, expected):
    headers = {"Host": host.format(port=served.port)} if host else {}
    status, _, resp = call(
        served, "GET", path.format(token=served.token), token=token, headers=headers
    )
    assert status == expected
    assert resp.getheader("X-Frame-Options") == "DENY"
    assert "connect-src 'self'" in resp.getheader("Content-Security-Policy")


def test_the_server_listens_on_loopback_only(served):
    assert served._httpd.server_address[0] == "127.0.0.1"
    assert served.url.startswith(f"http://127.0.0.1:{served.port}/?t=")


# ---------------------------------------------------------------------------- decisions


def test_a_decision_is_one_line_and_comes_back_on_reload(fresh):
    status, first, _ = call(fresh, "POST", "/api/decide", {"item": 0, "decision": "reject"})
    assert (status, first["status"]) == (200, "rejected")
    status, _, _ = call(fresh, "POST", "/api/decide", {"item": 1, "decision": "accept"})
    [r0, r1] = read_reviews(fresh.folder)
    assert (r0.field, r0.decision, r0.value, r0.model_value) == (
        "confession",
        "reject",
        False,
        True,
    )
    assert (r0.model_p, r0.threshold, r0.reviewer) == (0.5, 0.5, "ana")
    assert r0.run == {"model": "m", "prompts_sha256": "h"}
    assert (r1.field, r1.decision, r1.value) == ("rule", "accept", True)
    data = items_by(fresh)
    assert data["status"]["0"][:2] == ["rejected", "ana"]
    assert data["status"]["1"][:2] == ["accepted", "ana"]


def test_undo_falls_back_to_the_previous_decision(fresh):
    ids = []
    for decision in ("accept", "reject"):
        _, r, _ = call(fresh, "POST", "/api/decide", {"item": 2, "decision": decision})
        ids.append(r["id"])
    _, undone, _ = call(fresh, "POST", "/api/undo", {"id": ids[1]})
    assert undone["status"] == "accepted"
    _, undone, _ = call(fresh, "POST", "/api/undo", {"id": ids[0]})
    assert undone["status"] == "open"
    assert "2" not in items_by(fresh)["status"]
    status, _, _ = call(fresh, "POST", "/api/undo", {"id": "f" * 32})
    assert status == 404


def test_edits_are_stored_and_shown_and_concepts_come_from_the_vocabulary(fresh):
    body = {"chunk": 0, "field": "summary", "value": "A better summary."}
    assert call(fresh, "POST", "/api/edit", body)[0] == 200
    body = {"chunk": 0, "field": "concepts", "value": ["float economics", "moat"]}
    status, data, _ = call(fresh, "POST", "/api/edit", body)
    assert status == 422 and "moat" in data["error"]
    vocabulary = items_by(fresh)["vocabulary"]
    body["value"] = vocabulary[:2]
    assert call(fresh, "POST", "/api/edit", body)[0] == 200
    body = {"chunk": 0, "field": "principle_statement", "principle": 1, "value": "Pay less."}
    assert call(fresh, "POST", "/api/edit", body)[0] == 200
    records = read_reviews(fresh.folder)
    assert [r.field for r in records] == ["summary", "concepts", "principle_statement"]
    assert records[2].target == RULE_B and records[2].model_value == RULE_B
    chunk = items_by(fresh)["chunks"][0]
    assert chunk[3] == "A better summary." and chunk[4] == vocabulary[:2]
    assert chunk[5][1] == ["Pay less.", RULE_B]


@pytest.mark.parametrize(
    "body",
    [
        {"item": 999, "decision": "accept"},
        {"item": "0", "decision": "accept"},
        {"item": 0, "decision": "maybe"},
        {"item": 0, "decision": "accept", "reviewer": ""},
        {"chunk": 0, "field": "summary", "value": "  "},
        {"chunk": 0, "field": "principle_statement", "principle": 7, "value": "x"},
    ],
)
def test_a_malformed_write_is_refused_and_nothing_written(fresh, body):
    path = "/api/decide" if "item" in body else "/api/edit"
    status, data, _ = call(fresh, "POST", path, body)
    assert status == 400 and data["error"]
    assert not (fresh.folder / REVIEWS_FILE).exists()


def test_a_reviewer_name_with_html_is_kept_as_text(fresh):
    body = {"item": 0, "decision": "accept", "reviewer": EVIL}
    status, data, _ = call(fresh, "POST", "/api/decide", body)
    assert status == 200 and data["reviewer"] == EVIL
    assert read_reviews(fresh.folder)[0].reviewer == EVIL


def test_two_review_servers_on_one_folder_keep_both_decisions(fresh):
    with ReviewServer(fresh.folder, reviewer="ben") as second:
        call(fresh, "POST", "/api/decide", {"item": 0, "decision": "reject"})
        call(second, "POST", "/api/decide", {"item": 1, "decision": "accept"})
        for server in (fresh, second):
            seen = items_by(server)["status"]
            assert (seen["0"][:2], seen["1"][:2]) == (["rejected", "ana"], ["accepted", "ben"])
    assert len(read_reviews(fresh.folder)) == 2


# ---------------------------------------------------------------------------- the command


def test_the_command_prints_the_url_and_stops_on_ctrl_c(tmp_path, monkeypatch, capsys):
    folder = write_folder(tmp_path / "out")

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ReviewServer, "serve_forever", interrupted)
    opened = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    assert main(["review", str(folder), "--no-browser", "--reviewer", "ana"]) == 0
    url = capsys.readouterr().out.strip()
    assert url.startswith("http://127.0.0.1:") and "?t=" in url and opened == []
    assert main(["review", str(folder)]) == 0
    assert opened == [capsys.readouterr().out.strip()]


def test_the_command_says_what_to_do_when_the_port_is_taken(tmp_path, served, capsys):
    folder = write_folder(tmp_path / "out")
    assert main(["review", str(folder), "--port", str(served.port), "--no-browser"]) == 2
    assert "--port" in capsys.readouterr().err


def test_the_command_refuses_a_folder_without_chunks(tmp_path, capsys):
    assert main(["review", str(tmp_path), "--no-browser"]) == 2
    assert "letterchunk run" in capsys.readouterr().err


def test_reading_writes_nothing_into_the_folder_but_the_saved_queue(served):
    from letterchunk.review.queuecache import CACHE_FILE

    before = {p.name for p in served.folder.iterdir()} - {CACHE_FILE}
    items_by(served)
    call(served, "GET", "/api/warnings")
    assert {p.name for p in served.folder.iterdir()} - {CACHE_FILE} == before


def test_the_label_studio_flags_convert_and_exit_without_serving(tmp_path, monkeypatch, capsys):
    # Label Studio's conversion reads canonical chunks: the 1977 letter segmented (no model),
    # with the judgements of two sentences of its first chunk
    folder = tmp_path / "out"
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(folder), "-q"]) == 0
    first = json.loads((folder / "1977.jsonl").read_text(encoding="utf-8").splitlines()[0])
    sentences = [s.strip() + "." for s in first["content"].split(".")[1:3]]
    judged = [{"sentence": " ".join(s.split()), "p_yes": 0.6} for s in sentences]
    evidence = {"chunk_id": first["chunk_id"], "judgements": {"rule_p_yes": judged}}
    (folder / "1977.evidence.jsonl").write_text(json.dumps(evidence) + "\n", encoding="utf-8")
    monkeypatch.setattr(ReviewServer, "serve_forever", lambda self: pytest.fail("served"))
    tasks = tmp_path / "tasks.json"
    assert main(["review", str(folder), "--export-label-studio", str(tasks)]) == 0
    assert len(json.loads(tasks.read_text(encoding="utf-8"))) == 2
    assert "wrote 2 Label Studio tasks" in capsys.readouterr().err
    # the same tasks without annotations: nothing to import, nothing written
    assert main(["review", str(folder), "--import-label-studio", str(tasks)]) == 0
    assert "appended 0 decisions" in capsys.readouterr().err
    assert not (folder / REVIEWS_FILE).exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert main(["review", str(folder), "--import-label-studio", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
