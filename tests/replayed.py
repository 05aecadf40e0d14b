"""Letters enriched by replaying their cassettes (no model, no network), once per test run.

:func:`replay_letter`: one recorded letter replayed through the whole pipeline, what
``test_cassettes`` checks and ``test_enrichment_quality`` scores (the three gold letters are
replayed once for both).  :func:`replay_letters`: the 1977 and 1996 letters' files, for the
retrieval tests, which need real enriched output (long chunks, Tier-3 tables with parents, real
summaries and entities) rather than the hand-built letter of ``conftest``.  Each is replayed
once per test run, whichever pytest-xdist worker asks first (:mod:`shared_run`), and every
caller gets what a replay of its own would give.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from letterchunk.llm.client import Usage
from letterchunk.llm.replay import replayed_client
from letterchunk.runner.pipeline import LetterOutcome, RunOptions, run_paths
from shared_run import once

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"
CASSETTES = ROOT / "cassettes"
# how the replays run: one chunk at a time, a chunk whose answers stay invalid kept as segmented
OPTIONS = RunOptions(workers=1, on_failure="skip", source_label="cassette")


@dataclass(frozen=True)
class Replayed:
    """One letter replayed from its cassette through the whole pipeline."""

    outcome: LetterOutcome
    files: dict[str, bytes]  # every file the run wrote into its (empty) output folder
    usage: Usage  # the client's tokens
    recorded: int  # interactions in the cassette
    played: int  # ... of them requested (each at most once)

    def write(self, folder: Path) -> Path:
        """The run's files written into ``folder``; returns it."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (folder / name).write_bytes(data)
        return folder


def _replay_one(year: int) -> Replayed:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with replayed_client(CASSETTES / f"{year}.yaml") as (client, played):
            [outcome] = run_paths([LETTERS / f"{year}.txt"], out, client, OPTIONS)
            recorded, count = len(played), played.play_count
        files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
    return Replayed(outcome, files, client.usage, recorded, count)


def replay_letter(year: int) -> Replayed:
    """``cassettes/<year>.yaml`` replayed through the pipeline (once per test run)."""
    return once(f"cassette-replay-{year}", lambda: _replay_one(year))


def replay_letters(out: Path, years: tuple[int, ...] = (1977, 1996)) -> Path:
    """``out`` holding the files of ``years`` enriched from their cassettes; returns ``out``."""
    for year in years:
        replay_letter(year).write(out)
    return out
