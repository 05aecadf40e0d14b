"""Time letterchunk's segment + validate of the whole shipped corpus against chonkie.

Both run in this process over the same files, several repeats (best time counts):

* ours:    load_letters (read + clean + date, one letter ahead, as `letterchunk segment` reads
           a folder) -> segment_letter -> validate_letter (stage segmented, with the cleaned
           text as context, as `letterchunk validate` does)
* chonkie: read the file -> RecursiveChunker(tokenizer=<letterchunk.tokens.encoding()>,
           chunk_size=800).chunk(text)

The two run alternately, best of N each, timed by wall time (what a user waits for) and by CPU
time of all threads; the wall-time ratio is printed last.  Ours runs the tokenizer pass over a
letter in a worker thread (tiktoken releases the GIL) while Python finds the letter's blocks and
the next letter is cleaned, so its wall time is below its CPU time; chonkie runs in one thread.

A floor is printed too: one o200k pass over every cleaned letter, the least any tool that gives
every chunk an exact token count must spend.  chonkie's whole run costs about that much (it
encodes every split once and does little else), so ours/chonkie <= 1.0 means doing all of the
structure work (cleaning, blocks, tables, strict models, validation) in the time the tokenizer
alone hides.

Memoised counts never cross runs: before every timed run (untimed) each side's memos are
cleared -- letterchunk's (``count_tokens`` LRU, the last ``span_counter``, the
``numeric_cell`` LRU of block detection and table parsing) and chonkie's
(``RecursiveChunker._estimate_token_count`` LRU) -- so a repeat cannot reuse counts an
earlier repeat of the same texts left behind (with a small corpus either side's memo could
otherwise hold the whole corpus).  Memos used *within* one run stay: they are part of how each
tool works.

chonkie is a bench-only dependency: pip install -e '.[bench]'.  The last line printed is the
ratio ours/chonkie (target <= 1.0).

    python bench/segment_bench.py [--repeats 5] [LETTERS_DIR]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from letterchunk.text.clean import load_letter
from letterchunk.text.lines import numeric_cell
from letterchunk.text.segment import load_letters, segment_letter
from letterchunk.tokens import clear_memos, encoding

try:
    from letterchunk.contract.validate import LetterContext, validate_letter
except ImportError:  # validator not available: time segment only
    validate_letter = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]


def ours(paths: list[Path]) -> int:
    n = 0
    for _, letter in load_letters(paths):  # as `letterchunk segment` reads a folder
        chunks = segment_letter(letter)
        if validate_letter is not None:
            validate_letter(
                chunks, stage="segmented", context=LetterContext(cleaned_text=letter.text)
            )
        n += len(chunks)
    return n


def stages(paths: list[Path]) -> dict[str, float]:
    """CPU seconds per stage of ours over the corpus (one pass, for the breakdown line)."""
    out = {"load+clean": 0.0, "segment": 0.0, "validate": 0.0}
    for p in paths:
        t0 = time.process_time()
        letter = load_letter(p)
        t1 = time.process_time()
        chunks = segment_letter(letter)
        t2 = time.process_time()
        if validate_letter is not None:
            validate_letter(
                chunks, stage="segmented", context=LetterContext(cleaned_text=letter.text)
            )
        t3 = time.process_time()
        out["load+clean"] += t1 - t0
        out["segment"] += t2 - t1
        out["validate"] += t3 - t2
    return out


def theirs(paths: list[Path], chunker) -> int:
    n = 0
    for p in paths:
        n += len(chunker.chunk(p.read_text(encoding="utf-8")))
    return n


def interleaved(fa, fb, repeats: int, reset=lambda: None) -> tuple[dict, dict]:
    """Run ``fa`` and ``fb`` alternately so both see the same machine load; best of each.

    Both CPU time (``time.process_time``: robust on a shared machine) and wall time are kept.
    ``reset`` runs, untimed, before every timed run.
    """
    res = {"a": {"cpu": [], "wall": [], "n": 0}, "b": {"cpu": [], "wall": [], "n": 0}}
    for _ in range(repeats):
        for key, fn in (("a", fa), ("b", fb)):
            reset()
            c0, w0 = time.process_time(), time.perf_counter()
            res[key]["n"] = fn()
            res[key]["cpu"].append(time.process_time() - c0)
            res[key]["wall"].append(time.perf_counter() - w0)
    return res["a"], res["b"]


def main() -> int:
    logging.getLogger("letterchunk").setLevel(logging.ERROR)  # e.g. the 2018 file-name warning
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("letters", nargs="?", default=str(ROOT / "corpus" / "letters"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    try:
        from chonkie import RecursiveChunker
    except ImportError:
        print("chonkie is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    paths = sorted(Path(args.letters).glob("*.txt"))
    if not paths:
        print(f"no letters (*.txt) in {args.letters}; pass a folder of letters", file=sys.stderr)
        return 2
    enc = encoding()
    chunker = RecursiveChunker(tokenizer=enc, chunk_size=800)
    # warm both (tokenizer load, regex compilation) before timing
    ours(paths[:2])
    theirs(paths[:2], chunker)

    def reset() -> None:
        clear_memos()
        numeric_cell.cache_clear()
        chonkie_memo = getattr(RecursiveChunker._estimate_token_count, "cache_clear", None)
        if chonkie_memo is not None:
            chonkie_memo()

    a, b = interleaved(lambda: ours(paths), lambda: theirs(paths, chunker), args.repeats, reset)
    what = "segment+validate" if validate_letter is not None else "segment only (no validator)"
    print(f"letters: {len(paths)}, repeats: {args.repeats} (best of each, run alternately)")
    print(
        f"ours    ({what}): cpu {min(a['cpu']):.3f} s, wall {min(a['wall']):.3f} s, {a['n']} chunks"
    )
    print(
        f"chonkie (RecursiveChunker 800): cpu {min(b['cpu']):.3f} s, "
        f"wall {min(b['wall']):.3f} s, {b['n']} chunks"
    )
    texts = [load_letter(p).text for p in paths]
    floor = []
    for _ in range(args.repeats):
        w0 = time.perf_counter()
        for t in texts:
            enc.encode_ordinary(t)
        floor.append(time.perf_counter() - w0)
    print(
        f"floor (one o200k pass over the cleaned letters): wall {min(floor):.3f} s "
        f"= {min(floor) / min(b['wall']):.2f} of chonkie's wall time"
    )
    reset()
    st = stages(paths)
    print("ours by stage (cpu): " + ", ".join(f"{k} {v:.3f} s" for k, v in st.items()))
    print(f"ratio ours/chonkie (cpu, all threads): {min(a['cpu']) / min(b['cpu']):.2f}")
    print(f"ratio ours/chonkie (wall): {min(a['wall']) / min(b['wall']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
