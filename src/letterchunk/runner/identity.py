"""What made a run's output: the ``"identity"`` block of ``DIR/run.json``.

Two runs over the same letters differ because one of these differs: the model and how it was
asked (instructor mode, temperature, seed, answer cap), the prompt templates, the chunk schema,
the concept vocabularies, or letterchunk itself.  :func:`run_identity` records them when a run
starts, so ``letterchunk diff`` can set two runs side by side and say which input changed::

    "identity": {
      "letterchunk_version": "0.1.0",
      "started_at": "2026-11-26T14:03:07Z",          # UTC, when the run started
      "model": "...", "mode": "JSON_SCHEMA", "temperature": 0.0, "seed": 42, "max_tokens": 1024,
      "prompts_sha256": "...",                       # llm.prompts.prompt_hash(): every template
      "prompt_files": {"enrich_system": "<sha256>", ...},
      "schema_sha256": "...",                        # the chunk schema the models make
      "vocabularies": {"buffett_concepts.json": "<sha256>", "partnership_concepts.json": "..."}
    }

A ``run.json`` written before this block existed has no ``"identity"``: readers treat every
field as unknown (``letterchunk.report.diff.read_identity``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from letterchunk.contract.schema import json_schema_text
from letterchunk.contract.vocabulary import COMPILATION_CONCEPTS_FILE, CONCEPTS_FILE
from letterchunk.llm.prompts import prompt_hash, prompts_dir, template_names
from letterchunk.resources import resource_path
from letterchunk.version import installed_version

__all__ = ["run_identity"]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_identity(settings: Any, *, now: Callable[[], float] = time.time) -> dict[str, Any]:
    """The identity of a run about to start with the client settings ``settings`` (an
    :class:`~letterchunk.llm.client.LLMSettings`); ``now`` gives the start time (epoch
    seconds)."""
    folder = prompts_dir()
    return {
        "letterchunk_version": installed_version(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now())),
        "model": settings.model,
        "mode": settings.mode,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "max_tokens": settings.max_tokens,
        "prompts_sha256": prompt_hash(),
        "prompt_files": {
            name: _sha256((folder / f"{name}.md").read_bytes()) for name in template_names()
        },
        "schema_sha256": _sha256(json_schema_text().encode("utf-8")),
        "vocabularies": {
            name: _sha256(resource_path("schemas", name).read_bytes())
            for name in (CONCEPTS_FILE, COMPILATION_CONCEPTS_FILE)
        },
    }
