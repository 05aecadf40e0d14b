"""Replay real recordings of the local model: segment -> enrich -> validate, no model, no network.

``cassettes/<year>.yaml`` hold what the embedded llama-server (Qwen2.5-Coder-1.5B-Instruct,
``backend.py``) answered to our real prompts for every chunk of the letter (re-asks of the
repair loop included).  They are recorded, never written or edited by hand.

Replay: record mode ``none``; a request matches a recording on method, scheme, host, path and
the JSON *body* (the rendered prompt, response schema, model and generation parameters).  The
port is left out on purpose: the embedded server listens on a free port chosen at start.  The
``Authorization`` header is filtered out when recording and a dummy key is used on replay; each
interaction plays at most once and the test fails when one goes unused, so a changed prompt,
schema, segmentation or request sequence fails loudly.  The cache is off (every chunk is asked).

Re-record (needs ``pip install -e '.[local]'``; 40-50 s per chunk on 2 CPU cores, all ten
letters about 2 h 10 min, one after another)::

    LETTERCHUNK_RECORD=1 python -m pytest -q -s tests/test_cassettes.py

Re-record after changing a prompt, the response models, the generation settings, the repair
loop's re-ask messages, or the segmentation of a recorded letter.  ``LETTERCHUNK_RECORD=update``
keeps every recorded interaction that is still requested, asks the real server only the
requests the cassette cannot answer, and drops the recorded ones no longer requested
(``letterchunk.llm.replay.recorder``): after a change to the yes/no questions alone it records
those questions (about 3 s each on 2 CPU cores) instead of re-asking every chunk's structured
call.  A question to the embedded model carries ``cache_prompt: false`` (``letterchunk.llm.judge``):
the server computes each question afresh, so its recorded answer is the one a live run gets,
whatever request came before it (with the prompt cache, 3 of 38 probabilities of 1977 had
differed by up to 0.05 between an update-mode recording and a live run).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("vcr")  # the recorder comes with the test extra

from letterchunk.contract.schema import Chunk  # noqa: E402
from letterchunk.contract.validate import normalise_ws, validate_path  # noqa: E402
from letterchunk.contract.vocabulary import load_concepts  # noqa: E402
from letterchunk.llm.backend import MODEL_ID  # noqa: E402
from letterchunk.llm.connect import open_client  # noqa: E402
from letterchunk.llm.replay import recorder  # noqa: E402
from letterchunk.runner.pipeline import RunOptions, run_paths  # noqa: E402
from letterchunk.text.clean import load_letter  # noqa: E402
from letterchunk.text.segment import segment_letter  # noqa: E402
from replayed import replay_letter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "cassettes"
# the early letter of spec §1.1, a modern one with Tier-3 tables, the three letters with
# hand-made gold (bench/gold/), which bench/enrichment_quality.py replays, and the other letters
# bench/retrieval.py asks its questions of (it replays every letter it has a cassette for)
LETTERS = [1977, 1978, 1982, 1987, 1991, 1995, 1996, 2009, 2016, 2019]
# chunks whose recorded answers the repair loop could not make valid (the run skips them and
# keeps them as segmented): named exactly, so a change that fixes one, or breaks another, fails
# here.  None today: 1991-S3-T3-001 (the "Operating Earnings" table, whose row label the model
# uses as the table's name, a theme and a metric) failed until the injection rule exempted a
# label of the chunk's own table; its two stale re-asks were dropped from the cassette by
# vcrpy's update mode (no request re-recorded)
UNREPAIRED: dict[int, set[str]] = {}
# "1": record every request anew; "update": record only what the cassette cannot answer
RECORD_MODE = {"1": "all", "update": "update"}.get(os.environ.get("LETTERCHUNK_RECORD", ""))
RECORD = RECORD_MODE is not None
# the user's model cache, read before the autouse fixture isolates HOME (recording only)
REAL_MODEL_DIR = os.environ.get("LETTERCHUNK_MODEL_DIR") or str(
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "letterchunk" / "models"
)


def _record(year: int, out: Path, env: dict[str, str]):
    # when recording on a busy 2-core machine one answer may take minutes, and a timed-out
    # request would keep the server busy while its retry waits behind it
    with open_client(
        env=env, cache="off", model=MODEL_ID, mode="JSON_SCHEMA", timeout_s=900.0
    ) as client:
        [outcome] = run_paths(
            [ROOT / "corpus" / "letters" / f"{year}.txt"],
            out,
            client,
            RunOptions(workers=1, on_failure="skip"),
        )
    return outcome


def _recorded(path: Path) -> int:
    """The interactions saved in the cassette file ``path``."""
    return len(yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"])


@pytest.mark.parametrize("year", LETTERS)
def test_recorded_letter_replays_end_to_end(year, tmp_path, monkeypatch):
    path = CASSETTES / f"{year}.yaml"
    out = tmp_path / "out"
    if RECORD:
        from letterchunk.llm.backend import embedded_server

        monkeypatch.setenv("LETTERCHUNK_MODEL_DIR", REAL_MODEL_DIR)
        if RECORD_MODE == "all":
            path.unlink(missing_ok=True)
        started = time.monotonic()
        with (
            embedded_server() as base_url,
            recorder(RECORD_MODE).use_cassette(str(path), allow_playback_repeats=False),
        ):
            env = {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-no-key-required"}
            outcome = _record(year, out, env)
        recorded = _recorded(path)
        print(f"\nrecorded {year}: {recorded} request(s) in {time.monotonic() - started:.0f}s")
    else:
        if not path.is_file():
            pytest.fail(
                f"{path} is missing; record it: LETTERCHUNK_RECORD=1 python -m pytest "
                "tests/test_cassettes.py"
            )
        # replayed once a test run (tests/replayed.py): test_enrichment_quality scores the
        # same replays of the gold letters, and the retrieval tests read 1977's and 1996's
        replayed = replay_letter(year)
        replayed.write(out)
        outcome = replayed.outcome
        assert replayed.played == replayed.recorded, (
            f"{replayed.recorded - replayed.played} recorded interaction(s) never requested: "
            "the request sequence changed; re-record (see module docstring)"
        )
        recorded = replayed.recorded

    # -- the recording answered every chunk, and every answer made a valid chunk
    segmented = segment_letter(load_letter(ROOT / "corpus" / "letters" / f"{year}.txt"))
    assert [o.chunk_id for o in outcome.outcomes] == [c.chunk_id for c in segmented]
    unrepaired = UNREPAIRED.get(year, set())
    assert {o.chunk_id for o in outcome.failed} == unrepaired
    # every recorded request: structured calls and the yes/no follow-ups (enrich.judges); when
    # recording, read from the file, since an update recording drops the unasked ones only when
    # it saves
    assert recorded == sum(o.calls + o.verdicts.calls for o in outcome.outcomes)
    for o in outcome.outcomes:  # exactly one request for a chunk the repair loop left alone
        reasked = any(r.kind == "reask" for r in o.records)
        assert o.calls == 1 or reasked, o.chunk_id

    errors = [v for v in validate_path(out, stage="enriched") if v.severity == "error"]
    # an unrepaired chunk is kept as segmented: its missing summaries, and so the letter's
    # incompleteness, are the only errors
    assert {v.chunk_id for v in errors} == unrepaired, [v.to_dict() for v in errors]

    chunks = [
        Chunk.model_validate_json(line)
        for line in (out / f"{year}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [c.chunk_id for c in chunks] == [c.chunk_id for c in segmented]
    by_id = {c.chunk_id: c for c in chunks}

    # every evidence quote is verbatim chunk text (whitespace-normalised)
    records = [
        json.loads(line)
        for line in (out / f"{year}.evidence.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {r["chunk_id"] for r in records} == set(by_id) - unrepaired
    for r in records:
        text = normalise_ws(by_id[r["chunk_id"]].content)
        quotes = r["content_type_evidence"] + r["principle_evidence"]
        assert all(normalise_ws(q) in text for q in quotes), r
        assert len(r["principle_evidence"]) == len(by_id[r["chunk_id"]].metadata.principles)

    # an unrepaired chunk is written exactly as the segmenter made it
    segmented_by_id = {c.chunk_id: c for c in segmented}
    for chunk_id in unrepaired:
        assert by_id[chunk_id] == segmented_by_id[chunk_id]
    enriched = [c for c in chunks if c.chunk_id not in unrepaired]

    vocab = load_concepts()
    for c in enriched:
        md = c.metadata
        assert set(md.buffett_concepts) <= vocab
        assert md.contextual_summary.strip() and md.themes
        for name in md.entities.companies + md.entities.people:
            assert name.casefold() in normalise_ws(c.content).casefold()

    # Tier-3 chunks carry the parsed table (from code) with an LLM name and summary
    t3 = [c for c in enriched if c.metadata.chunk_tier == 3]
    seg_t3 = {c.chunk_id: c for c in segmented if c.metadata.chunk_tier == 3}
    assert len(t3) == len(seg_t3.keys() - unrepaired) >= 1
    for c in t3:
        assert c.metadata.content_type == "financial_table" and c.metadata.has_table
        for table, parsed in zip(
            c.metadata.table_data, seg_t3[c.chunk_id].metadata.table_data, strict=True
        ):
            assert (table.columns, table.rows, table.row_count) == (
                parsed.columns,
                parsed.rows,
                parsed.row_count,
            )
            assert table.rows and table.table_name.strip() and table.summary.strip()
