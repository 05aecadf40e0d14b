"""Where the test suite's time goes: per file and per test, from pytest's JUnit XML.

Run the suite with ``--junitxml`` (on the machine to be described), then summarise it; two
files print side by side (before, after), matched by test file:

    python -m pytest -q --junitxml=after.xml
    python bench/suite_durations.py before.xml after.xml [--top 40]

``--write-slow tests/slow_tests.txt --over 0.5`` writes the ids of the tests of the (last) run
that took at least that many seconds: ``tests/conftest.py`` marks them ``slow``, which the inner
loop leaves out (docs/development.md).  Measure on an idle machine, then write the list.

Each test's time is its setup, call and teardown as pytest measured them (a module-scoped
fixture counts against the first test that uses it).  Under pytest-xdist the times are per
worker, so their sum is more than the wall time; the wall time is the suite's own line.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def node_id(classname: str, name: str) -> str:
    """pytest's id of a test from JUnit's ``classname`` (``tests.test_x`` or
    ``tests.test_x.TestClass``) and ``name``."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        if (ROOT / Path(*parts[:i])).with_suffix(".py").is_file():
            return "::".join(["/".join(parts[:i]) + ".py", *parts[i:], name])
    return f"{classname}::{name}"


def read(path: Path) -> tuple[dict[str, float], dict[str, float], float, int]:
    """(seconds by test id, seconds by test file, the suite's reported time, tests run)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    by_test: dict[str, float] = {}
    by_file: dict[str, float] = collections.defaultdict(float)
    count = 0
    for case in root.iter("testcase"):
        if case.find("skipped") is not None or not case.get("classname"):
            continue  # skipped, or the entry of an interrupted run
        module = case.get("classname", "")
        name = node_id(module, case.get("name", ""))
        seconds = float(case.get("time", 0.0))
        by_test[name] = seconds
        by_file[module.split(".")[-1] if module.startswith("tests.") else module] += seconds
        count += 1
    wall = sum(float(s.get("time", 0.0)) for s in suites)
    return by_test, dict(by_file), wall, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "xml", nargs="+", type=Path, help="JUnit XML of one run, or two: before after"
    )
    parser.add_argument("--top", type=int, default=40, help="slowest tests to list (default 40)")
    parser.add_argument("--files", type=int, default=25, help="slowest files to list (default 25)")
    parser.add_argument("--write-slow", type=Path, help="write the ids of the slow tests here")
    parser.add_argument("--over", type=float, default=0.5, help="slow: at least this (s)")
    args = parser.parse_args(argv)
    runs = [read(p) for p in args.xml[:2]]
    names = [p.name for p in args.xml[:2]]
    for (_, _, wall, count), name in zip(runs, names, strict=True):
        total = sum(runs[names.index(name)][1].values())
        print(
            f"{name}: {count} tests run, suite time {wall:.0f} s, sum of test times {total:.0f} s"
        )
    last = runs[-1]
    print(f"\nslowest files (by {names[-1]})")
    header = "  ".join(f"{n:>14}" for n in names)
    print(f"{header}  file")
    for file, _ in sorted(last[1].items(), key=lambda kv: -kv[1])[: args.files]:
        cells = "  ".join(f"{r[1].get(file, 0.0):>13.1f}s" for r in runs)
        print(f"{cells}  {file}")
    first = runs[0]
    print(f"\nslowest tests (by {names[0]})")
    print(f"{header}  test")
    for test, _ in sorted(first[0].items(), key=lambda kv: -kv[1])[: args.top]:
        cells = "  ".join(f"{r[0][test]:>13.2f}s" if test in r[0] else f"{'-':>14}" for r in runs)
        print(f"{cells}  {test}")
    if args.write_slow:
        slow = sorted(t for t, seconds in last[0].items() if seconds >= args.over)
        head = (
            f"# tests that took >= {args.over} s in {names[-1]} (bench/suite_durations.py "
            "--write-slow): tests/conftest.py marks them slow; the inner loop leaves them out\n"
        )
        args.write_slow.write_text(head + "".join(f"{t}\n" for t in slow), encoding="utf-8")
        print(f"\n{len(slow)} slow test id(s) written to {args.write_slow}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
