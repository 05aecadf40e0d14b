"""Grounded ``related_years``: the years of each chunk's cross-year links, written into its file.

The model writes ``cross_references.related_years`` as a guess per chunk (often the year before
or after, often the chunk's own).  Once an index holds links (:mod:`letterchunk.retrieval.links`),
:func:`write_related_years` replaces, in every **enriched** chunk of an output folder, that guess
by the sorted distinct years of the chunk's links.  A chunk without links gets ``[]``: a guessed
year that no link grounds is dropped.  A chunk the model never enriched (no contextual summary:
a segmented chunk, a Tier-2 paragraph) is left as it is.

**Only the years.**  The target chunk ids stay in the index (table ``links``, ``link --json``,
``search --expand-links``): the canonical chunk has no key for them, and spec §0 allows no new
key without a schema version.  Everything else of a chunk is kept: a file is rewritten through the
project's chunk writer (:func:`~letterchunk.contract.schema.dump_chunk`, one line per chunk) only
when one of its chunks' years change, atomically (:func:`~letterchunk.io.write_output`); a file
whose years already are the links' is not touched (same bytes, same mtime), so a second run
changes nothing.

**The folder must hold the index's chunks.**  Links join the chunks as they were indexed.  Before
anything is written, every chunk file is read by the strict reader
(:func:`~letterchunk.contract.files.load_chunks`) and each chunk compared with the index's copy
(the whole canonical chunk, ``related_years`` left out, so a folder written once still matches):
a chunk the index does not hold, one that differs, or an indexed chunk no file holds is refused
(:class:`~letterchunk.errors.InputError` naming the file and chunk, and the commands that index and
link the folder again), and nothing is written.  A folder without one enriched chunk (segment-only
output) is refused too: there is no guess to ground and the index cannot have links for it.

**Checked after writing.**  The links are checked first (:func:`~letterchunk.retrieval.links.
check_links`); each rewritten file is then validated at stage ``enriched`` and compared with its
validation before: a new error (none is expected: the years are distinct, of other letters and
in range) puts every rewritten file back as it was and raises.

The index itself keeps the chunks as indexed, with the model's years; ``letterchunk index`` on
the rewritten folder carries the new years into it (and drops the links: ``link`` computes the
same ones again, since no signal of a link reads ``related_years``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterchunk.contract.files import load_chunks
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.contract.validate import validate_path
from letterchunk.errors import InputError
from letterchunk.io import read_utf8, write_output
from letterchunk.retrieval.chunks import chunk_files
from letterchunk.retrieval.links import check_links, opened, require_links

__all__ = ["WriteBack", "linked_years", "write_related_years"]

_AGAIN = (
    "index this folder again and link it (`letterchunk index {folder} --db {db}` with the "
    "options you built it with, then `letterchunk link --db {db} --write {folder}`)"
)


@dataclass(frozen=True)
class WriteBack:
    """What :func:`write_related_years` did to an output folder."""

    files: int  # chunk files read
    chunks: int  # enriched chunks (the ones whose related_years are the links' years now)
    linked: int  # enriched chunks with at least one link
    changed: int  # enriched chunks whose related_years changed
    dropped: int  # chunks whose guessed years all went: they had some and have no link
    written: tuple[Path, ...]  # files rewritten; every other file is byte-identical


def is_enriched(chunk: Chunk) -> bool:
    """An enriched chunk always has a contextual summary; the segmenter never writes one (the
    rule of :func:`letterchunk.runner.outputs.is_enriched`, which this stage cannot import)."""
    return bool(chunk.metadata.contextual_summary.strip())


def linked_years(db: str | Path) -> dict[str, list[int]]:
    """Each linked chunk's link years, sorted and distinct (a chunk without links is absent)."""
    with opened(db) as conn:
        require_links(conn, db)
        rows = conn.execute("SELECT chunk_id, target_year FROM links").fetchall()
    years: dict[str, set[int]] = {}
    for chunk_id, year in rows:
        years.setdefault(chunk_id, set()).add(int(year))
    return {chunk_id: sorted(found) for chunk_id, found in years.items()}


def _indexed_chunks(db: str | Path) -> dict[str, dict[str, Any]]:
    with opened(db) as conn:
        rows = conn.execute("SELECT chunk_id, chunk FROM chunks").fetchall()
    return {chunk_id: json.loads(chunk) for chunk_id, chunk in rows}


def _without_years(chunk: dict[str, Any]) -> dict[str, Any]:
    """The chunk's JSON form with ``related_years`` blanked (what write-back may change)."""
    metadata = dict(chunk.get("metadata") or {})
    metadata["cross_references"] = {
        **(metadata.get("cross_references") or {}),
        "related_years": None,
    }
    return {**chunk, "metadata": metadata}


def _difference(a: Any, b: Any, path: str = "") -> str:
    """The dotted path of the first value where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                return _difference(a.get(key), b.get(key), f"{path}{key}.")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _difference(x, y, f"{path}{i}.")
    return path.rstrip(".") or "(the whole chunk)"


def _require_same_chunks(
    db: str | Path,
    folder: Path,
    letters: Mapping[Path, Sequence[Chunk]],
    indexed: Mapping[str, dict[str, Any]],
) -> None:
    """InputError unless the folder holds exactly the index's chunks (years aside)."""
    again = _AGAIN.format(folder=folder, db=db)
    seen: dict[str, Path] = {}
    for path, chunks in letters.items():
        for chunk in chunks:
            if chunk.chunk_id in seen:
                raise InputError(
                    path,
                    f"chunk {chunk.chunk_id} is also in {seen[chunk.chunk_id]}; an index holds "
                    "one chunk per id, so this folder is not the one indexed: remove the copy, "
                    f"or {again}; nothing was written",
                )
            stored = indexed.get(chunk.chunk_id)
            if stored is None:
                raise InputError(
                    path,
                    f"chunk {chunk.chunk_id} is not in the index {db}, so it has no links: the "
                    f"index was built from other chunks; {again}; nothing was written",
                )
            mine = _without_years(chunk.model_dump(mode="json"))
            if mine != _without_years(stored):
                raise InputError(
                    path,
                    f"chunk {chunk.chunk_id} differs from the index's copy in {db} (first at "
                    f"{_difference(mine, _without_years(stored))}): the chunks changed since they "
                    f"were indexed, so the links may no longer fit them; {again}; nothing was "
                    "written",
                )
            seen[chunk.chunk_id] = path
    missing = sorted(indexed.keys() - seen)
    if missing:
        raise InputError(
            folder,
            f"holds no chunk {missing[0]} ({len(missing)} chunk(s) of the index {db} are in no "
            f"file here): the index was built from another folder; pass that folder to --write, "
            f"or {again}; nothing was written",
        )


def _regrounded(chunk: Chunk, years: list[int]) -> Chunk:
    md = chunk.metadata
    refs = md.cross_references.model_copy(update={"related_years": years})
    return chunk.model_copy(update={"metadata": md.model_copy(update={"cross_references": refs})})


@dataclass(frozen=True)
class _Plan:
    """One file's chunks with their new years, and what changed."""

    path: Path
    chunks: list[Chunk]
    enriched: int
    linked: int
    changed: int
    dropped: int


def _plan(path: Path, chunks: Sequence[Chunk], years: Mapping[str, list[int]]) -> _Plan:
    out: list[Chunk] = []
    enriched = linked = changed = dropped = 0
    for chunk in chunks:
        if not is_enriched(chunk):
            out.append(chunk)
            continue
        enriched += 1
        new = years.get(chunk.chunk_id, [])
        old = chunk.metadata.cross_references.related_years
        linked += bool(new)
        if new != old:
            changed += 1
            dropped += bool(old) and not new
            chunk = _regrounded(chunk, new)
        out.append(chunk)
    return _Plan(path, out, enriched, linked, changed, dropped)


def _errors(path: Path) -> Counter[tuple[str, str | None, str | None]]:
    """The file's validation errors at stage enriched, by rule, chunk and field."""
    return Counter(
        (v.code, v.chunk_id, v.field)
        for v in validate_path(path, stage="enriched")
        if v.severity == "error"
    )


def _put_back(originals: Mapping[Path, str]) -> None:
    for path, text in originals.items():
        write_output(path, text)


def _write_checked(plans: Sequence[_Plan]) -> tuple[Path, ...]:
    """Rewrite each changed file atomically; put every one back if a write fails or a file
    validates worse than before."""
    todo = [p for p in plans if p.changed]
    originals = {p.path: read_utf8(p.path) for p in todo}
    before = {p.path: _errors(p.path) for p in todo}
    done: dict[Path, str] = {}
    try:
        for p in todo:
            write_output(p.path, "".join(dump_chunk(c) + "\n" for c in p.chunks))
            done[p.path] = originals[p.path]
    except BaseException:
        _put_back(done)
        raise
    for p in todo:
        new = _errors(p.path) - before[p.path]
        if new:
            _put_back(originals)
            code, chunk_id, field = next(iter(new))
            raise InputError(
                p.path,
                f"the linked years would add the validation error {code} (chunk {chunk_id}, "
                f"{field}); every file was put back as it was; check the links (`letterchunk "
                "link --db FILE --check`) and compute them again",
            )
    return tuple(p.path for p in todo)


def write_related_years(db: str | Path, folder: str | Path) -> WriteBack:
    """Write each enriched chunk's link years into ``folder``'s chunk files (module docstring).

    The caller holds the folder's lock (``letterchunk link --write`` does).  Raises
    :class:`InputError` for a folder that is no output folder, holds a chunk file the strict
    reader refuses, holds no enriched chunk, or holds other chunks than the index ``db``; for
    links that fail their check; for a written file that validates worse (put back).  Raises
    :class:`~letterchunk.errors.ConfigError` for an index without links.
    """
    folder = Path(folder)
    letters = {path: load_chunks(path) for path in chunk_files(folder)}
    if not any(is_enriched(c) for chunks in letters.values() for c in chunks):
        raise InputError(
            folder,
            "holds no enriched chunk (segment-only output), so there is no related_years to "
            "ground: enrich it (`letterchunk enrich DIR`), index it, link it, then write; "
            "nothing was written",
        )
    years = linked_years(db)
    problems = check_links(db)
    if problems:
        raise InputError(
            db,
            f"{len(problems)} link(s) fail the check (first: {problems[0]}); compute them again "
            f"(`letterchunk link --db {db}`); nothing was written",
        )
    _require_same_chunks(db, folder, letters, _indexed_chunks(db))
    plans = [_plan(path, chunks, years) for path, chunks in letters.items()]
    written = _write_checked(plans)
    return WriteBack(
        files=len(plans),
        chunks=sum(p.enriched for p in plans),
        linked=sum(p.linked for p in plans),
        changed=sum(p.changed for p in plans),
        dropped=sum(p.dropped for p in plans),
        written=written,
    )
