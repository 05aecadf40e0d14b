"""The controlled vocabulary of ``metadata.buffett_concepts`` (seed 000 §5.2).

The list lives in ``schemas/buffett_concepts.json`` (``{"concepts": [...]}``) so that it stays the
same across years and can be reviewed as data.  The validator rejects a concept outside it
(rule ``concept.unknown``); a concept that differs only in case is ``concept.case``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .errors import ConfigError
from .resources import resource_path

__all__ = ["load_concepts", "CONCEPTS_FILE"]

CONCEPTS_FILE = "buffett_concepts.json"


def load_concepts(path: str | Path | None = None) -> frozenset[str]:
    """The allowed concepts, from ``path`` or the shipped ``schemas/buffett_concepts.json``."""
    resolved = Path(path) if path is not None else resource_path("schemas", CONCEPTS_FILE)
    return _load(str(resolved.resolve()))


@lru_cache(maxsize=8)
def _load(path: str) -> frozenset[str]:
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
    return frozenset(concepts)
