"""reviews.jsonl: one decision a line, appended whole, read back strictly, folded into the
decisions in force."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from letterchunk.review.records import (
    REVIEWS_FILE,
    ReviewFileError,
    append_review,
    effective_reviews,
    new_record,
    read_reviews,
    text_sha256,
)


def _record(**over):
    fields = dict(
        chunk_id="1977-003",
        letter="1977",
        text_sha256=text_sha256("Some text."),
        quote="We were wrong.",
        field="confession",
        target="We were wrong.",
        model_value=False,
        model_p=0.31,
        threshold=0.5,
        decision="accept",
        value=True,
        reviewer="ann",
        run={"model": "m", "prompts_sha256": "p"},
    )
    fields.update(over)
    return new_record(**fields)


def test_a_record_round_trips_as_one_line(tmp_path):
    r = _record(quote="line\nbreak \u2028 <script>", reviewer="</script>")
    assert "\n" not in r.to_json()
    append_review(tmp_path, r)
    assert read_reviews(tmp_path) == [r]
    assert len(r.id) == 32 and r.time.endswith("Z")


def test_no_file_reads_as_no_reviews(tmp_path):
    assert read_reviews(tmp_path) == []


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"field": "colour"}, "field"),
        ({"decision": "maybe"}, "decision"),
        ({"model_p": 1.5}, "probability"),
        ({"decision": "undo", "undoes": None}, "undoes"),
        ({"value": "yes"}, "true or false"),
        ({"reviewer": ""}, "reviewer"),
    ],
)
def test_a_wrong_field_is_refused_when_made(over, message):
    with pytest.raises(ValueError, match=message):
        _record(**over)


def test_a_corrupt_line_names_the_file_and_line_and_nothing_is_lost(tmp_path):
    append_review(tmp_path, _record())
    path = tmp_path / REVIEWS_FILE
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    append_review(tmp_path, _record())
    before = path.read_bytes()
    with pytest.raises(ReviewFileError, match=rf"{REVIEWS_FILE}:2: not JSON") as err:
        read_reviews(tmp_path)
    assert err.value.line == 2 and "fix or delete that line" in str(err.value)
    assert path.read_bytes() == before


def test_a_line_that_is_not_a_record_is_named(tmp_path):
    (tmp_path / REVIEWS_FILE).write_text(json.dumps({"chunk_id": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(ReviewFileError, match=r":1: not a review record \(missing id"):
        read_reviews(tmp_path)


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_fresh(tmp_path):
    first = _record()
    append_review(tmp_path, first)
    path = tmp_path / REVIEWS_FILE
    with open(path, "ab") as fh:
        fh.write(_record().to_json().encode()[:40])  # a write cut short by a crash
    assert read_reviews(tmp_path) == [first]
    second = _record(value=False, decision="reject")
    append_review(tmp_path, second)
    with pytest.raises(ReviewFileError, match=":2:"):  # torn, no longer last: reported
        read_reviews(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["id"] == first.id and json.loads(lines[2])["id"] == second.id


def test_concurrent_appends_keep_every_line(tmp_path):
    records = [_record(target=f"s{i}") for i in range(40)]

    def write(part):
        for r in part:
            append_review(tmp_path, r)

    threads = [threading.Thread(target=write, args=(records[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.id for r in read_reviews(tmp_path)) == sorted(r.id for r in records)


_WRITER = """
import sys
from pathlib import Path
from letterchunk.review.records import append_review, new_record
folder = Path(sys.argv[1])
i = 0
while True:
    append_review(folder, new_record(chunk_id="1977-001", letter="1977", text_sha256="h",
        field="summary", decision="edit", value="x" * 5000 + str(i), reviewer="r"))
    i += 1
    if i == 5:
        print("ready", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_kill_9_mid_writing_loses_no_earlier_decision(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.05)  # let it write more: the kill lands during one of the appends
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    records = read_reviews(tmp_path)
    assert len(records) >= 5
    assert [r.value for r in records] == [("x" * 5000) + str(i) for i in range(len(records))]


def test_the_last_decision_is_in_force_and_undo_cancels_one():
    a = _record(decision="reject", value=False)
    b = _record(decision="accept", value=True)
    skip = _record(decision="skip", value=None)
    undo_b = _record(decision="undo", value=None, undoes=b.id)
    other = _record(field="rule", target="A rule.", decision="reject", value=False)
    assert effective_reviews([a, b, skip])[a.key] is b
    in_force = effective_reviews([a, b, skip, undo_b, other])
    assert in_force[a.key] is a and in_force[other.key] is other
    redo = _record(decision="undo", value=None, undoes=undo_b.id)
    assert effective_reviews([a, b, undo_b, redo])[a.key] is b
    assert effective_reviews([b, undo_b]) == {}


def test_reviews_of_other_text_under_one_id_are_other_items():
    old = _record(text_sha256=text_sha256("old"))
    new = _record(text_sha256=text_sha256("new"), value=False, decision="reject")
    assert len(effective_reviews([old, new])) == 2
