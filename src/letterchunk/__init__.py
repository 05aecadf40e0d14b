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

from letterchunk.errors import (
    BackendError,
    BudgetExceeded,
    CacheMiss,
    ConfigError,
    FolderLocked,
    InputError,
    LetterchunkError,
    RepairExhausted,
)
from letterchunk.version import __version__

if _TYPE_CHECKING:
    from letterchunk.api import run
    from letterchunk.contract.schema import Chunk, Metadata, TableData, dump_chunk
    from letterchunk.contract.validate import ValidationReport, Violation, validate_paths
    from letterchunk.layout import find_letters
    from letterchunk.llm.client import LLMClient, LLMSettings
    from letterchunk.llm.connect import open_client
    from letterchunk.runner.pipeline import Hooks, LetterOutcome, RunOptions, run_paths
    from letterchunk.text.clean import CleanedLetter, load_letter
    from letterchunk.text.segment import segment_letter
    from letterchunk.tokens import count_tokens


# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "Chunk": "contract.schema",
    "Metadata": "contract.schema",
    "TableData": "contract.schema",
    "dump_chunk": "contract.schema",
    "count_tokens": "tokens",
    "run": "api",
    "CleanedLetter": "text.clean",
    "load_letter": "text.clean",
    "open_client": "llm.connect",
    "find_letters": "layout",
    "LLMClient": "llm.client",
    "LLMSettings": "llm.client",
    "Hooks": "runner.pipeline",
    "LetterOutcome": "runner.pipeline",
    "RunOptions": "runner.pipeline",
    "run_paths": "runner.pipeline",
    "segment_letter": "text.segment",
    "ValidationReport": "contract.validate",
    "Violation": "contract.validate",
    "validate_paths": "contract.validate",
}

__all__ = [
    "BackendError",
    "BudgetExceeded",
    "CacheMiss",
    "Chunk",
    "CleanedLetter",
    "ConfigError",
    "FolderLocked",
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
