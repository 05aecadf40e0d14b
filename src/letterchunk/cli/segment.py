"""``letterchunk segment PATH... --out DIR [--tier2]``.

PATH is a letter file or a folder.  In a folder only ``*.txt`` files are letters; any other
file (``TRAPS.md``) is skipped with a notice on stderr (hidden files and --quiet: no notice).  A
file named explicitly is always treated as a letter.  A PATH that does not exist, or a folder
without letters, stops the command before anything is written (exit 2).

For each letter it writes ``DIR/YYYY_cleaned.txt`` and ``DIR/YYYY.jsonl`` atomically.  A file
holding many letters (a compilation such as the Buffett Partnership letters; found
automatically, or ``--profile partnership``) gives one ``DIR/YYYY-Lk_cleaned.txt`` and
``DIR/YYYY-Lk.jsonl`` per letter, ``k`` its place among the letters of its year.  A letter
that cannot be used (empty, binary, not UTF-8, no year) is reported on stderr with what to do;
the other letters are still written, and the exit code is 2 at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.contract.rules import max_chunk_tokens
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.errors import InputError
from letterchunk.io import atomic_write_lines, atomic_write_text
from letterchunk.layout import LetterFiles, find_letters, same_key_message
from letterchunk.runner.lock import folder_lock
from letterchunk.runner.outputs import replacing_loses
from letterchunk.text.clean import CleanedLetter
from letterchunk.text.compilation import PROFILES, load_documents, segment_letters

EXIT_OK, EXIT_USAGE = 0, 2

EXAMPLES = """\
Examples:
  # every letter in a folder (files other than *.txt are skipped)
  letterchunk segment corpus/letters --out out/
  # two letters, with Tier-2 paragraph chunks too
  letterchunk segment corpus/letters/1977.txt corpus/letters/1978.txt --out out/ --tier2
  # a compilation of letters (one file, many letters): one DIR/YYYY-Lk.jsonl per letter
  letterchunk segment partnership_1960-1968.txt --out out/ --profile partnership
  # then check the result, or enrich it with the LLM
  letterchunk validate out/
  letterchunk enrich out/
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "segment",
        help=COMMAND_HELP["segment"],
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="letter file (.txt) or folder of them")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if missing)")
    p.add_argument("--tier2", action="store_true", help="also emit Tier-2 paragraph sub-chunks")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a DIR/YYYY.jsonl that holds enriched chunks (or is not a chunk file); "
        "without it such a letter is refused (exit 2) and its file left as it is",
    )
    add_profile_option(p)
    p.set_defaults(func=run)


def add_profile_option(p: argparse.ArgumentParser) -> None:
    """``--profile``: what a letter file holds (shared by segment and run)."""
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="auto",
        help="what a file holds: one letter, or a compilation of many letters such as the "
        "Buffett Partnership letters (auto: a compilation when two or more letters with a "
        "date line at their top are found)",
    )


def run(args: argparse.Namespace) -> int:
    def skipped(path: Path) -> None:
        if not args.quiet:
            print(f"letterchunk: skipping {path}: not a letter (*.txt)", file=sys.stderr)

    files = find_letters(args.paths, on_skip=skipped)  # a bad path fails before DIR is touched

    with folder_lock(args.out):  # one letterchunk process per output folder
        return _segment(args, files)


def _segment(args: argparse.Namespace, files: list[Path]) -> int:
    problems: list[str] = []
    out = Path(args.out)
    years: dict[int | str, Path] = {}
    written = 0
    for f, loaded in load_documents(files, args.profile):
        if isinstance(loaded, InputError):
            problems.append(str(loaded))
            continue
        for letter, chunks in zip(loaded, segment_letters(loaded, tier2=args.tier2), strict=True):
            if _write(args, out, f, letter, chunks, years, problems):
                written += 1
    for msg in problems:
        print(f"letterchunk: error: {msg}", file=sys.stderr)
    if not args.quiet:
        print(f"{written} letter(s) written to {out}/", file=sys.stderr)
    return EXIT_USAGE if problems else EXIT_OK


def _write(
    args: argparse.Namespace,
    out: Path,
    f: Path,
    letter: CleanedLetter,
    chunks: list[Chunk],
    years: dict[int | str, Path],
    problems: list[str],
) -> bool:
    """Write one letter's files, or add to ``problems`` why not; whether it was written."""
    if letter.key in years:
        problems.append(str(InputError(f, same_key_message(letter.key, years[letter.key]))))
        return False
    years[letter.key] = f
    too_big = [c for c in chunks if c.metadata.token_count > max_chunk_tokens()]
    if too_big:  # it could be written, but no model could enrich it: refuse it now
        c = too_big[0]
        problems.append(
            f"{f}: chunk {c.chunk_id} has {c.metadata.token_count:,} tokens, more than a model "
            f"can be asked about ({max_chunk_tokens():,}; set LETTERCHUNK_CONTEXT_TOKENS for "
            "a larger context); the letter cannot be enriched as is: split it into paragraphs "
            "and sections (blank lines, headers); not written"
        )
        return False
    target = LetterFiles.of(out, letter.key)
    loses = None if args.overwrite else replacing_loses(target.chunks)
    if loses:  # enriched answers were paid for: never replace them by segmented chunks
        problems.append(
            f"{target.chunks}: not replaced by the segmented chunks of {f}: {loses}; pass "
            "another --out folder, `letterchunk enrich` it to finish it, or --overwrite to "
            "replace it"
        )
        return False
    atomic_write_text(target.cleaned, letter.text)
    atomic_write_lines(target.chunks, [dump_chunk(c) for c in chunks])
    if not args.quiet:
        n1 = sum(c.metadata.chunk_tier == 1 for c in chunks)
        print(
            f"{f} -> {target.chunks} ({len(chunks)} chunks, {n1} tier-1)",
            file=sys.stderr,
        )
    return True
