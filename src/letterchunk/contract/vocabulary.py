"""The controlled vocabulary of ``metadata.buffett_concepts`` (spec §5.2, docs/spec.md).

The list lives in ``schemas/buffett_concepts.json`` (``{"concepts": [...]}``) so that it stays the
same across years and can be reviewed as data.  The validator rejects a concept outside it
(rule ``concept.unknown``); a concept that differs only in case is ``concept.case``.

The same file may map concepts to textual cues (``{"cues": {"float economics": ["float"], ...}}``):
:func:`load_cues` reads them, and the enrichment offers the model only the concepts whose cues
occur in a chunk.  It may also give each concept a one-line meaning (``{"meanings":
{"float economics": "insurance float as a source of investable funds ..."}}``), read by
:func:`load_meanings`; the concept candidates (:mod:`letterchunk.enrich.concept_candidates`)
count the meaning's words as evidence.

A compilation's letters (``YYYY-Lk``, see :mod:`letterchunk.layout`) add the concepts of
``schemas/partnership_concepts.json`` (the Buffett Partnership letters' own mental models:
generals, workouts, controls, the Dow as yardstick, the ground rules): :func:`concepts_for` and
:func:`cues_for` give a letter's vocabulary by its key, so a Berkshire letter's requests and
checks stay exactly those of ``buffett_concepts.json``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from letterchunk.errors import ConfigError
from letterchunk.layout import LetterKey, cleaned_name, is_compilation_source
from letterchunk.resources import resource_path

__all__ = [
    "load_concepts",
    "load_cues",
    "load_meanings",
    "concepts_for",
    "cues_for",
    "CONCEPTS_FILE",
    "COMPILATION_CONCEPTS_FILE",
]

CONCEPTS_FILE = "buffett_concepts.json"
COMPILATION_CONCEPTS_FILE = "partnership_concepts.json"


def _compilation(key: LetterKey) -> bool:
    return isinstance(key, str) and is_compilation_source(cleaned_name(key))


def concepts_for(key: LetterKey) -> frozenset[str]:
    """The vocabulary of the letter ``key`` (a year, or a compilation stem ``YYYY-Lk``)."""
    if not _compilation(key):
        return load_concepts()
    return load_concepts() | load_concepts(resource_path("schemas", COMPILATION_CONCEPTS_FILE))


def cues_for(key: LetterKey) -> dict[str, tuple[str, ...]]:
    """The cues of the letter ``key``'s vocabulary (:func:`concepts_for`)."""
    if not _compilation(key):
        return load_cues()
    return load_cues() | load_cues(resource_path("schemas", COMPILATION_CONCEPTS_FILE))


def load_concepts(path: str | Path | None = None) -> frozenset[str]:
    """The allowed concepts, from ``path`` or the shipped ``schemas/buffett_concepts.json``."""
    resolved = Path(path) if path is not None else resource_path("schemas", CONCEPTS_FILE)
    return frozenset(_load(str(resolved.resolve()))[0])


def load_cues(path: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """Concept -> its textual cues (case-insensitive), in vocabulary order; {} without "cues".

    A concept with no entry has no cues (the enrichment still matches the concept's own name).
    """
    resolved = Path(path) if path is not None else resource_path("schemas", CONCEPTS_FILE)
    return dict(_load(str(resolved.resolve()))[1])


def load_meanings(path: str | Path | None = None) -> dict[str, str]:
    """Concept -> its one-line meaning, in vocabulary order; {} without "meanings"."""
    resolved = Path(path) if path is not None else resource_path("schemas", CONCEPTS_FILE)
    return dict(_load(str(resolved.resolve()))[2])


_Loaded = tuple[
    tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, str], ...]
]


def _only_known(path: str, key: str, mapping: dict[str, object], concepts: list[str]) -> None:
    """Refuse a ``key`` mapping ("cues", "meanings") that names a concept the file lacks."""
    unknown = sorted(set(mapping) - set(concepts))
    if unknown:
        raise ConfigError(
            f'{path}: "{key}" names concept(s) missing from "concepts": {", ".join(unknown)}; '
            f'add them to "concepts" or remove their {key}'
        )


@lru_cache(maxsize=8)
def _load(path: str) -> _Loaded:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: cannot read the concept vocabulary ({exc}); "
            'it must be UTF-8 JSON like {"concepts": ["float economics", ...]}'
        ) from exc
    concepts = data.get("concepts") if isinstance(data, dict) else None
    if (
        not isinstance(concepts, list)
        or not concepts
        or not all(isinstance(c, str) and c.strip() for c in concepts)
    ):
        raise ConfigError(
            f'{path}: "concepts" must be a non-empty list of non-empty strings; fix the file'
        )
    cues = data.get("cues", {})
    if not isinstance(cues, dict) or not all(
        isinstance(v, list) and all(isinstance(c, str) and c.strip() for c in v)
        for v in cues.values()
    ):
        raise ConfigError(
            f'{path}: "cues" must map each concept to a list of non-empty strings, like '
            '{"float economics": ["float"]}; fix the file'
        )
    _only_known(path, "cues", cues, concepts)
    meanings = data.get("meanings", {})
    if not isinstance(meanings, dict) or not all(
        isinstance(v, str) and v.strip() for v in meanings.values()
    ):
        raise ConfigError(
            f'{path}: "meanings" must map each concept to a non-empty string, like '
            '{"float economics": "insurance float as a source of investable funds"}; fix the file'
        )
    _only_known(path, "meanings", meanings, concepts)
    ordered = tuple((c, tuple(cues[c])) for c in concepts if c in cues)
    means = tuple((c, meanings[c]) for c in concepts if c in meanings)
    return tuple(concepts), ordered, means
