"""How fast the review page opens on a whole enriched corpus, and how fast a decision is stored.

The folder: the recorded letters (``cassettes/YYYY.yaml``, all ten unless ``--years``)
enriched by replaying their cassettes (no model, no network), then copied under other years
(chunk ids, years and file names rewritten) until it holds at least ``--chunks`` chunks and
``--decisions`` decisions: the size of the whole corpus enriched.  ``--folder DIR`` keeps it
for the next run (a letter already there is not replayed again; copies are added only while
the folder is short).

Timed, each ``--rounds`` + 1 times, in this process:

* **open (server)**: from constructing :class:`~letterchunk.review.server.ReviewServer` (the
  queue is read from the folder, or from the queue kept beside it) to the page and
  ``/api/queue`` fully received over HTTP; the first round starts with no queue kept (the
  first ``review`` of a folder just enriched), the other ``--rounds`` with the kept one;
* **open (browser)**, when chromium and chromedriver are here: from the browser asked to load
  the page's URL to the page drawn (``body[data-ready=yes]``: the queue parsed, the list and
  the first decision drawn), on a server already started; the sum of both is the open time
  (the validator's warnings, computed in a process of their own from the queue's first
  request on, are let finish before the next round);
* **decision**: one ``POST /api/decide`` round trip (accept, then the next item), over a kept
  connection as the page's fetch does, ``--decisions-timed`` times once the validator's
  warnings are computed (a quarter as many before, while its process runs): the line is
  appended to ``reviews.jsonl`` under the file lock and fsynced before the answer.

Targets: open <= 2 s, decision <= 50 ms (2 cores).  Printed: the folder's size, the queue's
JSON size, the median and the largest of each.

    python bench/review_bench.py [--folder /tmp/review-corpus] [--rounds 3] [--no-browser]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from letterchunk.review.queue import build_queue  # noqa: E402
from letterchunk.review.queuecache import CACHE_FILE  # noqa: E402
from letterchunk.review.records import REVIEWS_FILE  # noqa: E402
from letterchunk.review.server import ReviewServer  # noqa: E402

YEARS = (1977, 1978, 1982, 1987, 1991, 1995, 1996, 2009, 2016, 2019)
OPEN_TARGET_S, DECISION_TARGET_S = 2.0, 0.050
CPU_PER_DECISION: list[float] = []  # CPU s of one round trip, client and server (one process)


def _replayed(folder: Path, years: tuple[int, ...]) -> None:
    """Replay each of ``years`` whose chunk file is not in ``folder`` yet (a killed build
    resumes where it stopped)."""
    from replayed import replay_letters  # the tests' helper: cassettes through the pipeline

    for year in years:
        if not (folder / f"{year}.jsonl").is_file():
            print(f"replaying {year} into {folder} ...", flush=True)
            replay_letters(folder, (year,))


def _copy_letter(folder: Path, year: int, new: int) -> None:
    """``year``'s files again as the letter ``new`` (ids, years and names rewritten)."""
    old, now = f"{year}-", f"{new}-"
    for suffix in (".jsonl", ".evidence.jsonl", ".report.jsonl"):
        source = folder / f"{year}{suffix}"
        if not source.is_file():
            continue
        lines = []
        for line in source.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            row["chunk_id"] = str(row["chunk_id"]).replace(old, now, 1)
            meta = row.get("metadata")
            if isinstance(meta, dict):
                meta["letter_year"] = new
                meta["source_file"] = f"{new}_cleaned.txt"
                if meta.get("parent_chunk_id"):
                    meta["parent_chunk_id"] = meta["parent_chunk_id"].replace(old, now, 1)
                meta["child_chunk_ids"] = [
                    c.replace(old, now, 1) for c in meta.get("child_chunk_ids") or []
                ]
            if "letter_year" in row:
                row["letter_year"] = new
            lines.append(json.dumps(row, ensure_ascii=False))
        (folder / f"{new}{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cleaned = folder / f"{year}_cleaned.txt"
    if cleaned.is_file():
        shutil.copyfile(cleaned, folder / f"{new}_cleaned.txt")


def build_folder(folder: Path, chunks: int, decisions: int, years: tuple[int, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _replayed(folder, years)
    new = 1900
    while True:
        queue = build_queue(folder)
        if len(queue.chunks) >= chunks and len(queue.items) >= decisions:
            return
        for year in years:
            while new in YEARS:
                new += 1
            _copy_letter(folder, year, new)
            new += 1


def _get(conn: http.client.HTTPConnection, server: ReviewServer, path: str) -> bytes:
    headers = {"Host": f"127.0.0.1:{server.port}", "X-Review-Token": server.token}
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200, (path, resp.status, body[:200])
    return body


def open_server(folder: Path) -> tuple[float, float, int, ReviewServer]:
    """(wall s, CPU s of this process, queue bytes, the server)."""
    start, cpu = time.perf_counter(), time.process_time()
    server = ReviewServer(folder, reviewer="bench").start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    _get(conn, server, f"/?t={server.token}")
    size = len(_get(conn, server, "/api/queue"))
    conn.close()
    return time.perf_counter() - start, time.process_time() - cpu, size, server


def _driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync"
    ).split():
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='review-bench-')}")
    return webdriver.Chrome(service=Service(driver), options=options)


def open_browser(driver, server: ReviewServer) -> float:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    start = time.perf_counter()
    driver.get(server.url)
    WebDriverWait(driver, 60, poll_frequency=0.01).until(
        lambda d: d.execute_script("return document.body.getAttribute('data-ready')") == "yes"
    )
    return time.perf_counter() - start


def decisions(server: ReviewServer, count: int, first: int = 0) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "X-Review-Token": server.token,
        "Content-Type": "application/json",
        "Origin": f"http://127.0.0.1:{server.port}",
    }
    took = []
    cpu = time.process_time()
    for n in range(first, first + count):
        body = json.dumps({"item": n, "decision": "accept"}).encode()  # one send, as fetch
        start = time.perf_counter()
        conn.request("POST", "/api/decide", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        took.append(time.perf_counter() - start)
        assert resp.status == 200
    conn.close()
    CPU_PER_DECISION.append((time.process_time() - cpu) / count)
    return took


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folder", type=Path, help="keep the built folder here (reused)")
    ap.add_argument("--chunks", type=int, default=900)
    ap.add_argument("--decisions", type=int, default=15000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decisions-timed", type=int, default=200)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument(
        "--years", type=int, nargs="+", default=list(YEARS), help="the recorded letters to use"
    )
    args = ap.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="review-bench-")) / "out"
    build_folder(folder, args.chunks, args.decisions, tuple(args.years))
    (folder / REVIEWS_FILE).unlink(missing_ok=True)
    queue = build_queue(folder)
    kinds: dict[str, int] = {}
    for item in queue.items:
        kinds[item.kind] = kinds.get(item.kind, 0) + 1
    print(f"folder: {folder}: {len(queue.letters)} letters, {len(queue.chunks)} chunks, ")
    print(f"  {len(queue.items)} decisions before the validator's warnings ({kinds})")
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")

    driver = None if args.no_browser else _driver()
    # the first start reads the folder (no cache kept yet); the later ones the kept queue
    (folder / CACHE_FILE).unlink(missing_ok=True)
    server_s, server_cpu, browser_s, size = [], [], [], 0
    for _ in range(args.rounds + 1):
        took, cpu, size, server = open_server(folder)
        server_s.append(took)
        server_cpu.append(cpu)
        if driver is not None:
            browser_s.append(open_browser(driver, server))
        server.warnings_json()  # the validator started with the queue: let it finish first
        server.close()
    print(f"queue JSON: {size / 1e6:.2f} MB")
    opens = (("first start, no cache kept", slice(0, 1)), ("later starts, cache", slice(1, None)))
    for name, rounds in opens:
        print(
            f"open, {name} (server: read the folder, serve page + queue): {_ms(server_s[rounds])}"
        )
        print(f"  its CPU time (this process): {_ms(server_cpu[rounds])}")
        if browser_s:
            print(f"open, {name} (browser: load, parse, draw): {_ms(browser_s[rounds])}")
            total = [a + b for a, b in zip(server_s[rounds], browser_s[rounds], strict=True)]
            verdict = "meets" if max(total) <= OPEN_TARGET_S else "MISSES"
            print(f"open, {name}, total: {_ms(total)}; {verdict} the {OPEN_TARGET_S:.0f} s target")
    if not browser_s:
        print("open (browser): not measured (no chromium/chromedriver or --no-browser)")
    if driver is not None:
        driver.quit()

    with ReviewServer(folder, reviewer="bench") as server:
        server.start_warnings()  # as the page's first /api/queue does
        busy = decisions(server, args.decisions_timed // 4)
        server.warnings_json()  # waits for the validator's process to finish
        took = decisions(server, args.decisions_timed, first=len(busy))
    print(f"decision POST while the validator's process runs ({len(busy)}): {_ms(busy)}")
    (folder / REVIEWS_FILE).unlink(missing_ok=True)
    p95 = sorted(took)[int(len(took) * 0.95) - 1]
    verdict = "meets" if p95 <= DECISION_TARGET_S else "MISSES"
    print(
        f"decision POST round trip ({len(took)}): {_ms(took)}, p95 {p95 * 1000:.1f} ms; "
        f"{verdict} the {DECISION_TARGET_S * 1000:.0f} ms target"
    )
    print(
        f"  CPU per round trip (client and server, this process): "
        f"{CPU_PER_DECISION[-1] * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
