"""The Python API: segment, validate and run the main job from code.

::

    import letterchunk

    letter = letterchunk.load_letter("corpus/letters/1977.txt")   # cleaned text, year, date
    chunks = letterchunk.segment_letter(letter)                   # canonical Chunk models
    report = letterchunk.validate_paths(["out/"], stage="segmented")
    outcomes = letterchunk.run(["corpus/letters"], "out/")        # segment + LLM + validate

:func:`run` is ``letterchunk run`` without the CLI: the same run session
(:func:`letterchunk.runner.session.run_session`: output folder checked writable, folder lock,
backend choice from the ``OPENAI_*`` environment or the embedded model, cache, rate limits and
budget caps, the prompt-size check, ``DIR/run.json``), repair loop and output files.  Progress
and summaries are the CLI's business; from code, pass ``hooks`` to follow a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from letterchunk.layout import find_letters
from letterchunk.llm.connect import CacheMode
from letterchunk.repair.reask import OnFailure
from letterchunk.runner.pipeline import Hooks, LetterOutcome, RunOptions, run_paths
from letterchunk.runner.session import Backend, Limits, run_session

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
    tpm: int | None = None,
    rpm: int | None = None,
    max_tokens_total: int | None = None,
    max_cost: float | None = None,
    prices: str | Path | None = None,
    context_tokens: int | None = None,
    timeout_s: float | None = None,
    retries: int | None = None,
) -> list[LetterOutcome]:
    """Segment, enrich, validate and write every letter in ``paths`` (files or folders) to
    ``out_dir``.

    The keywords are the CLI's options, with its defaults (None: the environment variable,
    else the default ``letterchunk run --help`` names): ``tpm`` / ``rpm`` (``--tpm`` /
    ``--rpm``), ``max_tokens_total`` / ``max_cost`` (``--max-tokens-total`` / ``--max-cost``,
    USD), ``prices`` (``--prices``, the price table file), ``context_tokens``
    (``--context-tokens``: a chunk whose prompt and answer would not fit is refused unsent),
    ``timeout_s`` / ``retries`` (``--timeout`` / ``--retries``, per request).

    Returns one :class:`LetterOutcome` per letter.  Raises the library's own errors
    (:class:`~letterchunk.errors.InputError` for a bad path, before any backend is started;
    :class:`~letterchunk.errors.FolderLocked` while another run writes ``out_dir``;
    :class:`~letterchunk.errors.BudgetExceeded` when a cap stops the run;
    :class:`~letterchunk.errors.RepairExhausted` when ``on_failure="halt"`` and a chunk stays
    invalid; :class:`~letterchunk.errors.ConfigError` for a bad option, an unwritable
    ``out_dir`` or a backend that cannot be used).
    """
    letters = find_letters(paths)
    options = RunOptions(
        tier2=tier2, workers=workers, max_attempts=max_attempts, on_failure=on_failure
    )
    backend = Backend(
        model=model,
        mode=mode,
        cache=cache,
        cache_dir=cache_dir,
        timeout_s=timeout_s,
        transport_retries=retries,
    )
    limits = Limits(
        tpm=tpm,
        rpm=rpm,
        max_tokens_total=max_tokens_total,
        max_cost=max_cost,
        prices=prices,
        context_tokens=context_tokens,
    )
    out = Path(out_dir)
    # as `letterchunk run`: checked writable, locked before a server starts or a request is
    # sent, DIR/run.json written after every letter and however the run ends
    with run_session(out, backend=backend, limits=limits, hooks=hooks) as session:
        return run_paths(letters, out, session.client, session.options(options), session.hooks)
