"""Where the shipped resource folders (``prompts/``, ``schemas/``) live.

Lookup order for ``resource_path(kind, name)``:

1. ``$LETTERCHUNK_RESOURCES/<kind>/<name>`` when the env var is set (read at call time);
2. ``letterchunk/_resources/<kind>/<name>`` inside the installed package (the wheel
   force-includes the repo-root ``prompts/`` and ``schemas/`` there, see ``pyproject.toml``);
3. ``<repo root>/<kind>/<name>`` for an editable install or a source checkout.

A missing file raises :class:`~letterchunk.errors.ConfigError` naming every place looked at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from letterchunk.errors import ConfigError
from letterchunk.install import pip_install
from letterchunk.settings import Settings

__all__ = ["resource_path", "RESOURCES_ENV"]

RESOURCES_ENV = "LETTERCHUNK_RESOURCES"

Kind = Literal["prompts", "schemas"]
_KINDS = ("prompts", "schemas")

_PACKAGE_DIR = Path(__file__).resolve().parent


def _candidates(kind: str, override: Path | None) -> list[Path]:
    if override is not None:
        return [override / kind]
    return [_PACKAGE_DIR / "_resources" / kind, _PACKAGE_DIR.parents[1] / kind]


def resource_path(kind: Kind, name: str) -> Path:
    """Path of the shipped resource ``name`` in the ``kind`` folder (``prompts`` or ``schemas``)."""
    if kind not in _KINDS:
        raise ValueError(f"resource kind must be one of {_KINDS}, not {kind!r}")
    if not name or Path(name).is_absolute() or ".." in Path(name).parts:
        raise ValueError(f"resource name must be a relative path inside {kind}/, not {name!r}")
    override = Settings.from_env().resources_dir
    tried = []
    for folder in _candidates(kind, override):
        path = folder / name
        if path.is_file():
            return path
        tried.append(str(path))
    hint = (
        f"unset {RESOURCES_ENV} or point it at a folder holding {kind}/{name}"
        if override is not None
        else f"reinstall letterchunk ({pip_install(reinstall=True)}) "
        "so the shipped resources are present"
    )
    raise ConfigError(f"resource {kind}/{name} not found (looked at {', '.join(tried)}); {hint}")
