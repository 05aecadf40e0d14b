"""The chunk files already in an output folder, as the stages that replace them read them.

A chunk file is replaced only by a version at least as complete: the run keeps earlier enriched
twins of chunks it could not finish, and ``segment`` refuses to replace enriched chunks by
segmented ones (:func:`replacing_loses`).  Importing this module loads no LLM code, so
``segment`` stays quick to start.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from letterchunk.contract.files import load_chunks
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.contract.validate import read_evidence
from letterchunk.contract.violations import EvidenceRecord
from letterchunk.errors import InputError, NotReplaceable
from letterchunk.io import atomic_write_lines, atomic_write_text, read_utf8
from letterchunk.layout import LETTER_CHUNKS, RUN_FILE, LetterFiles, LetterKey

log = logging.getLogger(__name__)

__all__ = [
    "check_replaceable",
    "dump_evidence",
    "is_enriched",
    "read_chunk_file",
    "replacing_loses",
    "segmented_letters",
    "write_letter_files",
]


def check_replaceable(
    folder: Path, keys: Iterable[LetterKey], *, cleaned: bool = True, report: bool = True
) -> None:
    """Raise :class:`NotReplaceable` naming the first file a run on ``folder`` would write (each
    letter's chunks and evidence, its repair report (``report``) and cleaned text (``cleaned``:
    ``run`` writes it, ``enrich`` only reads it), and ``run.json``) that is there
    but cannot be replaced: read-only (its mode, ``chattr +i``, a read-only mount) or a folder
    in its place.  Called before the first request, so nothing is paid for answers that could
    not be kept (the folder itself is proved writable before this)."""
    paths = [folder / RUN_FILE]
    for key in keys:
        files = LetterFiles.of(folder, key)
        paths += [files.chunks, files.evidence]
        paths += [files.report] if report else []
        paths += [files.cleaned] if cleaned else []
    for path in paths:
        if path.is_dir():
            raise NotReplaceable(
                path,
                "is a folder where this run writes a file, so nothing was sent; move it away "
                "or pass another --out folder",
            )
        if os.path.lexists(path) and not os.access(path, os.W_OK):
            raise NotReplaceable(
                path,
                "is read-only and this run would replace it, so nothing was sent; make it "
                f"writable (chmod u+w {path}, or chattr -i if it is immutable) or pass another "
                "--out folder",
            )


def is_enriched(chunk: Chunk) -> bool:
    """Whether ``chunk`` was enriched: a valid enriched chunk always has a contextual summary
    (``summary.missing`` is an error at stage enriched) and the segmenter never writes one."""
    return bool(chunk.metadata.contextual_summary.strip())


def replacing_loses(path: Path) -> str | None:
    """Why replacing the chunk file ``path`` by freshly segmented chunks would lose work (it
    holds enriched chunks, or is not a chunk file letterchunk can read), or None when it is
    absent or holds segmented chunks only."""
    if not path.exists():
        return None
    if not path.is_file():  # a FIFO would block the read; a device or folder is not ours
        return "it is not a regular file"
    try:
        chunks = read_chunk_file(path)
    except InputError as exc:
        return f"it is not a chunk file letterchunk can read ({exc.reason})"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    done = sum(is_enriched(c) for c in chunks)
    if done:
        return f"it holds {done} enriched chunk(s) of {len(chunks)} (summaries, entities, ...)"
    return None


def read_chunk_file(path: Path) -> list[Chunk]:
    """The canonical chunks of the JSONL file ``path`` (the project's one strict chunk-file
    reader): InputError naming the file and line for a FIFO or device, text that is not UTF-8,
    or a line that is not a canonical chunk."""
    return load_chunks(path)


def dump_evidence(record: EvidenceRecord) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def write_letter_files(
    paths: LetterFiles,
    cleaned_text: str | None,
    chunks: list[Chunk],
    evidence: dict[str, EvidenceRecord],
    pending: set[str],
) -> list[Path]:
    """Write a letter's cleaned text (when given), chunks and evidence atomically; returns the
    paths written.  A ``pending`` chunk (not enriched now) keeps the enriched twin an earlier run
    left in the file, so a failed rerun never undoes finished work."""
    if pending:
        chunks, evidence = _keep_earlier(paths, chunks, evidence, pending)
    written: list[Path] = []
    if cleaned_text is not None:
        atomic_write_text(paths.cleaned, cleaned_text)
        written.append(paths.cleaned)
    atomic_write_lines(paths.chunks, [dump_chunk(c) for c in chunks])
    atomic_write_lines(
        paths.evidence,
        [dump_evidence(evidence[c.chunk_id]) for c in chunks if c.chunk_id in evidence],
    )
    return [*written, paths.chunks, paths.evidence]


def _keep_earlier(
    paths: LetterFiles,
    chunks: list[Chunk],
    evidence: dict[str, EvidenceRecord],
    pending: set[str],
) -> tuple[list[Chunk], dict[str, EvidenceRecord]]:
    """``chunks`` with each pending one replaced by its enriched twin already on disk."""
    if not paths.chunks.is_file():
        return chunks, evidence
    try:
        earlier = {c.chunk_id: c for c in read_chunk_file(paths.chunks) if is_enriched(c)}
    except (InputError, OSError, UnicodeDecodeError):
        return chunks, evidence  # not our file: nothing to keep
    old_evidence = read_evidence(paths.evidence)[0] if paths.evidence.is_file() else {}
    out = []
    for c in chunks:
        twin = earlier.get(c.chunk_id)
        if (
            c.chunk_id in pending
            and twin is not None
            and twin.content == c.content
            and twin.metadata.source_span == c.metadata.source_span
        ):
            out.append(twin)
            if c.chunk_id in old_evidence:
                evidence[c.chunk_id] = old_evidence[c.chunk_id]
        else:
            out.append(c)
    return out, evidence


def segmented_letters(
    folder: Path,
) -> list[tuple[LetterKey, str, list[Chunk], dict[str, EvidenceRecord | None]]]:
    """The letters of ``folder`` that ``enrich`` has left to ask about: ``(key, cleaned text,
    chunks, kept)``, where ``kept`` maps each chunk an earlier run already enriched to its
    evidence record.  Reads everything it needs, so an unusable folder, chunk file or cleaned
    text raises InputError naming it before any backend is started."""
    if not folder.is_dir():
        raise InputError(folder, "not a folder; pass the --out folder of `letterchunk segment`")
    files = sorted(p for p in folder.iterdir() if LETTER_CHUNKS.match(p.name))
    if not files:
        raise InputError(
            folder,
            "holds no YYYY.jsonl chunk files; run `letterchunk segment "
            f"LETTER --out {folder}` first",
        )
    jobs = []
    for path in files:
        chunks = read_chunk_file(path)
        stem = path.name.removesuffix(".jsonl")  # LETTER_CHUNKS matched: YYYY or YYYY-Lk
        year: LetterKey = int(stem) if stem.isdigit() else stem
        # resume: chunks an earlier run (finished, capped, halted or killed) already
        # enriched in place are not asked again; segment again to enrich afresh
        if all(is_enriched(c) for c in chunks):
            log.info("%s: already enriched, skipped", path)
            continue
        sidecar = LetterFiles.of(folder, year).evidence
        evidence = read_evidence(sidecar)[0] if sidecar.is_file() else {}
        kept = {c.chunk_id: evidence.get(c.chunk_id) for c in chunks if is_enriched(c)}
        source = (
            chunks[0].metadata.source_file if chunks else LetterFiles.of(folder, year).cleaned.name
        )
        cleaned = folder / source
        if not cleaned.is_file():
            raise InputError(
                cleaned,
                f"missing: {path.name} was cut from it; run `letterchunk "
                f"segment` again so both files are in {folder}",
            )
        text = read_utf8(cleaned, f"the {cleaned.name} that `letterchunk segment` wrote")
        jobs.append((year, text, chunks, kept))
    return jobs
