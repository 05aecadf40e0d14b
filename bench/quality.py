"""Boundary quality of letterchunk's Tier-1 chunks vs chonkie's RecursiveChunker (800 tokens).

Both chunk the same cleaned text of every shipped letter (chonkie's chunks carry start/end
offsets, so both are measured on one coordinate system).  Measured per chunker:

* headers at chunk start: share of section headers (found by letterchunk.text.blocks: header lines
  and table captions that open a section) whose first character is the first non-space
  character of some chunk;
* tables whole: share of table blocks (letterchunk.text.blocks) lying entirely inside one chunk;
* mid-sentence ends: share of chunks whose text ends mid-sentence, by the validator's rule
  (last paragraph is prose of 8+ words without terminal punctuation), and by a strict rule
  (the last character is not terminal punctuation, a closing quote/bracket, or a digit).

More lines, ours only (chonkie parses no tables): the share of tables named by their
caption or lead-in rather than a fallback ("<section> – table 2"), the share of table
columns with a heading rather than "Column N", the Tier-1 chunks over the size maximum, and
those under the minimum, each a flagged standalone exception.

The ground truth for headers and tables is letterchunk's own block detector, so the first two
figures measure how well each chunker respects the structure we detect, not detection itself.

``--per-letter`` prints instead, per letter, ours only: headers at a chunk start and tables whole
(to hold two commits side by side, run it with each commit's ``src`` on ``PYTHONPATH``).
``--misses`` lists instead each header not at a chunk start: the letter's year, the header and
why, read from the chunk that holds it (a short section merged over it, which way and why; a
header under a parent header, whose stack starts the chunk; or else the block before it).

    python bench/quality.py [LETTERS_DIR] [--misses | --per-letter]
"""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

from letterchunk.contract.predicates import ends_mid_sentence
from letterchunk.text.blocks import detect_blocks
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import T1_MAX, T1_MIN, segment_letter
from letterchunk.tokens import encoding

ROOT = Path(__file__).resolve().parents[1]
_FALLBACK_NAME = re.compile(r"(?:^|– )[Tt]able \d+$")  # "<section> – table 2", "Table 1"
_GENERIC_COLUMN = re.compile(r"Column \d+")
_STRICT_END = re.compile(r"[.?!:;\d%)\]\"'”’*=-]\s*$")
# a merge note of the segmenter: "Short section 'X' (158 tokens) merged forward: why."
_MERGE_NOTE = re.compile(
    r"Short (?P<what>section '(?P<title>.*?)'|untitled passage '.*?') \((?P<tokens>\d+) tokens\) "
    r"merged (?P<way>forward|backward): (?P<why>[^.]*)\."
)


def spans_ours(letter) -> list[tuple[int, int]]:
    return [
        (c.metadata.source_span.start_char, c.metadata.source_span.end_char_exclusive)
        for c in segment_letter(letter)
        if c.metadata.chunk_tier == 1
    ]


def spans_chonkie(chunker, text: str) -> list[tuple[int, int]]:
    out = []
    for c in chunker.chunk(text):
        s, e = c.start_index, c.end_index
        # trim whitespace so "starts at the header" is measured on visible text
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            out.append((s, e))
    return out


def _is_header(b) -> bool:
    return b.kind == "header" or (b.kind == "table" and bool(b.meta.get("detached_caption")))


def miss_cause(text: str, blocks, i: int, chunk) -> str:
    """Why header ``blocks[i]`` is not at the start of Tier-1 ``chunk``, which holds it."""
    b = blocks[i]
    start = chunk.metadata.source_span.start_char
    before = [x for x in blocks[:i] if x.start >= start]
    if before and all(_is_header(x) for x in before):
        return "under a parent header: the header stack starts the chunk"
    for m in _MERGE_NOTE.finditer(chunk.metadata.boundary_note or ""):
        if m["way"] == "backward" and m["title"] == b.title:
            return f"its own short section ({m['tokens']} tokens) merged backward: {m['why']}"
        if m["way"] == "forward" and m["title"] != b.title:
            return f"short {m['what']} ({m['tokens']} tokens) merged forward over it: {m['why']}"
    prev = blocks[i - 1]
    return f"after a {prev.kind} block: {' '.join(text[prev.start : prev.end].split())[-60:]!r}"


def print_misses(folder: Path) -> None:
    """Each header (as :func:`measure` counts them) that no Tier-1 chunk starts at, and why."""
    for path in sorted(folder.glob("*.txt")):
        letter = load_letter(path)
        blocks = detect_blocks(letter.text)
        chunks = [c for c in segment_letter(letter) if c.metadata.chunk_tier == 1]
        starts = {c.metadata.source_span.start_char for c in chunks}
        for i, b in enumerate(blocks):
            if not _is_header(b) or b.start in starts:
                continue
            chunk = next(
                c
                for c in chunks
                if c.metadata.source_span.start_char
                <= b.start
                < c.metadata.source_span.end_char_exclusive
            )
            header = " ".join(letter.text[b.start : b.end].split())[:60]
            print(f"{letter.year}  {header!r}  [{chunk.chunk_id}]")
            print(f"      {miss_cause(letter.text, blocks, i, chunk)}")


def print_per_letter(folder: Path) -> None:
    """Headers at a chunk start and tables whole, ours, one line per letter."""
    print("letter  headers at start  tables whole")
    for path in sorted(folder.glob("*.txt")):
        letter = load_letter(path)
        m = measure(letter.text, spans_ours(letter), detect_blocks(letter.text))
        (h, hn), (t, tn) = m["headers"], m["tables"]
        print(f"{path.stem:<7} {h:>7}/{hn:<8} {t:>7}/{tn}")


def measure(text: str, spans: list[tuple[int, int]], blocks) -> dict[str, tuple[int, int]]:
    starts = {s for s, _ in spans}
    headers = [b for b in blocks if _is_header(b)]
    tables = [b for b in blocks if b.kind == "table"]
    h_ok = sum(b.start in starts for b in headers)
    t_ok = sum(any(s <= b.start and b.end <= e for s, e in spans) for b in tables)
    mid_v = sum(ends_mid_sentence(text[s:e]) for s, e in spans)
    mid_s = sum(not _STRICT_END.search(text[s:e]) for s, e in spans)
    return {
        "headers": (h_ok, len(headers)),
        "tables": (t_ok, len(tables)),
        "mid_validator": (mid_v, len(spans)),
        "mid_strict": (mid_s, len(spans)),
    }


def main() -> int:
    logging.getLogger("letterchunk").setLevel(logging.ERROR)  # e.g. the 2018 file-name warning
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("letters", nargs="?", type=Path, default=ROOT / "corpus" / "letters")
    parser.add_argument("--misses", action="store_true", help="list headers not at a chunk start")
    parser.add_argument("--per-letter", action="store_true", help="headers and tables per letter")
    args = parser.parse_args()
    folder = args.letters
    if args.misses:
        print_misses(folder)
        return 0
    if args.per_letter:
        print_per_letter(folder)
        return 0
    try:
        from chonkie import RecursiveChunker
    except ImportError:
        parser.error("chonkie is not installed: pip install -e '.[bench]'")
        return 2
    chunker = RecursiveChunker(tokenizer=encoding(), chunk_size=800)
    totals = {name: {} for name in ("ours", "chonkie")}
    named = columns = named_columns = tables = over = t1 = alone = 0
    for path in sorted(folder.glob("*.txt")):
        letter = load_letter(path)
        blocks = detect_blocks(letter.text)
        for chunk in segment_letter(letter):  # table_data: ours only (chonkie parses none)
            if chunk.metadata.chunk_tier == 1:
                t1 += 1
                over += chunk.metadata.token_count > T1_MAX
                alone += chunk.metadata.standalone_exception
            if chunk.metadata.chunk_tier == 3:
                for td in chunk.metadata.table_data:
                    tables += 1
                    named += not _FALLBACK_NAME.search(td.table_name)
                    columns += len(td.columns)
                    named_columns += sum(not _GENERIC_COLUMN.fullmatch(c) for c in td.columns)
        for name, spans in (
            ("ours", spans_ours(letter)),
            ("chonkie", spans_chonkie(chunker, letter.text)),
        ):
            for k, (a, b) in measure(letter.text, spans, blocks).items():
                x, y = totals[name].get(k, (0, 0))
                totals[name][k] = (x + a, y + b)
    labels = {
        "headers": "section headers at a chunk start",
        "tables": "tables whole in one chunk",
        "mid_validator": "chunks ending mid-sentence (validator rule)",
        "mid_strict": "chunks ending mid-sentence (strict rule)",
    }
    print(f"{'metric':48} {'ours (tier 1)':>20} {'chonkie 800':>20}")
    for k, label in labels.items():
        cells = []
        for name in ("ours", "chonkie"):
            a, b = totals[name][k]
            cells.append(f"{a}/{b} = {100 * a / b:5.1f}%" if b else "n/a")
        print(f"{label:48} {cells[0]:>20} {cells[1]:>20}")
    print(
        f"{'tables named by caption or lead-in (ours only)':48} "
        f"{f'{named}/{tables} = {100 * named / max(tables, 1):5.1f}%':>20}"
    )
    print(
        f"{'table columns with a heading (ours only)':48} "
        f"{f'{named_columns}/{columns} = {100 * named_columns / max(columns, 1):5.1f}%':>20}"
    )
    print(
        f"{f'tier-1 chunks over {T1_MAX} tokens (ours only)':48} "
        f"{f'{over}/{t1} = {100 * over / max(t1, 1):5.1f}%':>20}"
    )
    print(
        f"{f'tier-1 under {T1_MIN} tokens, standalone (ours only)':48} "
        f"{f'{alone}/{t1} = {100 * alone / max(t1, 1):5.1f}%':>20}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
