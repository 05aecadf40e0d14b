"""Time per stage against input size: does each stage grow linearly with the letter?

    python bench/scaling.py [--letter corpus/letters/1977.txt] [--sizes 1,2,4,8]

Builds two inputs from one letter, each repeated 1x, 2x, 4x, 8x (``--sizes``):

* ``lines``: the letter with its blank lines removed, so every paragraph runs into the next
  (the cleaner finds no paragraph break; a whole section is one block);
* ``one``: the letter as one paragraph, every run of whitespace one space.

and times, in this process, the stages a letter goes through before the first request:

* ``clean``     read, normalise and date the file (``load_document``, profile ``letter``, so a
                repeated letter is not read as a compilation of several);
* ``sentences`` ``sentence_spans`` over the whole cleaned text (the splitter alone);
* ``segment``   ``segment_letter`` (blocks, bounds, token counts);
* ``validate``  ``validate_letter`` at stage ``segmented``;
* ``prompts``   what ``runner.prepare.check_prompt_sizes`` does before a run's first request:
                every chunk's messages (concept and rule candidates) and their size.

Each cell is the best of ``--repeats`` wall times in seconds, memoised token counts cleared
before each; beside each size the ratio to the size before it (2.0 per doubling is linear,
4.0 quadratic).  The figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from letterchunk.contract.validate import validate_letter
from letterchunk.enrich import build_messages
from letterchunk.llm.client import estimate_tokens
from letterchunk.runner.prepare import letter_job
from letterchunk.text.clean import CleanedLetter
from letterchunk.text.compilation import load_document
from letterchunk.text.segment import segment_letter
from letterchunk.text.sentences import sentence_spans
from letterchunk.tokens import clear_memos, encoding

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("clean", "sentences", "segment", "validate", "prompts")


def shapes(text: str, k: int) -> dict[str, str]:
    """The two inputs of ``k`` copies: paragraphs without blank lines, and one paragraph."""
    lines = re.sub(r"\n\s*\n+", "\n", text.strip())
    one = re.sub(r"\s+", " ", text.strip())
    return {"lines": "\n".join([lines] * k) + "\n", "one": " ".join([one] * k) + "\n"}


def prompts(letter: CleanedLetter, chunks: list) -> None:
    job = letter_job(letter.key, letter.text, chunks, grounded_choices=False)
    for chunk in chunks:
        estimate_tokens({"messages": build_messages(chunk, job.prompt), "max_tokens": 1024})


def time_stages(path: Path, repeats: int) -> dict[str, float]:
    best = dict.fromkeys(STAGES, float("inf"))
    for _ in range(repeats):
        clear_memos()
        took: dict[str, float] = {}
        start = time.perf_counter()
        letter = load_document(path, "letter")[0]
        took["clean"], start = time.perf_counter() - start, time.perf_counter()
        sentence_spans(letter.text)
        took["sentences"], start = time.perf_counter() - start, time.perf_counter()
        chunks = segment_letter(letter)
        took["segment"], start = time.perf_counter() - start, time.perf_counter()
        validate_letter(chunks)
        took["validate"], start = time.perf_counter() - start, time.perf_counter()
        prompts(letter, chunks)
        took["prompts"] = time.perf_counter() - start
        best = {name: min(best[name], took[name]) for name in STAGES}
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--letter", type=Path, default=ROOT / "corpus" / "letters" / "1977.txt")
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    text = args.letter.read_text(encoding="utf-8")
    encoding()  # the tokenizer's one-time load is not a stage's time
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("lines", "one"):
            rows: dict[int, dict[str, float]] = {}
            for k in sizes:
                path = Path(tmp) / shape / str(k) / args.letter.name
                path.parent.mkdir(parents=True)
                path.write_text(shapes(text, k)[shape], encoding="utf-8")
                if not rows:  # untimed warm-up: first imports, regex compiles, caches
                    time_stages(path, 1)
                rows[k] = time_stages(path, args.repeats)
                print(f"  {shape} {k}x ({path.stat().st_size:,} bytes) done", file=sys.stderr)
            print(f"\n{shape}: {args.letter.name} x size (seconds, ratio to the size before)")
            print("stage".ljust(10) + "".join(f"{k}x".rjust(16) for k in sizes))
            for stage in STAGES:
                cells = []
                for i, k in enumerate(sizes):
                    t = rows[k][stage]
                    prev = rows[sizes[i - 1]][stage] if i else 0.0
                    ratio = f" ({t / prev:.1f}x)" if i and prev > 0 else ""
                    cells.append(f"{t:.3f}{ratio}".rjust(16))
                print(stage.ljust(10) + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
