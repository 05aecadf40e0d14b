"""The one exception tree of letterchunk.

::

    LetterchunkError                 root; every message says what to do next
    ├── InputError                   a file we were given is unusable (empty, binary, not UTF-8,
    │                                no year, not JSONL); carries ``path``
    │   └── NotReplaceable           an output file the run would replace is read-only (or a
    │                                folder); raised before any request, run.json kept
    ├── ConfigError                  options / env vars / missing optional dependency
│   └── FolderLocked             another letterchunk process is writing the same folder;
│                                carries ``folder`` and the holder's ``pid``
    ├── BackendError                 the LLM backend could not be started or reached
    ├── CacheMiss                    offline-only cache mode and no cached answer; carries chunk_id
    ├── BudgetExceeded               --max-tokens-total / --max-cost would be passed
    └── RepairExhausted              a chunk still fails validation after the last attempt;
                                     carries chunk_id, attempts, violations, usage, records

The CLI maps each to a message and an exit code (see ``cli.py``); library code never exits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "LetterchunkError",
    "InputError",
    "NotReplaceable",
    "ConfigError",
    "FolderLocked",
    "BackendError",
    "CacheMiss",
    "BudgetExceeded",
    "RepairExhausted",
]


class LetterchunkError(Exception):
    """Root of every error letterchunk raises on purpose."""

    #: the repair report's records (``report.records.AttemptRecord``) of the chunk being
    #: repaired when the error was raised (a halt, or a lost backend or budget cap during a
    #: re-ask), so the report keeps them; typed ``object`` here because this module sits below
    #: every stage and only carries them
    records: Sequence[object] = ()


class InputError(LetterchunkError):
    def __init__(self, path: str | Path, message: str) -> None:
        self.path = str(path)
        self.reason = message  # the message without the path, for a caller that words its own
        super().__init__(f"{self.path}: {message}")


class NotReplaceable(InputError):
    """An existing output file the job would replace cannot be: refused before any request,
    so the job leaves every earlier file as it was, ``run.json`` included."""


class ConfigError(LetterchunkError):
    pass


class FolderLocked(ConfigError):
    def __init__(self, lock_file: str | Path, pid: int | None) -> None:
        self.folder, self.pid = str(Path(lock_file).parent), pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            f"{self.folder}: {holder} is already writing this folder (letterchunk lock "
            f"{lock_file}); wait for it to finish, stop it, or pass another --out folder"
        )


class BackendError(LetterchunkError):
    pass


class CacheMiss(LetterchunkError):
    def __init__(self, chunk_id: str, message: str | None = None) -> None:
        self.chunk_id = chunk_id
        super().__init__(
            message
            or f"{chunk_id}: no cached answer and the cache mode is offline-only; "
            "rerun with --cache use (or refresh) and a reachable backend"
        )


class BudgetExceeded(LetterchunkError):
    def __init__(self, what: str, used: float, cap: float, message: str) -> None:
        self.what, self.used, self.cap = what, used, cap
        super().__init__(message)


class RepairExhausted(LetterchunkError):
    def __init__(
        self,
        chunk_id: str,
        attempts: int,
        violations: Sequence[object],
        usage: object,
        records: Sequence[object] = (),
    ) -> None:
        self.chunk_id = chunk_id
        self.attempts = attempts
        self.violations = violations
        self.usage = usage
        self.records = records
        rules = ", ".join(sorted({getattr(v, "code", str(v)) for v in violations})) or "?"
        # rules of kind corpus/mechanical/input are about the chunk itself, not the answer:
        # another attempt cannot fix them, so do not suggest one
        unfixable = sorted(
            {
                getattr(v, "code", "?")
                for v in violations
                if getattr(v, "kind", "semantic") != "semantic"
            }
        )
        advice = (
            f"the model cannot fix {', '.join(unfixable)} (more attempts will not help): fix the "
            "letter file, whose layout decides the chunks, or use --on-failure skip"
            if unfixable
            else "see the repair report, raise --max-attempts, or use --on-failure skip"
        )
        super().__init__(
            f"{chunk_id}: still invalid after {attempts} attempt(s) (rules: {rules}); {advice}"
        )
