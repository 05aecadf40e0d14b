"""Safe per-chunk token size from rate and context limits (spec §B.5, defaults §B.6; docs/spec.md).

Let C be the model context, R_p / R_a the tokens reserved for the prompt and the answer, K the
number of chunks a retrieval query packs into one request, B the safety buffer, TPM the
tokens-per-minute limit and req/min the requests expected per minute.  Then::

    T_req        = floor(TPM / req_per_min)
    T_chunk_ctx  = floor((C - R_p - R_a) / K)
    T_chunk_tpm  = floor((T_req - (R_p + R_a)) / K)
    T_chunk_safe = B * min(T_chunk_ctx, T_chunk_tpm)        (floored to whole tokens)
    W_chunk_safe = floor(T_chunk_safe / 1.3)

The spec's worked example (C=128000, R_p=1200, R_a=1500, K=6, B=0.8, TPM=90000, 10 req/min)
gives T_chunk_safe = 840 tokens and W_chunk_safe = 646 words.  (The spec's prose says "1 token ≈
1.3 words" but its formula divides tokens by 1.3, i.e. ≈1.3 tokens per word, which is the usual
figure for English; we follow the formula.)

Settings come from, lowest to highest precedence: the §B.6 defaults, environment variables
(:data:`ENV_VARS`), then explicit overrides (the CLI options).  Env vars are read only when
:func:`settings_from_env` is called, never at import time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from letterchunk.errors import ConfigError
from letterchunk.settings import Settings

__all__ = [
    "BudgetSettings",
    "BudgetResult",
    "ENV_VARS",
    "TOKENS_PER_WORD",
    "settings_from_env",
    "compute_budget",
]

TOKENS_PER_WORD = 1.3

# field name -> environment variable (spec §B.5 names; the two reserved-size variables are
# ours, the spec only gives example values for them)
ENV_VARS: dict[str, str] = {
    "context_limit": "MODEL_CONTEXT_LIMIT",
    "tpm": "OPENAI_TPM_LIMIT",
    "rpm": "OPENAI_RPM_LIMIT",
    "requests_per_minute": "EXPECTED_REQUESTS_PER_MINUTE",
    "top_k": "TARGET_TOP_K_FOR_BUDGET",
    "safety_buffer": "CHUNK_SAFETY_BUFFER",
    "reserved_prompt": "CHUNK_RESERVED_PROMPT_TOKENS",
    "reserved_answer": "CHUNK_RESERVED_ANSWER_TOKENS",
    "max_tokens_hint": "CHUNK_MAX_TOKENS_HINT",
    "max_words_hint": "CHUNK_MAX_WORDS_HINT",
}

# the option that sets each field, for error messages
_OPTION = {
    "context_limit": "--context-limit",
    "tpm": "--tpm",
    "rpm": "--rpm",
    "requests_per_minute": "--requests-per-minute",
    "top_k": "--top-k",
    "safety_buffer": "--safety-buffer",
    "reserved_prompt": "--reserved-prompt",
    "reserved_answer": "--reserved-answer",
    "max_tokens_hint": "--max-tokens-hint",
    "max_words_hint": "--max-words-hint",
}


@dataclass(frozen=True)
class BudgetSettings:
    """Inputs of spec §B.5 (docs/spec.md); defaults are §B.6's (reserved sizes: §B.5's example)."""

    context_limit: int = 128_000
    tpm: int = 90_000
    rpm: int = 60  # informational (spec §B.6): checked against requests_per_minute
    requests_per_minute: int = 10
    top_k: int = 6
    safety_buffer: float = 0.8
    reserved_prompt: int = 1_200
    reserved_answer: int = 1_500
    max_tokens_hint: int | None = None  # explicit override of the computed token size
    max_words_hint: int | None = None  # explicit override of the computed word size

    def check(self) -> None:
        """Raise :class:`ConfigError` naming the option when a value makes the model meaningless."""
        for name in ("context_limit", "tpm", "rpm", "requests_per_minute", "top_k"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    f"{_OPTION[name]} (env {ENV_VARS[name]}) must be a positive integer, "
                    f"got {getattr(self, name)}"
                )
        for name in ("reserved_prompt", "reserved_answer"):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"{_OPTION[name]} (env {ENV_VARS[name]}) must be >= 0, "
                    f"got {getattr(self, name)}"
                )
        if not 0 < self.safety_buffer <= 1:
            raise ConfigError(
                f"--safety-buffer (env CHUNK_SAFETY_BUFFER) must be in (0, 1], e.g. 0.8 for 20% "
                f"headroom; got {self.safety_buffer}"
            )
        for name in ("max_tokens_hint", "max_words_hint"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(
                    f"{_OPTION[name]} (env {ENV_VARS[name]}) must be positive, got {value}"
                )
        reserved = self.reserved_prompt + self.reserved_answer
        if reserved >= self.context_limit:
            raise ConfigError(
                f"--reserved-prompt + --reserved-answer = {reserved} leaves no room in a "
                f"{self.context_limit}-token context; lower them or raise --context-limit"
            )
        t_req = self.tpm // self.requests_per_minute
        if t_req <= reserved:
            raise ConfigError(
                f"each request may use {t_req} tokens (--tpm {self.tpm} / --requests-per-minute "
                f"{self.requests_per_minute}), not more than the {reserved} reserved for "
                "prompt and "
                "answer; raise --tpm, or lower --requests-per-minute or the reserved sizes"
            )


@dataclass(frozen=True)
class BudgetResult:
    settings: BudgetSettings
    t_req: int
    t_chunk_ctx: int
    t_chunk_tpm: int
    t_chunk_safe: int
    w_chunk_safe: int
    binding: str  # "tpm" or "context": which limit set the size
    max_tokens_per_chunk: int  # t_chunk_safe unless max_tokens_hint overrides it
    max_words_per_chunk: int  # w_chunk_safe unless max_words_hint overrides it
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out


def settings_from_env(
    env: Mapping[str, str] | None = None, **overrides: int | float | None
) -> BudgetSettings:
    """Defaults, then env vars (parsed by :meth:`letterchunk.settings.Settings.from_env`), then
    ``overrides`` whose value is not None."""
    # field name -> value: BudgetSettings' fields differ in type, so the mapping is dynamic
    values: dict[str, Any] = dict(Settings.from_env(env).budget.given())
    unknown = set(overrides) - {f.name for f in fields(BudgetSettings)}
    if unknown:
        raise TypeError(f"unknown budget setting(s): {sorted(unknown)}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(BudgetSettings(), **values)


def compute_budget(settings: BudgetSettings | None = None) -> BudgetResult:
    s = settings or BudgetSettings()
    s.check()
    reserved = s.reserved_prompt + s.reserved_answer
    t_req = s.tpm // s.requests_per_minute
    t_chunk_ctx = (s.context_limit - reserved) // s.top_k
    t_chunk_tpm = (t_req - reserved) // s.top_k
    binding = "tpm" if t_chunk_tpm <= t_chunk_ctx else "context"
    # round() first so that 0.8 * 1050 = 840.0000000000001 or 839.9999999 floors to 840
    t_chunk_safe = math.floor(round(s.safety_buffer * min(t_chunk_ctx, t_chunk_tpm), 6))
    w_chunk_safe = math.floor(round(t_chunk_safe / TOKENS_PER_WORD, 6))
    max_tokens = s.max_tokens_hint or t_chunk_safe
    if s.max_words_hint:
        max_words = s.max_words_hint
    elif s.max_tokens_hint:
        max_words = math.floor(round(s.max_tokens_hint / TOKENS_PER_WORD, 6))
    else:
        max_words = w_chunk_safe
    warnings: list[str] = []
    if s.requests_per_minute > s.rpm:
        warnings.append(
            f"expected {s.requests_per_minute} requests/min exceeds the RPM limit {s.rpm}; "
            "requests will be throttled"
        )
    if t_chunk_safe < 1:
        warnings.append(
            "the safe chunk size is below one token; the limits leave no room for chunks"
        )
    return BudgetResult(
        settings=s,
        t_req=t_req,
        t_chunk_ctx=t_chunk_ctx,
        t_chunk_tpm=t_chunk_tpm,
        t_chunk_safe=t_chunk_safe,
        w_chunk_safe=w_chunk_safe,
        binding=binding,
        max_tokens_per_chunk=max_tokens,
        max_words_per_chunk=max_words,
        warnings=tuple(warnings),
    )
