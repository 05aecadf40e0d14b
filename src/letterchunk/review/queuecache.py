"""The review queue kept beside the folder's files between starts of the page.

Building the queue reads every chunk, evidence and repair file and locates every quote in its
chunk: over a corpus (10^3 chunks, 10^4 quotes) that is most of the page's opening.
:func:`cached_queue` keeps the built queue in ``DIR/.review-queue.json`` and uses it again
only while nothing it was built from changed: its key holds, for each file read, the name,
size, modification time and sha256 of the bytes (a file rewritten in place within the same
second, with the same size, still changes the key), the thresholds in force and the code that
builds the queue (this package's version and the queue module's source).  A missing,
unreadable, foreign or outdated cache is rebuilt; a folder that cannot be written is served
without one.  The cache is JSON (never pickle): a folder may come from elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from letterchunk.layout import EVIDENCE_SUFFIX, REPORT_SUFFIX, chunk_stem
from letterchunk.review import queue as queue_module
from letterchunk.review.queue import (
    Chunk,
    Item,
    Queue,
    Thresholds,
    chunk_files,
    queue_of,
    read_thresholds,
    vocabulary_of,
)
from letterchunk.version import __version__

__all__ = ["CACHE_FILE", "cache_key", "cached_queue", "queue_and_keeper"]

log = logging.getLogger(__name__)

CACHE_FILE = ".review-queue.json"
FORMAT = 1
_CODE = hashlib.sha256(Path(queue_module.__file__).read_bytes()).hexdigest()


def _inputs(folder: Path) -> list[Path]:
    """Every file :func:`~letterchunk.review.queue.build_queue` reads for the items."""
    found = []
    for path in chunk_files(folder):
        stem = chunk_stem(path)
        found += [path, folder / f"{stem}{EVIDENCE_SUFFIX}", folder / f"{stem}{REPORT_SUFFIX}"]
    return found


def cache_key(folder: str | Path, thresholds: Thresholds) -> str:
    """The sha256 naming what a queue of ``folder`` is built from, as it is now."""
    folder = Path(folder)
    parts: list[Any] = [FORMAT, __version__, _CODE, thresholds.confession, thresholds.rule]
    for path in _inputs(folder):
        try:
            data = path.read_bytes()
            info = path.stat()
        except FileNotFoundError:
            parts.append([path.name, None])
            continue
        digest = hashlib.sha256(data).hexdigest()
        parts.append([path.name, info.st_size, info.st_mtime_ns, len(data), digest])
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def _dump(queue: Queue, key: str) -> dict[str, Any]:
    # a judged item's quote is its target: kept once (a quote of 1 stands for the target)
    return {
        "key": key,
        "letters": queue.letters,
        "chunks": [
            [c.letter, c.chunk_id, c.content, c.sha256, c.summary, c.concepts, c.principles]
            for c in queue.chunks
        ],
        "items": [
            [i.kind, i.chunk, i.target, 1 if i.quote == i.target and i.quote else i.quote]
            + [i.start, i.end, i.model_value, i.p, i.threshold, i.note]
            for i in queue.items
        ],
    }


def _item(kind: Any, chunk: Any, target: Any, quote: Any, *rest: Any) -> Item:
    return Item(kind, chunk, target, target if quote == 1 else quote, *rest)


def _load(data: dict[str, Any]) -> tuple[list[Chunk], list[Item], list[str]]:
    chunks = [
        Chunk(letter, chunk_id, content, sha, summary, tuple(concepts), tuple(map(tuple, ps)))
        for letter, chunk_id, content, sha, summary, concepts, ps in data["chunks"]
    ]
    items = [_item(*row) for row in data["items"]]
    return chunks, items, [str(letter) for letter in data["letters"]]


def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return data


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        handle, name = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
            os.replace(name, path)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
    except OSError:  # a read-only folder: served without a cache
        log.debug("could not keep the review queue in %s", path, exc_info=True)


def queue_and_keeper(folder: str | Path) -> tuple[Queue, Callable[[], None]]:
    """The queue of ``folder`` and a function that keeps it for the next start: read from
    the kept one when its key matches the files as they are now (then keeping does nothing),
    else built.  Keeping may wait until the queue is served (it encodes the whole queue)."""
    folder = Path(folder)
    thresholds, run = read_thresholds(folder)
    key = cache_key(folder, thresholds)
    path = folder / CACHE_FILE
    data = _read_cache(path, key)
    if data is not None:
        try:
            chunks, items, letters = _load(data)
        except (KeyError, TypeError, ValueError):
            log.debug("the review queue cache %s is unusable; rebuilding", path, exc_info=True)
        else:
            vocabulary = vocabulary_of(letters)
            queue = Queue(folder, chunks, items, thresholds, run, vocabulary, letters)
            return queue, lambda: None
    queue = queue_of(folder, thresholds, run)
    # kept under the key of the files as they were before reading them: a file changed
    # since gives another key next time, so the queue is built again then
    built = replace(queue, items=list(queue.items))  # before the page's warnings are added
    return queue, lambda: _write_cache(path, _dump(built, key))


def cached_queue(folder: str | Path) -> Queue:
    """:func:`~letterchunk.review.queue.build_queue` of ``folder``, from the kept queue when
    its key matches the files as they are now, else built and kept."""
    queue, keep = queue_and_keeper(folder)
    keep()
    return queue
