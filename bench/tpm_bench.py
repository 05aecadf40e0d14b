"""How much of a tokens-per-minute limit does `letterchunk run` actually use?

Starts tests/fake_openai.py on 127.0.0.1 with a fixed latency per request and a TPM limit it
enforces like the hosted API (a request is admitted only if the tokens charged in the rolling
window plus its estimate, prompt + max_tokens, fit; otherwise HTTP 429 with Retry-After; the
charge is corrected to the served usage when the answer is sent).  Then runs the real CLI as a
subprocess on a few letters with --tpm and --concurrency, answers from tests/rich_answers.py
(grounded, valid enrichments), and measures from the server's own records:

* utilisation = mean, over every window-long interval inside the run (sampled every 50 ms), of
  (tokens served in that interval) / limit.  The headline figure; target >= 0.9.
* whole run   = tokens served / (limit x elapsed / window), first admission to last answer.
* 429s the server sent, failed chunks (target 0), exit code.

Scaling: a real minute would make the bench run for many minutes, so the window is shortened
(default 10 s) and the limit is given per window; the CLI's limiter gets the same window through
LETTERCHUNK_RATE_WINDOW_S.  Everything the limiter reasons about keeps its proportions: a
10-second window with 60,000 tokens is 360,000 TPM at 6x speed, and the 0.15 s latency stands
for 0.9 s at real speed.  Only the wall clock shrinks.

    python bench/tpm_bench.py [--window-s 10] [--limit 60000] [--latency-s 0.15]
                              [--concurrency 3] [--letters 1977 1978 ...] [--json]

The last line is ``tpm_utilisation=<x> failed_chunks=<n> http_429=<n>``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the test helpers import each other by bare name (as pytest's rootdir-relative imports do):
# import them the same way, or the server's Reply class and the answers' would be two classes
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402
from rich_answers import rich_answer  # noqa: E402

DEFAULT_LETTERS = [1977, 1978, 1979, 1980, 1981, 1982, 1983, 1984, 1985, 1986, 1987]


class MeteredServer(FakeOpenAI):
    """FakeOpenAI that remembers when each admitted request was charged and what it cost."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.charges: list[tuple[float, int]] = []  # (admitted at, tokens served), monotonic
        self.answered_at: list[float] = []
        self._meter = threading.Lock()

    def _charge(self, slot, tokens: int) -> None:
        super()._charge(slot, tokens)
        if slot is not None and tokens:
            with self._meter:
                self.charges.append((slot[0], tokens))
                self.answered_at.append(time.monotonic())


def utilisation(
    charges: list[tuple[float, int]], window: float, limit: int, step: float = 0.05
) -> dict:
    """Mean/min/max share of ``limit`` used over every window-long interval inside the run."""
    if not charges:
        return {"mean": 0.0, "min": 0.0, "max": 0.0, "intervals": 0, "timeline": []}
    charges = sorted(charges)
    times = [t for t, _ in charges]
    prefix = [0]
    for _, tok in charges:
        prefix.append(prefix[-1] + tok)
    start, last = times[0], times[-1]
    shares = []
    t = start
    while t + window <= last + 1e-9 or not shares:
        lo = bisect.bisect_left(times, t)
        hi = bisect.bisect_left(times, t + window)
        shares.append((prefix[hi] - prefix[lo]) / limit)
        t += step
        if t + window > last and shares:
            break
    every = max(1, int(round(window / step / 2)))  # a sample every half window, for the timeline
    return {
        "mean": sum(shares) / len(shares),
        "min": min(shares),
        "max": max(shares),
        "intervals": len(shares),
        "timeline": [round(x, 3) for x in shares[::every]],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--window-s", type=float, default=10.0, help="rate window standing for one minute"
    )
    ap.add_argument("--limit", type=int, default=60_000, help="tokens allowed per window")
    ap.add_argument(
        "--latency-s", type=float, default=0.15, help="fixed server latency per request"
    )
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--letters", type=int, nargs="+", default=DEFAULT_LETTERS)
    ap.add_argument(
        "--no-limiter",
        action="store_true",
        help="run without --tpm (shows what the limiter saves: 429s and retries)",
    )
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = ap.parse_args()

    paths = [str(ROOT / "corpus" / "letters" / f"{y}.txt") for y in args.letters]
    with (
        tempfile.TemporaryDirectory() as tmp,
        MeteredServer(
            rich_answer, latency_s=args.latency_s, tpm_limit=args.limit, window_s=args.window_s
        ) as server,
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LETTERCHUNK_"))}
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="sk-bench",
            LETTERCHUNK_MODEL="fake-model",
            LETTERCHUNK_RATE_WINDOW_S=str(args.window_s),
            LETTERCHUNK_TRANSPORT_RETRIES="8",
        )
        cmd = [
            sys.executable,
            "-m",
            "letterchunk",
            "run",
            *paths,
            "--out",
            f"{tmp}/out",
            "--cache",
            "off",
            "--concurrency",
            str(args.concurrency),
            "--on-failure",
            "skip",
            "--quiet",
        ]
        if not args.no_limiter:
            cmd += ["--tpm", str(args.limit)]
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - started
        run = {}
        run_file = Path(tmp) / "out" / "run.json"
        if run_file.is_file():
            run = json.loads(run_file.read_text())
    charges = server.charges
    served = sum(tok for _, tok in charges)
    util = utilisation(charges, args.window_s, args.limit)
    elapsed = (max(server.answered_at) - min(t for t, _ in charges)) if charges else 0.0
    whole = served / (args.limit * elapsed / args.window_s) if elapsed else 0.0
    totals = run.get("totals", {})
    failed = totals.get("failed_chunks", None)
    if failed is None or proc.returncode not in (0, 1):
        failed = "unknown"
    print(
        f"server: {args.limit} tokens per {args.window_s:g} s window "
        f"(= {int(args.limit * 60 / args.window_s):,} "
        f"TPM at {60 / args.window_s:g}x speed), latency {args.latency_s} s; client: --concurrency "
        f"{args.concurrency}" + ("" if args.no_limiter else f" --tpm {args.limit}")
    )
    print(
        f"letters {' '.join(map(str, args.letters))}: {totals.get('chunks', '?')} chunks, "
        f"{len(charges)} answered requests, {served:,} tokens served, exit code {proc.returncode}, "
        f"{wall:.1f} s wall (limited part {elapsed:.1f} s)"
    )
    print(
        f"utilisation over {util['intervals']} window-long intervals: mean {util['mean']:.3f}, "
        f"min {util['min']:.3f}, max {util['max']:.3f}; whole run {whole:.3f}"
    )
    print(
        "timeline (share of the limit in the window starting every half window): "
        + " ".join(f"{x:.2f}" for x in util["timeline"])
    )
    if proc.returncode not in (0, 1):
        print(proc.stderr[-3000:], file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "utilisation": util,
                    "whole_run": whole,
                    "tokens_served": served,
                    "requests": len(charges),
                    "http_429": server.rate_limited_count,
                    "failed_chunks": failed,
                    "exit_code": proc.returncode,
                    "wall_s": wall,
                    "limiter": run.get("limits"),
                },
                indent=2,
            )
        )
    print(
        f"tpm_utilisation={util['mean']:.3f} failed_chunks={failed} "
        f"http_429={server.rate_limited_count}"
    )
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
