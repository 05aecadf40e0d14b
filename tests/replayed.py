"""The 1977 and 1996 letters enriched by replaying their cassettes (no model, no network).

Shared by the retrieval tests, which need real enriched output (long chunks, Tier-3 tables with
parents, real summaries and entities) rather than the hand-built letter of ``conftest``.  The
letters are replayed once per test run, whichever pytest-xdist worker asks first
(:mod:`shared_run`), and every caller gets a copy of the files a replay of its own would write.
"""

from __future__ import annotations

from pathlib import Path

from letterchunk.llm.replay import replayed_client
from letterchunk.runner.pipeline import RunOptions, run_paths
from shared_run import once_folder

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"


def _replay(out: Path, years: tuple[int, ...]) -> None:
    for year in years:
        with replayed_client(ROOT / "cassettes" / f"{year}.yaml") as (client, _):
            run_paths(
                [LETTERS / f"{year}.txt"],
                out,
                client,
                RunOptions(workers=1, on_failure="skip", source_label="cassette"),
            )


def replay_letters(out: Path, years: tuple[int, ...] = (1977, 1996)) -> Path:
    """Enrich ``years`` into ``out`` from ``cassettes/<year>.yaml``; returns ``out``."""
    name = f"replayed-{'-'.join(map(str, years))}"
    return once_folder(name, lambda folder: _replay(folder, years), out)
