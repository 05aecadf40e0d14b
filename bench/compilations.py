"""Compilation splitter figures: per generated compilation format (tests/compilations.py: the
shared 1960-68 compilation cut into pages differently, letterheads stripped, dates rewritten in
each common form, running headers/footers of other wordings, annual letters concatenated; and
formats composed feature by feature from the shared letters' text: letters announced by a
"YYYY Letter" line, a letterhead or a title in capitals and no salutation, signed with a date in
any common form on or below the signature line, an undated letter, page furniture on every
page, alone and mixed), letters found / expected, letters dated right (an undated letter:
unknown date with a note and its heading's year), and running lines left inside letters.

    python bench/compilations.py
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import compilations as gen  # noqa: E402
from letterchunk.text.compilation import load_document  # noqa: E402


def measure(case: gen.Case) -> tuple[int, int, int, int]:
    """(letters found, letters expected, dated right in place, running lines left inside)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{case.name}.txt"
        path.write_text(case.text, encoding="utf-8")
        letters = load_document(path)
    dates = [x.date for x in letters]
    right = sum(a == b for a, b in zip(dates, case.dates, strict=False))
    if case.years is not None:  # an undated letter is right with its heading's year only
        years = [x.year for x in letters]
        right = sum(
            a == b and y == z
            for a, b, y, z in zip(dates, case.dates, years, case.years, strict=False)
        )
    if len(letters) != len(case.dates):
        right = 0  # a letter missed or cut in two shifts every date after it
    running = set(case.running)
    left = sum(ln.strip() in running for x in letters for ln in x.text.split("\n"))
    return len(letters), len(case.dates), right, left


def main() -> int:
    if not gen.PARTNERSHIP.is_file():
        print(f"{gen.PARTNERSHIP} absent: the shared data sits at ../shared", file=sys.stderr)
        return 1
    logging.getLogger("letterchunk").setLevel(logging.ERROR)
    print(f"{'format':24} {'found/expected':>15} {'dated right':>12} {'running left':>13}")
    totals = [0, 0, 0, 0]
    for case in [*gen.cases(), *gen.feature_cases()]:
        row = measure(case)
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        print(f"{case.name:24} {row[0]:>7}/{row[1]:<7} {row[2]:>12} {row[3]:>13}")
    print(f"{'all':24} {totals[0]:>7}/{totals[1]:<7} {totals[2]:>12} {totals[3]:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
