"""The main job end to end against a real local HTTP server (tests/fake_openai.py).

The fake server answers like a careful model: from the request's own response schema and the
chunk text in the prompt, with grounded evidence.  The real LLMClient, cache, segmenter,
validator and repair loop run unchanged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from answers import request_chunk as chunk_text
from fake_openai import FakeOpenAI, response_schema
from letterchunk.cli import main
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.contract.validate import validate_path
from letterchunk.enrich import sentence_choices
from letterchunk.enrich.candidates import confession_paragraphs
from letterchunk.enrich.judges import MAX_PARAGRAPH_QUESTIONS, rule_questions
from letterchunk.errors import RepairExhausted
from letterchunk.llm.cache import ResponseCache
from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.prompts import prompt_hash
from letterchunk.runner.pipeline import RunOptions, enrich_dir, run_paths
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import UNTITLED, segment_letter

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "letters"
LETTER = CORPUS / "1977.txt"


def first_quote(schema: dict, text: str) -> str:
    """The first sentence the grammar offers (enum), else the chunk's first sentence."""
    items = schema.get("properties", {}).get("content_type_evidence", {}).get("items", {})
    if "enum" in items or "const" in items:
        return items.get("enum", [items.get("const")])[0]
    return sentence_choices(text)[0]


def rule_quote(schema: dict, quote: str) -> str:
    """The first rule sentence the grammar offers as a principle's evidence, else ``quote``."""
    items = schema.get("properties", {}).get("principles", {}).get("items", {})
    if "$ref" in items:
        items = schema["$defs"][items["$ref"].rsplit("/", 1)[-1]]
    evidence = items.get("properties", {}).get("evidence", {})
    return evidence.get("enum", [evidence.get("const", quote)])[0]


def grounded_answer(request: dict, **override) -> dict:
    """A valid answer to whatever (full or partial) schema the request carries."""
    schema = response_schema(request)
    text = chunk_text(request)
    quote = first_quote(schema, text)
    rule = rule_quote(schema, quote)
    # the longest of its first words: a content word of its own chunk, as a real summary names
    word = max(re.findall(r"[A-Za-z]+", text)[:20] or ["Berkshire"], key=len)
    full = {
        "section_title": "Opening Remarks",
        "tables": [{"table_name": "Holdings", "summary": f"Positions held at year end: {word}."}]
        * (schema["properties"].get("tables", {}).get("minItems", 0)),
        "contextual_summary": f"The chunk reports on Berkshire's year: {word}.",
        "themes": ["annual results"],
        "buffett_concepts": [],
        "entities": {"companies": [], "people": [], "metrics": []},
        "principles": [
            {"statement": "Report results plainly.", "category": "general", "evidence": rule}
        ],
        "content_type": "principle_statement",
        "content_type_evidence": [quote],
        "has_financial_data": True,
        "retrieval_priority": "medium",
        "abstraction_level": "low",
        "comparison_years": [],
        "future_outlook": False,
        "related_sections_same_letter": [],
        "related_years": [],
    }
    full.update(override)
    return {k: v for k, v in full.items() if k in schema["properties"]}


def client_for(
    server: FakeOpenAI, cache: ResponseCache | None = None, mode: str = "JSON_SCHEMA"
) -> LLMClient:
    settings = LLMSettings.from_env(
        env={}, base_url=server.base_url, model="fake-model", mode=mode, transport_retries=0
    )
    return LLMClient(settings, cache=cache, prompt_hash=prompt_hash())


def files(folder: Path) -> dict[str, bytes]:
    """The output files, without the repair report (it says where answers came from)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith(".report.jsonl")
    }


def test_run_writes_valid_enriched_files_with_one_call_per_chunk(tmp_path):
    out = tmp_path / "out"
    with FakeOpenAI(default=grounded_answer) as server, client_for(server) as client:
        [letter] = run_paths([LETTER], out, client)
        structured = server.structured_requests
        assert len(structured) == len(letter.outcomes) == len(letter.chunks) > 3
        # the yes/no follow-ups: for a chunk with a paragraph holding a first-person
        # self-critical sentence, one per such paragraph (at most three); one per candidate
        # rule sentence of a narrative chunk; none about concepts
        for o in letter.outcomes:
            narrative = o.chunk.metadata.chunk_tier != 3
            paragraphs = confession_paragraphs(o.chunk.content) if narrative else []
            confession = min(len(paragraphs), MAX_PARAGRAPH_QUESTIONS)
            rules = rule_questions(o.chunk)
            assert o.verdicts.calls == confession + len(rules), o.chunk_id
            assert [s for s, _ in o.verdicts.rules] == rules
        asked = sum(o.verdicts.calls for o in letter.outcomes)
        assert server.question_count == asked > len(letter.outcomes)
    assert all(o.calls == 1 for o in letter.outcomes)
    assert sorted(files(out)) == ["1977.evidence.jsonl", "1977.jsonl", "1977_cleaned.txt"]
    assert (out / "1977.report.jsonl").is_file()
    errors = [v for v in validate_path(out, stage="enriched") if v.severity == "error"]
    assert errors == []
    chunks = [Chunk.model_validate_json(x) for x in (out / "1977.jsonl").read_text().splitlines()]
    evidence = [json.loads(x) for x in (out / "1977.evidence.jsonl").read_text().splitlines()]
    assert [e["chunk_id"] for e in evidence] == [c.chunk_id for c in chunks]
    assert all(c.metadata.section_title != UNTITLED for c in chunks)
    t3 = [c for c in chunks if c.metadata.chunk_tier == 3]
    assert t3 and all(c.metadata.content_type == "financial_table" for c in t3)
    assert all(t.table_name == "Holdings" and t.rows for c in t3 for t in c.metadata.table_data)
    # every request: fixed system prompt first, the chunk text last
    systems = {r.body["messages"][0]["content"] for r in server.chat_requests}
    assert len(systems) == 1
    # grammar mode: names and quotes can only be the chunk's own
    for r in structured:
        props = response_schema(r.body)["properties"]
        text = " ".join(chunk_text(r.body).split())
        for q in props.get("content_type_evidence", {}).get("items", {}).get("enum", []):
            assert q in text


def test_parallel_run_and_cached_rerun_are_byte_identical(tmp_path):
    cache_dir = tmp_path / "cache"
    with FakeOpenAI(default=grounded_answer, latency_s=0.02) as server:
        with client_for(server) as client:
            run_paths([LETTER], tmp_path / "serial", client, RunOptions(workers=1))
        with ResponseCache(cache_dir, "use") as cache, client_for(server, cache) as client:
            run_paths([LETTER], tmp_path / "parallel", client, RunOptions(workers=4))
        asked = len(server.all_chat_requests)
        with ResponseCache(cache_dir, "use") as cache, client_for(server, cache) as client:
            [letter] = run_paths([LETTER], tmp_path / "rerun", client, RunOptions(workers=2))
            questions = sum(o.verdicts.calls for o in letter.outcomes)
            assert cache.misses == 0 and cache.hits == len(letter.outcomes) + questions > 7
        assert len(server.all_chat_requests) == asked  # zero HTTP requests on the rerun
    serial = files(tmp_path / "serial")
    assert files(tmp_path / "parallel") == serial == files(tmp_path / "rerun")


def test_enrich_dir_matches_run_and_writes_in_place(tmp_path):
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    letter = load_letter(LETTER)
    seg = tmp_path / "seg"
    seg.mkdir()
    (seg / letter.cleaned_name).write_text(letter.text, encoding="utf-8")
    (seg / "1977.jsonl").write_text(
        "".join(dump_chunk(c) + "\n" for c in segment_letter(letter)), encoding="utf-8"
    )
    with FakeOpenAI(default=grounded_answer) as server, client_for(server) as client:
        enrich_dir(seg, client)
        run_paths([LETTER], tmp_path / "run", client)
    assert files(seg) == files(tmp_path / "run")


def _poisoned(bad_ids: set[str]):
    """An answer tagging a principle without quoting it, for chunks whose text matches (no
    list item to drop: only the model could fix it)."""

    def respond(request: dict) -> dict:
        if any(marker in chunk_text(request) for marker in bad_ids):
            return grounded_answer(
                request, content_type="principle_statement", content_type_evidence=[]
            )
        return grounded_answer(request)

    return respond


def test_a_chunk_that_stays_invalid_is_kept_as_segmented(tmp_path):
    # tool calling (hosted style): no grammar, so an unquoted tag can come back
    # a name written in one section of 1977 only (every section heading is quoted in every
    # chunk's prompt, so a heading would poison them all)
    marker = "Ken Chace"
    segmented = {c.chunk_id: dump_chunk(c) for c in segment_letter(load_letter(LETTER))}
    with (
        FakeOpenAI(default=_poisoned({marker})) as server,
        client_for(server, mode="TOOLS") as client,
    ):
        [letter] = run_paths(
            [LETTER], tmp_path / "skip", client, RunOptions(on_failure="skip", max_attempts=1)
        )
    [failed] = letter.failed
    assert failed.calls == 2  # the first answer and one re-ask
    assert {v.code for v in failed.violations} == {"evidence.missing"}
    assert letter.pending == [failed.chunk_id] and not letter.complete
    lines = (tmp_path / "skip" / "1977.jsonl").read_text().splitlines()
    assert [json.loads(x)["chunk_id"] for x in lines] == list(segmented)  # no chunk lost
    assert segmented[failed.chunk_id] in lines  # byte for byte as segmented: no invalid answer
    assert not [v for v in validate_path(tmp_path / "skip") if v.severity == "error"]


def test_halt_stops_with_the_chunk_named_and_keeps_every_chunk(tmp_path):
    marker = "Textile Operations"
    segmented = [dump_chunk(c) for c in segment_letter(load_letter(LETTER))]
    with (
        FakeOpenAI(default=_poisoned({marker})) as server,
        client_for(server, mode="TOOLS") as client,
        pytest.raises(RepairExhausted) as info,
    ):
        run_paths([LETTER], tmp_path / "halt", client, RunOptions(max_attempts=0))
    assert info.value.chunk_id.startswith("1977-S")
    lines = (tmp_path / "halt" / "1977.jsonl").read_text().splitlines()
    ids = [json.loads(x)["chunk_id"] for x in lines]
    assert ids == [json.loads(x)["chunk_id"] for x in segmented]
    halted = ids.index(info.value.chunk_id)
    assert all(json.loads(x)["metadata"]["contextual_summary"] for x in lines[:halted])
    assert lines[halted:] == segmented[halted:]  # the halted chunk and the rest as segmented
    assert not [v for v in validate_path(tmp_path / "halt") if v.severity == "error"]


def test_cli_run_prints_cache_stats_and_exits_zero(tmp_path, monkeypatch, capsys):
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        args = [
            "run",
            str(LETTER),
            "--out",
            str(tmp_path / "o"),
            "--cache-dir",
            str(tmp_path / "c"),
        ]
        assert main(args) == 0
        first = len(server.all_chat_requests)  # structured calls and yes/no questions
        assert first > server.chat_count > 0
        assert main(args) == 0
        assert len(server.all_chat_requests) == first
    err = capsys.readouterr().err
    # one summary per run: the totals line, then the ledger's per-letter table
    summaries = [line for line in err.splitlines() if line.startswith("letterchunk: summary: ")]
    assert len(summaries) == 2, err
    assert f"cache 0 hit(s), {first} miss(es)" in summaries[0]
    assert f"cache {first} hit(s), 0 miss(es)" in summaries[1]
    assert f"{first} HTTP request(s)" in summaries[0] and "0 HTTP request(s)" in summaries[1]
    assert err.count("letterchunk: letter  chunks  requests") == 2


def test_cli_segment_then_enrich_in_place_equals_run(tmp_path, monkeypatch):
    with FakeOpenAI(default=grounded_answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        seg = tmp_path / "seg"
        assert main(["segment", str(LETTER), "--out", str(seg), "--quiet"]) == 0
        assert main(["enrich", str(seg), "--cache", "off", "--quiet"]) == 0
        assert (
            main(["run", str(LETTER), "--out", str(tmp_path / "run"), "--cache", "off", "--quiet"])
            == 0
        )
    ours = {k: v for k, v in files(seg).items() if k != "run.json"}
    theirs = {k: v for k, v in files(tmp_path / "run").items() if k != "run.json"}
    assert ours == theirs and "1977.evidence.jsonl" in ours


def test_unify_titles_gives_a_section_one_title_and_drops_self_references(make_chunk):
    from letterchunk.runner.pipeline import unify_titles

    def chunk(cid, title, related=()):
        return make_chunk(
            cid,
            "Body text of the chunk.",
            0,
            section_title=title,
            section_hierarchy=["Letter Body", title],
            cross_references={"related_sections_same_letter": list(related), "related_years": []},
        )

    before = [
        chunk("1996-S1-T1-001", UNTITLED),
        chunk("1996-S1-T3-001", UNTITLED),
        chunk("1996-S2-T1-001", "Insurance"),
    ]
    after = [
        chunk("1996-S1-T1-001", "Intrinsic Value", ["Insurance"]),
        chunk("1996-S1-T3-001", "Holdings Table", ["Intrinsic Value", "Insurance"]),
        chunk("1996-S2-T1-001", "Insurance", ["Intrinsic Value"]),
    ]
    out = unify_titles(before, after)
    assert [c.metadata.section_title for c in out] == ["Intrinsic Value"] * 2 + ["Insurance"]
    assert out[1].metadata.section_hierarchy == ["Letter Body", "Intrinsic Value"]
    assert out[1].metadata.cross_references.related_sections_same_letter == ["Insurance"]
    assert out[2] is after[2]  # a titled section is left alone


def test_a_model_title_never_repeats_another_sections_title():
    """The opening section named after the next header takes its first theme that is no title
    yet, else its section number; xrefs dedupe."""
    from letterchunk.contract.schema import Chunk
    from letterchunk.runner.pipeline import unify_titles

    def chunk(
        cid: str, title: str, xrefs: list[str] | None = None, themes: list[str] | None = None
    ) -> Chunk:
        meta = {
            "themes": themes or [],
            "letter_year": 1977,
            "letter_date": "1978-03-14",
            "source_file": "1977_cleaned.txt",
            "section_title": title,
            "section_hierarchy": ["Letter Body", title],
            "chunk_tier": 1,
            "content_type": "narrative",
            "temporal_references": {"primary_year": 1977},
            "cross_references": {"related_sections_same_letter": xrefs or []},
            "token_count": 1,
            "char_count": 1,
            "source_span": {"start_char": 0, "end_char_exclusive": 1},
        }
        return Chunk.model_validate({"chunk_id": cid, "content": "x", "metadata": meta})

    original = [chunk("1977-S1-T1-001", UNTITLED), chunk("1977-S2-T1-001", "Textile Operations")]
    themed = chunk(
        "1977-S1-T1-001",
        "Textile Operations",
        ["Banking", "Banking"],
        ["textile operations", "annual results"],
    )
    out = unify_titles(original, [themed, original[1]])
    assert out[0].metadata.section_title == "Annual Results"  # the first theme no title has
    assert out[0].metadata.section_hierarchy == ["Letter Body", "Annual Results"]
    assert out[0].metadata.cross_references.related_sections_same_letter == ["Banking"]
    assert out[1].metadata.section_title == "Textile Operations"
    # no free theme: the section number keeps the title unique
    bare = chunk("1977-S1-T1-001", "Textile Operations", ["Banking", "Banking"])
    out = unify_titles(original, [bare, original[1]])
    assert out[0].metadata.section_title == "Textile Operations (section 1)"
    assert out[0].metadata.section_hierarchy == ["Letter Body", "Textile Operations (section 1)"]
    assert out[0].metadata.cross_references.related_sections_same_letter == ["Banking"]
