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
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from letterchunk.llm import backend
from letterchunk.llm.cache import DEFAULT_CACHE_DIR, ResponseCache
from letterchunk.llm.client import Limiter, LLMClient, LLMSettings, env_number
from letterchunk.llm.prompts import prompt_hash

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
]

ENV_CACHE_DIR = "LETTERCHUNK_CACHE_DIR"
ENV_TIMEOUT, ENV_RETRIES = "LETTERCHUNK_TIMEOUT_S", "LETTERCHUNK_TRANSPORT_RETRIES"
# one request: two minutes on an API; the embedded model on a loaded 2-core CPU needs minutes
DEFAULT_TIMEOUT_S, EMBEDDED_TIMEOUT_S = 120.0, 600.0
DEFAULT_RETRIES = 3  # extra attempts after a timeout, 429, 5xx or reset: 4 in all
ENV_CONTEXT = "LETTERCHUNK_CONTEXT_TOKENS"
HOSTED_CONTEXT = 128_000  # gpt-4o-mini and most hosted models; set --context-tokens for others

CacheMode = Literal["use", "refresh", "off", "offline"]


def backend_configured(env: Mapping[str, str] | None = None) -> bool:
    """True when the environment names an API (hosted OpenAI or a compatible server)."""
    env = os.environ if env is None else env
    return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))


def transport_settings(
    timeout_s: float | None,
    transport_retries: int | None,
    *,
    embedded: bool,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Timeout and transport retries: the argument, then the environment, then the default for
    this backend (the embedded model on a CPU gets a longer timeout)."""
    env = dict(os.environ if env is None else env)
    if timeout_s is None:
        timeout_s = env_number(ENV_TIMEOUT, float, env)
    if transport_retries is None:
        transport_retries = env_number(ENV_RETRIES, int, env)
    return {
        "timeout_s": timeout_s
        if timeout_s is not None
        else (EMBEDDED_TIMEOUT_S if embedded else DEFAULT_TIMEOUT_S),
        "transport_retries": transport_retries
        if transport_retries is not None
        else DEFAULT_RETRIES,
    }


def cache_dir_from(cache_dir: str | Path | None) -> Path:
    """The answer cache folder: the argument, else ``$LETTERCHUNK_CACHE_DIR``, else ``./cache``."""
    return Path(cache_dir or os.environ.get(ENV_CACHE_DIR) or DEFAULT_CACHE_DIR)


def context_tokens(value: int | None = None, env: Mapping[str, str] | None = None) -> int:
    """The model's context window: ``value``, else ``$LETTERCHUNK_CONTEXT_TOKENS``, else the
    embedded server's (``LETTERCHUNK_CTX_SIZE`` or its default), else an API's."""
    env = dict(os.environ if env is None else env)
    if value is None:
        value = env_number(ENV_CONTEXT, int, env)
    if value is None:
        if backend_configured(env):
            return HOSTED_CONTEXT
        value = backend.server_from_env(env).ctx_size
    return int(value)


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
    **settings: Any,
) -> Iterator[LLMClient]:
    """An :class:`LLMClient` with its answer cache, on the configured API or the embedded server.

    ``limiter`` builds the rate limiter (or ``None``) once the settings are known; ``settings``
    are further :class:`LLMSettings` overrides (``None`` values are ignored); ``env`` replaces
    ``os.environ`` when choosing the backend (a replay names its recorded server here).  The
    cache is opened at once, so a damaged cache fails before a server starts or a request is
    sent.
    """
    env = dict(os.environ if env is None else env)
    with contextlib.ExitStack() as stack:
        answers = None
        if cache != "off":
            answers = stack.enter_context(ResponseCache(cache_dir_from(cache_dir), cache)).open()
        embedded = not backend_configured(env)
        settings.update(
            transport_settings(timeout_s, transport_retries, embedded=embedded, env=env)
        )
        if not embedded:
            llm_settings = LLMSettings.from_env(env=env, model=model, mode=mode, **settings)
        else:
            if cache == "offline":  # answers come from the cache only: start nothing
                base_url = backend.OFFLINE_URL
            else:
                base_url = stack.enter_context(backend.embedded_server(env=env))
                # our own server: a slow answer is waited for while it says it is busy
                settings.setdefault("embedded", True)
            # the embedded server answers to its own model id; OPENAI_* settings do not apply
            llm_settings = LLMSettings.from_env(
                env={},
                base_url=base_url,
                model=model or backend.MODEL_ID,
                mode=mode or "JSON_SCHEMA",
                **settings,
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
