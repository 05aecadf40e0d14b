"""One place that turns options and the environment into a ready
:class:`~letterchunk.llm.client.LLMClient`.

Backend choice:

* ``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL`` set → that API (hosted OpenAI, or any
  OpenAI-compatible server), configured by :meth:`LLMSettings.from_env`;
* neither → the embedded llama-server (the ``local`` extra), started here and stopped when the
  context manager exits (Ctrl-C included);
* ``cache="offline"`` never starts a server: every answer must come from the cache.

Only the embedded server gets ``LLMSettings.embedded``: a request past its timeout is kept open
while that server says it is still working on it (``client.py``); an API keeps the plain
timeout, since another client's work may keep a shared server busy.

The CLI (``run``, ``enrich``, ``repair``), the Python API (:func:`letterchunk.run`), the benches
and the tests all use :func:`open_client`, so they choose backends, caches and limits the same
way.  :func:`context_tokens` is the matching answer to "how large a request fits the model".
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal, TypedDict

from letterchunk.llm import backend
from letterchunk.llm.cache import ResponseCache
from letterchunk.llm.client import Limiter, LLMClient, LLMSettings
from letterchunk.llm.prompts import prompt_hash
from letterchunk.settings import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    EMBEDDED_TIMEOUT_S,
    HOSTED_CONTEXT,
    Settings,
)

__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "EMBEDDED_TIMEOUT_S",
    "ENV_CACHE_DIR",
    "ENV_CONTEXT",
    "ENV_RETRIES",
    "HOSTED_CONTEXT",
    "ENV_TIMEOUT",
    "CacheMode",
    "backend_configured",
    "cache_dir_from",
    "context_tokens",
    "open_client",
    "transport_settings",
    "TransportSettings",
]

ENV_CACHE_DIR = "LETTERCHUNK_CACHE_DIR"
ENV_TIMEOUT, ENV_RETRIES = "LETTERCHUNK_TIMEOUT_S", "LETTERCHUNK_TRANSPORT_RETRIES"
ENV_CONTEXT = "LETTERCHUNK_CONTEXT_TOKENS"

CacheMode = Literal["use", "refresh", "off", "offline"]


class TransportSettings(TypedDict):
    """The :class:`LLMSettings` overrides for one request's timeout and its retries."""

    timeout_s: float
    transport_retries: int


def backend_configured(env: Mapping[str, str] | None = None) -> bool:
    """True when the environment names an API (hosted OpenAI or a compatible server)."""
    return Settings.from_env(env).api_configured


def transport_settings(
    timeout_s: float | None,
    transport_retries: int | None,
    *,
    embedded: bool,
    env: Mapping[str, str] | None = None,
) -> TransportSettings:
    """Timeout and transport retries: the argument, then the environment, then the default for
    this backend (the embedded model on a CPU gets a longer timeout)."""
    s = Settings.from_env(env)
    return {
        "timeout_s": timeout_s if timeout_s is not None else s.backend_timeout_s(embedded),
        "transport_retries": transport_retries
        if transport_retries is not None
        else s.transport_retries,
    }


def cache_dir_from(cache_dir: str | Path | None) -> Path:
    """The answer cache folder: the argument, else ``$LETTERCHUNK_CACHE_DIR``, else ``./cache``."""
    return Path(cache_dir) if cache_dir else Settings.from_env().cache_dir


def context_tokens(value: int | None = None, env: Mapping[str, str] | None = None) -> int:
    """The model's context window for a run: ``value``, else ``$LETTERCHUNK_CONTEXT_TOKENS``, else
    the embedded server's (``LETTERCHUNK_CTX_SIZE`` or its default), else an API's
    (:meth:`letterchunk.settings.Settings.run_context`)."""
    return Settings.from_env(env).run_context(value)


@contextlib.contextmanager
def open_client(
    *,
    model: str | None = None,
    mode: str | None = None,
    cache: CacheMode = "use",
    cache_dir: str | Path | None = None,
    limiter: Callable[[LLMSettings], Limiter | None] | None = None,
    timeout_s: float | None = None,
    transport_retries: int | None = None,
    env: Mapping[str, str] | None = None,
    **settings: object,
) -> Iterator[LLMClient]:
    """An :class:`LLMClient` with its answer cache, on the configured API or the embedded server.

    ``limiter`` builds the rate limiter (or ``None``) once the settings are known; ``settings``
    are further :class:`LLMSettings` overrides (``None`` values are ignored); ``env`` replaces
    ``os.environ`` when choosing the backend (a replay names its recorded server here).  The
    cache is opened at once, so a damaged cache fails before a server starts or a request is
    sent.
    """
    env_settings = Settings.from_env(env)
    with contextlib.ExitStack() as stack:
        answers = None
        if cache != "off":
            answers = stack.enter_context(ResponseCache(cache_dir_from(cache_dir), cache)).open()
        embedded = not env_settings.api_configured
        overrides: dict[str, object] = {
            **settings,
            **transport_settings(timeout_s, transport_retries, embedded=embedded, env=env),
        }
        if not embedded:
            llm_settings = LLMSettings.from_settings(
                env_settings, model=model, mode=mode, **overrides
            )
        else:
            if cache == "offline":  # answers come from the cache only: start nothing
                base_url = backend.OFFLINE_URL
            else:
                base_url = stack.enter_context(backend.embedded_server(env=env))
                # our own server: a slow answer is waited for while it says it is busy
                overrides.setdefault("embedded", True)
            # the embedded server answers to its own model id; the API variables (OPENAI_*,
            # LETTERCHUNK_MODEL, LETTERCHUNK_INSTRUCTOR_MODE) do not apply to it
            llm_settings = LLMSettings.from_settings(
                dataclasses.replace(
                    env_settings,
                    openai_api_key=None,
                    openai_base_url=None,
                    model=None,
                    instructor_mode=None,
                ),
                base_url=base_url,
                model=model or backend.MODEL_ID,
                mode=mode or "JSON_SCHEMA",
                **overrides,
            )
        client = stack.enter_context(
            LLMClient(
                llm_settings,
                cache=answers,
                prompt_hash=prompt_hash(),
                limiter=limiter(llm_settings) if limiter else None,
            )
        )
        yield client
