"""The output-folder layout and letter discovery: every file name letterchunk reads or writes.

An output folder ``DIR`` holds, per letter ``YYYY``::

    YYYY_cleaned.txt        the cleaned letter (the chunks' ``source_file``; offsets point here)
    YYYY.jsonl              the chunks, one canonical JSON object per line
    YYYY.evidence.jsonl     the enrichment evidence sidecar (quotes and choices per chunk)
    YYYY.report.jsonl       the repair report: one record per LLM attempt, appended per run

A letter of a compilation (one file holding many letters, such as the Buffett Partnership
letters) is named ``YYYY-L{k}`` instead of ``YYYY``: ``YYYY`` its ``letter_year`` and ``k`` its
place (1, 2, ...) among the compilation's letters of that year, in reading order
(``1962-L1.jsonl``, ``1962-L1_cleaned.txt``, ``1962-L2.jsonl``, ...).  Its sections continue
the numbering of the year's earlier letters, so chunk ids stay unique in the folder.

and once per folder ``run.json`` (the run ledger), ``reviews.jsonl`` (the analysts'
decisions, ``letterchunk.review``), ``report.html`` (the HTML report) and
``.letterchunk.lock`` (held while a process writes the folder); a run through the Batch API
adds ``batch.json`` (its state: letters, requests, batch ids) and ``batch/requests-NNN.jsonl``
(the input files it uploaded).  Any ``X.jsonl`` chunk file has
its ``X.evidence.jsonl`` and ``X.report.jsonl`` beside it; the ``YYYY`` names are what the
pipeline writes and ``enrich`` / ``analyze`` pick up.

Which files are letters: a path given by the user is either a letter file (taken as a letter
whatever its name) or a folder, whose ``*.txt`` files are its letters, in name order
(``1977.txt``, ``1978.txt``, ...).
Other files in a folder (``TRAPS.md``, ``notes.pdf``) are not letters: they are skipped and
passed to ``on_skip`` so the CLI can say so; hidden files and sub-folders are ignored silently.
A path that does not exist, or a folder without one letter, is an :class:`InputError` before any
work starts (no server started, no file written).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from letterchunk.errors import ConfigError, InputError

__all__ = [
    "BATCH_FILE",
    "BATCH_FOLDER",
    "CHUNKS_SUFFIX",
    "CLEANED_SUFFIX",
    "EVIDENCE_SUFFIX",
    "HTML_NAME",
    "LETTER_CHUNKS",
    "LETTER_REPORT",
    "LETTER_SUFFIX",
    "LOCK_NAME",
    "REPORT_SUFFIX",
    "REVIEWS_FILE",
    "RUN_FILE",
    "LetterFiles",
    "LetterKey",
    "batch_input",
    "compilation_stem",
    "is_compilation_source",
    "stem_year",
    "chunk_stem",
    "cleaned_name",
    "evidence_path",
    "find_letters",
    "is_chunk_file",
    "report_path",
    "same_key_message",
]

LETTER_SUFFIX = ".txt"  # a letter in a folder of letters
CLEANED_SUFFIX = "_cleaned.txt"  # YYYY_cleaned.txt
CHUNKS_SUFFIX = ".jsonl"  # X.jsonl
EVIDENCE_SUFFIX = ".evidence.jsonl"  # X.evidence.jsonl beside X.jsonl
REPORT_SUFFIX = ".report.jsonl"  # X.report.jsonl beside X.jsonl
RUN_FILE = "run.json"
REVIEWS_FILE = "reviews.jsonl"  # the analysts' decisions (letterchunk.review.records)
HTML_NAME = "report.html"
LOCK_NAME = ".letterchunk.lock"
BATCH_FILE = "batch.json"  # the state of a run through the Batch API
BATCH_FOLDER = "batch"  # its input files (a sub-folder: they are not chunk files)
# a letter's chunk file (YYYY.jsonl, or YYYY-Lk.jsonl for a compilation's letter); group 1 the
# year
LETTER_CHUNKS = re.compile(r"^(\d{4})(?:-L[1-9]\d*)?\.jsonl$")
LETTER_REPORT = re.compile(r"^(\d{4})(?:-L[1-9]\d*)?\.report\.jsonl$")  # its repair report
_COMPILATION_STEM = re.compile(r"^(\d{4})-L[1-9]\d*$")

# what names one letter's files: its year (YYYY.txt letters) or its compilation stem (YYYY-Lk)
LetterKey = int | str


def compilation_stem(year: int, k: int) -> str:
    """``YYYY-L{k}``: the ``k``-th letter (from 1) of year ``year`` in a compilation."""
    return f"{year:04d}-L{k}"


def stem_year(key: LetterKey) -> int:
    """The ``letter_year`` a letter's key names (``1962`` for ``1962`` and ``1962-L2``)."""
    return key if isinstance(key, int) else int(str(key)[:4])


def is_compilation_source(source_file: str) -> bool:
    """Whether ``source_file`` is a compilation letter's cleaned file (``YYYY-Lk_cleaned.txt``)."""
    return _COMPILATION_STEM.match(source_file.removesuffix(CLEANED_SUFFIX)) is not None


def cleaned_name(year: LetterKey) -> str:
    """``YYYY_cleaned.txt``: the cleaned letter, named in every chunk's ``source_file``."""
    return f"{year}{CLEANED_SUFFIX}"


def batch_input(number: int) -> str:
    """``batch/requests-NNN.jsonl``: batch input file ``number``, relative to the folder."""
    return f"{BATCH_FOLDER}/requests-{number:03d}{CHUNKS_SUFFIX}"


def is_chunk_file(path: str | Path) -> bool:
    """Whether ``path`` names a chunk file (``X.jsonl``, not a sidecar, a report or the
    reviews file)."""
    name = Path(path).name
    return (
        name.endswith(CHUNKS_SUFFIX)
        and not name.endswith((EVIDENCE_SUFFIX, REPORT_SUFFIX))
        and name != REVIEWS_FILE
    )


def chunk_stem(chunk_file: str | Path) -> str:
    """``X`` of ``X.jsonl``; any other name whole (``notes.txt`` has ``notes.txt.report.jsonl``)."""
    return Path(chunk_file).name.removesuffix(CHUNKS_SUFFIX)


def evidence_path(chunk_file: str | Path) -> Path:
    """``DIR/X.jsonl`` -> ``DIR/X.evidence.jsonl``."""
    p = Path(chunk_file)
    return p.with_name(chunk_stem(p) + EVIDENCE_SUFFIX)


def report_path(chunk_file: str | Path) -> Path:
    """``DIR/X.jsonl`` -> ``DIR/X.report.jsonl``."""
    p = Path(chunk_file)
    return p.with_name(chunk_stem(p) + REPORT_SUFFIX)


@dataclass(frozen=True)
class LetterFiles:
    """The files of one letter in an output folder."""

    cleaned: Path
    chunks: Path
    evidence: Path
    report: Path

    @classmethod
    def of(cls, out_dir: str | Path, year: LetterKey) -> LetterFiles:
        out = Path(out_dir)
        chunks = out / f"{year}{CHUNKS_SUFFIX}"
        return cls(
            cleaned=out / cleaned_name(year),
            chunks=chunks,
            evidence=evidence_path(chunks),
            report=report_path(chunks),
        )


def same_key_message(key: LetterKey, first: str | Path) -> str:
    """Why a second letter with an output key already taken cannot be written: both would
    become the same ``DIR/<key>.jsonl``, and the second would replace the first's chunks."""
    return (
        f"letter year {key} already taken by {first}; both would be written to "
        f"{key}{CHUNKS_SUFFIX} and one would replace the other; pass only one letter per year "
        "(rename or remove one of them)"
    )


def find_letters(
    paths: Iterable[str | Path],
    on_skip: Callable[[Path], None] | None = None,
) -> list[Path]:
    """The letter files named by ``paths`` (files and folders), in order, each once.

    Raises :class:`InputError` naming the path for a path that does not exist or a folder that
    holds no ``*.txt`` letter, :class:`ConfigError` when ``paths`` is empty.
    """
    letters: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:  # a letter named twice (a folder and a file in it) is read once
            seen.add(key)
            letters.append(path)

    given = [Path(p) for p in paths]
    if not given:
        raise ConfigError("no letter given; pass letter files (YYYY.txt) or a folder of them")
    for path in given:
        if path.is_dir():
            found = 0
            for entry in sorted(path.iterdir()):
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                if entry.suffix.lower() == LETTER_SUFFIX:
                    add(entry)
                    found += 1
                elif on_skip is not None:
                    on_skip(entry)
            if not found:
                raise InputError(
                    path,
                    f"this folder holds no letter files (*{LETTER_SUFFIX}); pass a folder of "
                    "letters such as corpus/letters, or the letter files themselves",
                )
        elif path.is_file():
            add(path)
        elif path.exists():
            raise InputError(path, "not a regular file or folder; pass a letter file (YYYY.txt)")
        else:
            raise InputError(path, "no such file or folder; check the path")
    return letters
