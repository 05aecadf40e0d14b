"""Disk cache of LLM answers, so reruns make zero HTTP requests and write identical output.

The key is the sha256 of canonical JSON over everything that can change an answer: the model
id, the rendered messages, the prompt templates' hash, the response schema, the generation
parameters (temperature, seed, max_tokens) and the instructor mode.  Nothing else (no base
URL, no chunk id, no time) enters it, so the same question is asked once.

Values are JSON text (the raw answer, its finish_reason/refusal and the usage it cost), never
pickles: a cache can be inspected, and a change to our classes cannot break loading it.  Every
answer the server gave is stored, failed ones (malformed, truncated, refusal) included, so a
rerun replays the repair loop exactly; transport errors are never stored.  The answers of a
chunk that stayed invalid after its last attempt are set aside (:meth:`ResponseCache.reject`):
a rerun asks them again instead of replaying the failure.

Modes (``--cache``):

=========  =============================================================================
use        read, and write misses (default)
refresh    never read, always ask and overwrite
off        neither read nor write
offline    read only; a miss raises :class:`~letterchunk.errors.CacheMiss` naming the chunk
=========  =============================================================================
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import diskcache

from letterchunk.errors import CacheMiss, ConfigError
from letterchunk.settings import DEFAULT_CACHE_DIR as _DEFAULT_CACHE_DIR
from letterchunk.settings import Settings

__all__ = ["CacheMode", "CachedAnswer", "ResponseCache", "cache_key", "DEFAULT_CACHE_DIR"]

log = logging.getLogger(__name__)

CacheMode = Literal["use", "refresh", "off", "offline"]
CACHE_MODES: tuple[str, ...] = get_args(CacheMode)
# the default answer cache folder (LETTERCHUNK_CACHE_DIR overrides it), re-exported from settings
DEFAULT_CACHE_DIR = _DEFAULT_CACHE_DIR
_REJECTED = "rejected:"  # prefix of answers set aside by ResponseCache.reject
_FORMAT = 1  # bump when the stored record changes shape; old records are then misses


def _canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(
    *,
    model: str,
    messages: list[dict],
    prompt_hash: str,
    schema: dict,
    params: Mapping[str, object],
    mode: str,
) -> str:
    """sha256 hex of the canonical JSON of everything that changes the answer.

    ``params`` are the generation parameters (temperature, seed, max_tokens); ``schema`` is
    ``response_model.model_json_schema()``; ``prompt_hash`` comes from ``prompts.prompt_hash()``.
    """
    payload = {
        "format": _FORMAT,
        "model": model,
        "messages": messages,
        "prompt_hash": prompt_hash,
        "schema": schema,
        "params": params,
        "mode": mode,
    }
    return hashlib.sha256(_canonical(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    """One answer as the server gave it (raw text, not the parsed object)."""

    raw_text: str
    finish_reason: str | None
    refusal: str | None
    prompt_tokens: int
    completion_tokens: int
    model: str

    def to_json(self) -> str:
        return _canonical({"format": _FORMAT, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> CachedAnswer | None:
        try:
            data = json.loads(text)
            if data.pop("format", None) != _FORMAT:
                return None
            return cls(**data)
        except (ValueError, TypeError):
            return None


class ResponseCache:
    """diskcache-backed answer cache; thread- and process-safe (SQLite underneath).

    ``directory`` defaults to ``$LETTERCHUNK_CACHE_DIR`` or ``cache/`` in the working directory;
    it is created on first use (never in mode ``off``).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, mode: str = "use") -> None:
        if mode not in CACHE_MODES:
            raise ConfigError(f"unknown cache mode {mode!r}; use one of: {', '.join(CACHE_MODES)}")
        self.mode: CacheMode = mode  # type: ignore[assignment]
        self.directory = Path(directory) if directory else Settings.from_env().cache_dir
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._cache: Any = None

    # -- lifecycle
    def _open(self) -> Any:
        if self._cache is None:
            with self._lock:
                if self._cache is None:
                    try:
                        self._cache = self._open_or_rebuild(diskcache)
                    except OSError as exc:
                        raise ConfigError(
                            f"cannot open the answer cache in {self.directory}: {exc}; "
                            "pass another --cache-dir (or LETTERCHUNK_CACHE_DIR) or --cache off"
                        ) from exc
        return self._cache

    def _open_or_rebuild(self, diskcache: Any) -> Any:
        """Open the cache; a damaged ``cache.db`` is set aside and rebuilt in mode ``refresh``
        (every answer is asked again anyway), else reported with the fix."""
        try:
            return diskcache.Cache(str(self.directory))
        except sqlite3.DatabaseError as exc:
            if self.mode != "refresh":
                raise self._corrupt(exc) from exc
        db = self.directory / "cache.db"
        aside = db.with_name("cache.db.corrupt")
        log.warning("answer cache %s is damaged; moved to %s and rebuilt", db, aside.name)
        db.replace(aside)
        for suffix in ("-wal", "-shm"):
            db.with_name(db.name + suffix).unlink(missing_ok=True)
        return diskcache.Cache(str(self.directory))

    def _corrupt(self, exc: BaseException) -> ConfigError:
        return ConfigError(
            f"the answer cache {self.directory / 'cache.db'} is damaged ({exc}); rerun with "
            f"--cache refresh to rebuild it, or delete the folder {self.directory}"
        )

    def open(self) -> ResponseCache:
        """Open (and create) the cache now, so a bad cache fails before the first request."""
        self._open()
        return self

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- key
    key = staticmethod(cache_key)

    # -- read / write
    def lookup(self, key: str, *, chunk_id: str) -> CachedAnswer | None:
        """The stored answer for ``key``, or None (counted as a miss).

        In mode ``offline`` a miss raises :class:`CacheMiss`; ``refresh`` and ``off`` never read.
        """
        found: CachedAnswer | None = None
        if self.mode in ("use", "offline"):
            try:
                raw = self._open().get(key)
                if raw is None and self.mode == "offline":  # replay a run exactly, failures too
                    raw = self._open().get(_REJECTED + key)
            except sqlite3.DatabaseError as exc:
                raise self._corrupt(exc) from exc
            if isinstance(raw, str):
                found = CachedAnswer.from_json(raw)
                if found is None:
                    log.warning(
                        "cache entry %s for %s is unreadable; asking again", key[:12], chunk_id
                    )
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        if found is None and self.mode == "offline":
            raise CacheMiss(chunk_id)
        return found

    def store(self, key: str, answer: CachedAnswer) -> None:
        """Save an answer (modes ``use`` and ``refresh``; ``off`` and ``offline`` write nothing)."""
        if self.mode in ("use", "refresh"):
            try:
                self._open().set(key, answer.to_json())
            except sqlite3.DatabaseError as exc:
                raise self._corrupt(exc) from exc

    def reject(self, keys: Iterable[str]) -> int:
        """Set aside the answers under ``keys`` (those of a chunk that stayed invalid after its
        last attempt): a later lookup in mode ``use`` misses them and asks again, so a rerun
        against a healthy server is not fed the old failures; mode ``offline`` still replays
        them.  They stay in the cache under a ``rejected:`` key.  Returns how many were moved."""
        if self.mode not in ("use", "refresh"):
            return 0
        moved = 0
        try:
            cache = self._open()
            for key in keys:
                raw = cache.get(key)
                if raw is None:
                    continue
                cache.set(_REJECTED + key, raw)
                cache.delete(key)
                moved += 1
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc
        return moved

    def __len__(self) -> int:
        return 0 if self.mode == "off" and self._cache is None else len(self._open())

    @property
    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}
