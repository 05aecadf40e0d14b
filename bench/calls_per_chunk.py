"""LLM calls per chunk on the recorded letters, replayed from cassettes/ (no model, no network).

    python bench/calls_per_chunk.py            # every cassettes/YYYY.yaml
    python bench/calls_per_chunk.py 1977       # one letter

For each letter: chunks, LLM calls, calls per chunk, chunks answered by exactly one call, chunks
the repair loop re-asked, and tokens as the local server reported them when it was recorded.
A clean run is exactly 1 call per chunk; re-asks only happen for an answer that failed
validation.  Same replay rules as tests/test_cassettes.py (record mode none, body matching).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from letterchunk.llm.replay import replayed_client
from letterchunk.runner.pipeline import RunOptions, run_paths

ROOT = Path(__file__).resolve().parents[1]


def replay(year: int) -> tuple:
    with (
        tempfile.TemporaryDirectory() as out,
        replayed_client(ROOT / "cassettes" / f"{year}.yaml") as (client, cassette),
    ):
        [letter] = run_paths(
            [ROOT / "corpus" / "letters" / f"{year}.txt"],
            out,
            client,
            RunOptions(on_failure="skip", report=False),
        )
        unused = len(cassette) - cassette.play_count
    return letter, client.usage, unused


def main(argv: list[str]) -> int:
    years = [int(a) for a in argv] or sorted(
        int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml")
    )
    print(
        f"{'letter':>6} {'chunks':>6} {'calls':>5} {'calls/chunk':>11} {'one call':>8} "
        f"{'re-asked':>8} {'failed':>6} {'prompt tok':>10} {'compl tok':>9}"
    )
    bad = 0
    for year in years:
        letter, usage, unused = replay(year)
        calls = sum(o.calls for o in letter.outcomes)
        one = sum(1 for o in letter.outcomes if o.calls == 1)
        n = len(letter.outcomes)
        print(
            f"{year:>6} {n:>6} {calls:>5} {calls / n:>11.2f} {one:>8} {n - one:>8} "
            f"{len(letter.failed):>6} {usage.prompt_tokens:>10,} {usage.completion_tokens:>9,}"
        )
        bad += unused + len(letter.failed)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
