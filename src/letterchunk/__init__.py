"""letterchunk: Berkshire Hathaway shareholder letters → canonical retrieval chunks.

The names users need are importable from ``letterchunk`` itself::

    import letterchunk

    letter = letterchunk.load_letter("corpus/letters/1977.txt")
    chunks = letterchunk.segment_letter(letter)              # list[letterchunk.Chunk]
    report = letterchunk.validate_paths(["out/"], stage="enriched")
    outcomes = letterchunk.run(["corpus/letters/1977.txt"], "out/")

Errors form one tree rooted at :class:`LetterchunkError`.  The stage functions are loaded on
first use, so ``import letterchunk`` (and the CLI's ``--help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any

from .errors import (
    BackendError,
    BudgetExceeded,
    CacheMiss,
    ConfigError,
    InputError,
    LetterchunkError,
    RepairExhausted,
)
from .schema import Chunk, Metadata, TableData, dump_chunk
from .tokens import count_tokens

if _TYPE_CHECKING:
    from .api import run
    from .clean import CleanedLetter, load_letter
    from .client import open_client
    from .letters import find_letters
    from .llm import LLMClient, LLMSettings
    from .pipeline import Hooks, LetterOutcome, RunOptions, run_paths
    from .segment import segment_letter
    from .validate import ValidationReport, Violation, validate_paths

__version__ = "0.1.0"

# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "run": "api",
    "CleanedLetter": "clean",
    "load_letter": "clean",
    "open_client": "client",
    "find_letters": "letters",
    "LLMClient": "llm",
    "LLMSettings": "llm",
    "Hooks": "pipeline",
    "LetterOutcome": "pipeline",
    "RunOptions": "pipeline",
    "run_paths": "pipeline",
    "segment_letter": "segment",
    "ValidationReport": "validate",
    "Violation": "validate",
    "validate_paths": "validate",
}

__all__ = [
    "BackendError",
    "BudgetExceeded",
    "CacheMiss",
    "Chunk",
    "CleanedLetter",
    "ConfigError",
    "Hooks",
    "InputError",
    "LLMClient",
    "LLMSettings",
    "LetterOutcome",
    "LetterchunkError",
    "Metadata",
    "RepairExhausted",
    "RunOptions",
    "TableData",
    "ValidationReport",
    "Violation",
    "__version__",
    "count_tokens",
    "dump_chunk",
    "find_letters",
    "load_letter",
    "open_client",
    "run",
    "run_paths",
    "segment_letter",
    "validate_paths",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'letterchunk' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
