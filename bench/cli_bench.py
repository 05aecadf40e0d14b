"""CPU time of one `letterchunk search --bm25` process (start-up included): this checkout
against a baseline checkout's ``src`` (e.g. main's), side by side in one run.

A short query command is mostly start-up: the interpreter, the modules the command imports, and
whatever its first query loads (a tokenizer, numpy).  Each side segments nothing itself: the
letters are segmented once (``letterchunk segment --tier2``, this checkout; segmentation bytes
are the same on both sides, see bench/fingerprint.py) and each side indexes them with its own
code (``letterchunk index --no-dense``: an index is read by the code that wrote it).  Then the
questions of ``bench/retrieval_questions.jsonl`` (the first ``--queries``) are asked as
``python -m letterchunk search --db INDEX --bm25 QUESTION``, ``--rounds`` times each, the two
sides alternating query by query so that load on the machine falls on both alike.

CPU time is user + system of the finished child processes, from the OS
(``getrusage(RUSAGE_CHILDREN)``), per query process.  Printed: the mean and the largest per
side; the CPU time of each side's one ``index`` process (the index keeps the token counts a
search's windows need, so building it costs more); the target (<= 0.3 s CPU per query
process); and whether the two sides printed the same bytes for every query (they must: the
speed-up changes no output).

    python bench/cli_bench.py [--baseline-src /path/to/main/src] [--letters 1977 1985 1996]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU_S = 0.3


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(src: Path, *argv: str) -> tuple[bytes, float]:
    """(stdout, CPU s) of one ``python -m letterchunk`` process importing letterchunk from
    ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = _child_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "letterchunk", *argv],
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    return done.stdout, _child_cpu() - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", type=Path, help="the other checkout's src folder")
    ap.add_argument("--letters", nargs="+", default=["1977", "1985", "1996"])
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sides = {"this checkout": ROOT / "src"}
    if args.baseline_src:
        sides["baseline"] = args.baseline_src.resolve()
    lines = (ROOT / "bench" / "retrieval_questions.jsonl").read_text("utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines[: args.queries]]
    with tempfile.TemporaryDirectory() as tmp:
        seg = Path(tmp) / "seg"
        letters = [str(ROOT / "corpus" / "letters" / f"{y}.txt") for y in args.letters]
        _cli(sides["this checkout"], "segment", *letters, "--out", str(seg), "--tier2", "-q")
        dbs, index_cpu = {}, {}
        for n, (side, src) in enumerate(sides.items()):
            dbs[side] = str(Path(tmp) / f"index{n}.sqlite")
            _, index_cpu[side] = _cli(src, "index", str(seg), "--db", dbs[side], "--no-dense", "-q")
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        same = True
        for _ in range(args.rounds):
            for question in questions:
                outputs = set()
                for side, src in sides.items():
                    out, seconds = _cli(src, "search", "--db", dbs[side], "--bm25", question)
                    cpu[side].append(seconds)
                    outputs.add(out)
                same = same and len(outputs) == 1
    print(
        f"letters {' '.join(args.letters)}; {len(questions)} questions x {args.rounds} rounds "
        "= one `letterchunk search --bm25` process each"
    )
    for side, times in cpu.items():
        print(
            f"{side:14s} CPU per query process: mean {sum(times) / len(times):.3f} s, "
            f"max {max(times):.3f} s; the index: {index_cpu[side]:.2f} s  ({sides[side]})"
        )
    print(f"target: <= {TARGET_CPU_S} s CPU per query process")
    if len(sides) > 1:
        print(f"same output on both sides for every query: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
