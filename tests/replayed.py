"""The 1977 and 1996 letters enriched by replaying their cassettes (no model, no network).

Shared by the retrieval tests, which need real enriched output (long chunks, Tier-3 tables with
parents, real summaries and entities) rather than the hand-built letter of ``conftest``.
"""

from __future__ import annotations

from pathlib import Path

from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.prompts import prompt_hash
from letterchunk.runner.pipeline import RunOptions, run_paths

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"


def replay_letters(out: Path, years: tuple[int, ...] = (1977, 1996)) -> Path:
    """Enrich ``years`` into ``out`` from ``cassettes/<year>.yaml``; returns ``out``."""
    import vcr  # deferred: the test extra's recorder, imported only by tests that replay

    recorder = vcr.VCR(
        record_mode="none",
        match_on=["method", "scheme", "host", "path", "body"],
        filter_headers=["authorization"],
        decode_compressed_response=True,
    )
    for year in years:
        settings = LLMSettings.from_env(
            env={},
            base_url="http://127.0.0.1:8080/v1",
            api_key="sk-replay-dummy",
            model="qwen2.5-coder-1.5b-instruct-q4_k_m",
            mode="JSON_SCHEMA",
            transport_retries=0,
        )
        with (
            recorder.use_cassette(str(ROOT / "cassettes" / f"{year}.yaml")),
            LLMClient(settings, cache=None, prompt_hash=prompt_hash()) as client,
        ):
            run_paths(
                [LETTERS / f"{year}.txt"],
                out,
                client,
                RunOptions(workers=1, on_failure="skip", source_label="cassette"),
            )
    return out
