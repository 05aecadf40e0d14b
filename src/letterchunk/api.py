"""The Python API: segment, validate and run the main job from code.

::

    import letterchunk

    letter = letterchunk.load_letter("corpus/letters/1977.txt")   # cleaned text, year, date
    chunks = letterchunk.segment_letter(letter)                   # canonical Chunk models
    report = letterchunk.validate_paths(["out/"], stage="segmented")
    outcomes = letterchunk.run(["corpus/letters"], "out/")        # segment + LLM + validate

:func:`run` is ``letterchunk run`` without the CLI: the same backend choice (``OPENAI_*``
environment or the embedded model), cache, repair loop, output files, folder lock and
``DIR/run.json``.  Progress and
summaries are the CLI's business; from code, pass ``hooks`` to follow a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from letterchunk.layout import find_letters
from letterchunk.llm.connect import CacheMode, open_client
from letterchunk.repair.reask import OnFailure
from letterchunk.runner.lock import folder_lock
from letterchunk.runner.pipeline import Hooks, LetterOutcome, RunOptions, run_paths
from letterchunk.runner.session import ledger_session

__all__ = ["run"]


def run(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    model: str | None = None,
    mode: str | None = None,
    cache: CacheMode = "use",
    cache_dir: str | Path | None = None,
    tier2: bool = False,
    workers: int = 1,
    max_attempts: int = 2,
    on_failure: OnFailure = "halt",
    hooks: Hooks | None = None,
) -> list[LetterOutcome]:
    """Segment, enrich, validate and write every letter in ``paths`` (files or folders) to
    ``out_dir``.

    Returns one :class:`LetterOutcome` per letter.  Raises the library's own errors
    (:class:`~letterchunk.errors.InputError` for a bad path, before any backend is started;
    :class:`~letterchunk.errors.RepairExhausted` when ``on_failure="halt"`` and a chunk stays
    invalid; :class:`~letterchunk.errors.ConfigError` for a backend that cannot be used).
    """
    letters = find_letters(paths)
    options = RunOptions(
        tier2=tier2, workers=workers, max_attempts=max_attempts, on_failure=on_failure
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # as `letterchunk run`: one process per output folder (taken before a server starts or a
    # request is sent), and DIR/run.json written after every letter and however the run ends
    with (
        folder_lock(out),
        open_client(model=model, mode=mode, cache=cache, cache_dir=cache_dir) as client,
        ledger_session(out, client, hooks) as counted,
    ):
        return run_paths(letters, out, client, options, counted)
