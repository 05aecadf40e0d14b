"""Prompt templates: files in ``prompts/``, rendered by one function that fails loudly.

A template is a Markdown file whose placeholders are written ``{{name}}``.  :func:`render` fills
them and raises :class:`~letterchunk.errors.ConfigError` when a placeholder has no value *or* a
value has no placeholder: a typo in either place would otherwise change the prompt silently.

:func:`prompt_hash` digests every template file; it is part of every cache key, so editing a
prompt invalidates cached answers.

Where templates live: the folder of ``letterchunk.resources.resource_path("prompts", ...)``
(package ``_resources/`` in a wheel, else the repo-root ``prompts/``; env
``LETTERCHUNK_RESOURCES`` overrides).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from letterchunk.errors import ConfigError
from letterchunk.resources import resource_path

__all__ = ["render", "prompt_hash", "prompts_dir", "template_names"]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_SUFFIX = ".md"
_ANCHOR = "enrich_system"


def prompts_dir() -> Path:
    """The folder that holds the prompt templates."""

    # resource_path locates files; the enrichment system prompt anchors the folder
    return resource_path("prompts", f"{_ANCHOR}{_SUFFIX}").parent


def template_names() -> list[str]:
    """Names (without ``.md``) of every template, sorted."""
    folder = prompts_dir()
    if not folder.is_dir():
        raise ConfigError(
            f"prompt folder {folder} is missing; reinstall letterchunk or set "
            "LETTERCHUNK_RESOURCES to the folder that contains prompts/"
        )
    return sorted(p.name[: -len(_SUFFIX)] for p in folder.glob(f"*{_SUFFIX}") if p.is_file())


def _template_text(name: str) -> str:
    path = prompts_dir() / f"{name}{_SUFFIX}"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"prompt template {path} not found; known templates: {', '.join(template_names())}"
        ) from None


def placeholders(name: str) -> set[str]:
    """The variable names template ``name`` expects."""
    return set(_PLACEHOLDER.findall(_template_text(name)))


def render(name: str, **variables: object) -> str:
    """Fill template ``name`` (file ``prompts/<name>.md``) with ``variables``.

    Values are inserted with ``str()``, exactly once each, without re-scanning inserted text (a
    chunk that happens to contain ``{{x}}`` is left alone).  Raises ConfigError naming the
    template when a placeholder has no value or a value is not used by the template.
    """
    text = _template_text(name)
    wanted = set(_PLACEHOLDER.findall(text))
    missing = sorted(wanted - variables.keys())
    unused = sorted(variables.keys() - wanted)
    if missing or unused:
        parts = []
        if missing:
            parts.append(f"missing value(s) for {', '.join(missing)}")
        if unused:
            parts.append(f"value(s) not used by the template: {', '.join(unused)}")
        raise ConfigError(
            f"prompt template {name}{_SUFFIX}: {'; '.join(parts)}; "
            "pass exactly the variables the template names with {{...}}"
        )
    return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), text)


def prompt_hash() -> str:
    """sha256 over every template's name and bytes, in name order (part of every cache key)."""
    digest = hashlib.sha256()
    folder = prompts_dir()
    for name in template_names():
        digest.update(name.encode("utf-8") + b"\0")
        digest.update((folder / f"{name}{_SUFFIX}").read_bytes() + b"\0")
    return digest.hexdigest()
