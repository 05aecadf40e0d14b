"""An output folder as the review loop reads it: each letter's chunks, evidence and context,
the run's identity and thresholds, and the analysts' decisions in force."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from letterchunk.contract.files import load_chunks, read_evidence
from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.validate import LetterContext
from letterchunk.contract.violations import EvidenceRecord
from letterchunk.contract.vocabulary import concepts_for
from letterchunk.errors import InputError
from letterchunk.io import parse_json, read_utf8
from letterchunk.layout import LETTER_CHUNKS, RUN_FILE, LetterFiles
from letterchunk.review.thresholds import Thresholds, thresholds_of_run
from letterchunk.text.segment import section_titles

__all__ = ["FolderLetter", "letter_keys", "read_letter", "read_run", "run_identity_of"]


@dataclass(frozen=True)
class FolderLetter:
    """One letter of an output folder: its chunks, evidence records and validation context."""

    key: str
    chunks: list[Chunk]
    evidence: dict[str, EvidenceRecord]
    context: LetterContext


def letter_keys(folder: Path) -> list[str]:
    """The letters of ``folder`` (``1977``, ``1962-L2``), by name."""
    return sorted(
        p.name.removesuffix(".jsonl") for p in folder.iterdir() if LETTER_CHUNKS.match(p.name)
    )


def read_letter(folder: Path, key: str) -> FolderLetter:
    """The letter ``key`` of ``folder``; InputError naming the file when it is missing or is
    not a chunk file."""
    files = LetterFiles.of(folder, key)
    if not files.chunks.is_file():
        raise InputError(files.chunks, f"letter {key} is not in this folder")
    chunks = load_chunks(files.chunks)
    evidence = read_evidence(files.evidence)[0] if files.evidence.is_file() else {}
    cleaned = None
    if files.cleaned.is_file():
        cleaned = read_utf8(files.cleaned, "the cleaned letter `letterchunk segment` wrote")
    titles = [t for t in section_titles(chunks) if t != UNTITLED]
    context = LetterContext(
        cleaned_text=cleaned, section_titles=titles, vocabulary=concepts_for(key)
    )
    return FolderLetter(key, chunks, evidence, context)


def read_run(folder: Path) -> dict[str, object]:
    """``folder/run.json`` as an object ({} when it is missing or unreadable)."""
    path = folder / RUN_FILE
    if not path.is_file():
        return {}
    try:
        value, error = parse_json(read_utf8(path, "run.json as letterchunk run writes it"))
    except InputError:
        return {}
    return value if isinstance(value, dict) and not error else {}


def run_identity_of(run: dict[str, object]) -> dict[str, str]:
    """``{"model", "prompts_sha256"}`` of a run (from its identity block; "" when unknown)."""
    identity = run.get("identity")
    block = identity if isinstance(identity, dict) else {}
    model = block.get("model", run.get("model"))
    return {
        "model": str(model or ""),
        "prompts_sha256": str(block.get("prompts_sha256") or ""),
    }


def thresholds_of(folder: Path) -> Thresholds:
    """The thresholds the folder's last run used (``run.json``), else the built-in ones."""
    return thresholds_of_run(read_run(folder))
