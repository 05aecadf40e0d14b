"""The chunk files already in an output folder, as the stages that replace them read them.

A chunk file is replaced only by a version at least as complete: the run keeps earlier enriched
twins of chunks it could not finish, and ``segment`` refuses to replace enriched chunks by
segmented ones (:func:`replacing_loses`).  Importing this module loads no LLM code, so
``segment`` stays quick to start.
"""

from __future__ import annotations

from pathlib import Path

from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError

__all__ = ["is_enriched", "read_chunk_file", "replacing_loses"]


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
    """The canonical chunks of the JSONL file ``path``; InputError naming the file and line for
    text that is not UTF-8 or a line that is not a canonical chunk."""
    chunks = []
    if not path.is_file():  # a FIFO would block the read forever; a device is not ours
        raise InputError(
            path, "not a regular file; pass the folder `letterchunk segment` wrote, or remove it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            path,
            f"not UTF-8 text (byte {exc.start}); this is not a chunk JSONL file letterchunk "
            "wrote: segment the letter again, or remove the file",
        ) from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            chunks.append(Chunk.model_validate_json(line))
        except ValueError as exc:
            raise InputError(
                path,
                f"line {n} is not a canonical chunk ({exc.__class__.__name__}); "
                "run `letterchunk validate` on it, or segment the letter again",
            ) from None
    return chunks
