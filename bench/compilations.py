"""Compilation splitter figures: per generated compilation format (tests/compilations.py: the
shared 1960-68 compilation cut into pages differently, letterheads stripped, dates rewritten in
each common form, running headers/footers of other wordings, annual letters concatenated; and
formats composed feature by feature from the shared letters' text: letters announced by a
"YYYY Letter" line, a letterhead or a title in capitals and no salutation, signed with a date in
any common form on or below the signature line, an undated letter, page furniture on every
page, alone and mixed), letters found / expected, letters dated right (an undated letter:
unknown date with a note and its heading's year), and running lines left inside letters.

Given files (compilations or letters without a truth), it prints per file instead: letters
found, letters dated (a date, or an undated letter's year from its heading), and page lines
left: lines of the letters' text that recur, numbers aside, three times or more in the file
and carry a page's marks (the word page, "p. N", a web address, or a number alone) — what a
running footer left behind would be.  A running title without such marks is not counted.

    python bench/compilations.py [FILE ...]

"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import compilations as gen  # noqa: E402
from letterchunk.text.clean import UNKNOWN_DATE  # noqa: E402
from letterchunk.text.compilation import load_document  # noqa: E402

_PAGE_MARKS = re.compile(r"\bpage\b|\bp\.\s?\d|www\.|https?://|^[-–— ]*\d{1,3}[-–— ]*$", re.I)


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


def measure_file(path: Path) -> tuple[int, int, int]:
    """(letters found, dated, page lines left inside letters) of a real file."""
    letters = load_document(path)
    dated = sum(x.date != UNKNOWN_DATE or "heading" in (x.date_note or "") for x in letters)
    raw = path.read_text(encoding="utf-8")
    forms = Counter(_form(ln) for ln in raw.split("\n") if 0 < len(ln.strip()) <= 160)
    left = sum(
        forms[_form(ln)] >= 3 and _PAGE_MARKS.search(ln) is not None
        for x in letters
        for ln in x.text.split("\n")
        if 0 < len(ln.strip()) <= 160
    )
    return len(letters), dated, left


def _form(line: str) -> str:
    return " ".join(re.sub(r"\d+", "#", line).split())


def main() -> int:
    logging.getLogger("letterchunk").setLevel(logging.ERROR)
    if len(sys.argv) > 1:
        print(f"{'file':32} {'found':>6} {'dated':>6} {'page lines left':>16}")
        for name in sys.argv[1:]:
            found, dated, left = measure_file(Path(name))
            print(f"{Path(name).name[:32]:32} {found:>6} {dated:>6} {left:>16}")
        return 0
    if not gen.PARTNERSHIP.is_file():
        print(f"{gen.PARTNERSHIP} absent: the shared data sits at ../shared", file=sys.stderr)
        return 1
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
