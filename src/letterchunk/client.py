"""One place that turns options and the environment into a ready :class:`~letterchunk.llm.LLMClient`.

Backend choice:

* ``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL`` set → that API (hosted OpenAI, or any
  OpenAI-compatible server), configured by :meth:`LLMSettings.from_env`;
* neither → the embedded llama-server (the ``local`` extra), started here and stopped when the
  context manager exits (Ctrl-C included);
* ``cache="offline"`` never starts a server: every answer must come from the cache.

The CLI (``run``, ``enrich``, ``repair``) and the Python API (:func:`letterchunk.run`) both use
:func:`open_client`, so they choose backends, caches and limits the same way.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from .cache import DEFAULT_CACHE_DIR, ResponseCache
from .llm import LLMClient, LLMSettings
from .prompts import prompt_hash

__all__ = ["ENV_CACHE_DIR", "CacheMode", "backend_configured", "cache_dir_from", "open_client"]

ENV_CACHE_DIR = "LETTERCHUNK_CACHE_DIR"

CacheMode = Literal["use", "refresh", "off", "offline"]


def backend_configured(env: dict[str, str] | None = None) -> bool:
    """True when the environment names an API (hosted OpenAI or a compatible server)."""
    env = os.environ if env is None else env
    return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))


def cache_dir_from(cache_dir: str | Path | None) -> Path:
    """The answer cache folder: the argument, else ``$LETTERCHUNK_CACHE_DIR``, else ``./cache``."""
    return Path(cache_dir or os.environ.get(ENV_CACHE_DIR) or DEFAULT_CACHE_DIR)


@contextlib.contextmanager
def open_client(
    *,
    model: str | None = None,
    mode: str | None = None,
    cache: CacheMode = "use",
    cache_dir: str | Path | None = None,
    limiter: Callable[[LLMSettings], Any] | None = None,
    **settings: Any,
) -> Iterator[LLMClient]:
    """An :class:`LLMClient` with its answer cache, on the configured API or the embedded server.

    ``limiter`` builds the rate limiter (or ``None``) once the settings are known; ``settings``
    are further :class:`LLMSettings` overrides (``None`` values are ignored).
    """
    with contextlib.ExitStack() as stack:
        answers = None
        if cache != "off":
            answers = stack.enter_context(ResponseCache(cache_dir_from(cache_dir), cache))
        if backend_configured():
            llm_settings = LLMSettings.from_env(model=model, mode=mode, **settings)
        else:
            from . import backend

            if cache == "offline":  # answers come from the cache only: start nothing
                base_url = backend.OFFLINE_URL
            else:
                base_url = stack.enter_context(backend.embedded_server())
            llm_settings = LLMSettings.from_env(
                env={}, base_url=base_url, model=model or backend.MODEL_ID,
                mode=mode or "JSON_SCHEMA", **settings,
            )
        client = stack.enter_context(LLMClient(
            llm_settings, cache=answers, prompt_hash=prompt_hash(),
            limiter=limiter(llm_settings) if limiter else None,
        ))
        yield client
