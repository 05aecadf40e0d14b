"""The 1977 and 1996 letters enriched by replaying their cassettes (no model, no network).

Shared by the retrieval tests, which need real enriched output (long chunks, Tier-3 tables with
parents, real summaries and entities) rather than the hand-built letter of ``conftest``.

Under pytest-xdist each worker runs the module fixtures of the tests it is given, so the same
letters would be replayed once a worker: given ``shared`` (:func:`shared_folder`), the first
worker to ask replays them into a folder all workers share, under a lock, and every caller gets
a copy of that folder's files, the same files a replay of its own would write.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from letterchunk.llm.replay import replayed_client
from letterchunk.runner.pipeline import RunOptions, run_paths

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The folder the xdist workers of this test run share (their base folders' parent, which
    pytest removes with its other old runs); None without xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return tmp_path_factory.getbasetemp().parent


def _replay(out: Path, years: tuple[int, ...]) -> None:
    for year in years:
        with replayed_client(ROOT / "cassettes" / f"{year}.yaml") as (client, _):
            run_paths(
                [LETTERS / f"{year}.txt"],
                out,
                client,
                RunOptions(workers=1, on_failure="skip", source_label="cassette"),
            )


def replay_letters(
    out: Path, years: tuple[int, ...] = (1977, 1996), shared: Path | None = None
) -> Path:
    """Enrich ``years`` into ``out`` from ``cassettes/<year>.yaml``; returns ``out``.  With
    ``shared``, the replay is done once for the whole test run (see the module doc)."""
    if shared is None:
        _replay(out, years)
        return out
    done = shared / f"replayed-{'-'.join(map(str, years))}"
    with open(shared / f"{done.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_dir():
            partial = done.with_name(done.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            _replay(partial, years)
            partial.rename(done)  # whole or absent: a worker killed mid-replay leaves .partial
    shutil.copytree(done, out, dirs_exist_ok=True)
    return out
