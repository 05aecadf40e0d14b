"""Replaying recorded model traffic: a cassette (``cassettes/YYYY.yaml``, recorded with vcrpy from
the embedded llama-server answering the real prompts) answers every request a client makes, so
the pipeline runs with no model and no network.

A request matches a recording on method, scheme, host, path and JSON body (the rendered prompt,
response schema, model and generation parameters); the port is left out because the embedded
server listens on a free port chosen at start.  ``Authorization`` and cookies are never written
to a recording.  Each recorded interaction plays at most once, and a request that is not in the
recording fails at once (no transport retry), so a changed prompt or request sequence shows.
The cassette tests, the benchmarks and the retrieval tests replay through here.  Needs vcrpy
(the ``test`` extra).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.client import LLMClient
from letterchunk.llm.connect import open_client

__all__ = ["REPLAY_ENV", "recorder", "replayed_client"]

# never contacted: the recording answers (the port is not matched)
REPLAY_ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_API_KEY": "sk-replay-dummy"}


def recorder(record_mode: str = "none") -> Any:
    """A vcrpy recorder with letterchunk's matching rules: ``"none"`` replays, ``"all"`` records
    everything anew, ``"update"`` replays the recorded interactions that are still requested,
    records only the requests the cassette has no answer for, and drops the recorded ones no
    longer requested (a changed follow-up question re-records that question, not the chunk's
    minute-long structured call, whose recorded answer the same deterministic server gave)."""
    import vcr  # deferred: vcrpy comes with the test extra, needed only to record or replay

    update = record_mode == "update"
    return vcr.VCR(
        record_mode="new_episodes" if update else record_mode,
        match_on=["method", "scheme", "host", "path", "body"],
        filter_headers=["authorization", "cookie", "set-cookie"],
        decode_compressed_response=True,
        drop_unused_requests=update,
    )


@contextlib.contextmanager
def replayed_client(cassette: str | Path) -> Iterator[tuple[LLMClient, Any]]:
    """A client for the embedded model's settings whose requests ``cassette`` answers; yields
    ``(client, played)`` so the caller can check that every recording was asked for
    (``played.all_played``)."""
    with (
        recorder("none").use_cassette(str(cassette), allow_playback_repeats=False) as played,
        open_client(
            env=REPLAY_ENV, cache="off", model=MODEL_ID, mode="JSON_SCHEMA", transport_retries=0
        ) as client,
    ):
        yield client, played
