"""One-token yes/no questions whose answer is read as a probability.

A small model's boolean field in a grammar-constrained answer collapses to ``false``, but its
probability of answering "yes" ranks passages well (``../shared/llm/README.md`` measured it).
:func:`ask_yes_no` sends the conversation with ``max_tokens=1``, ``logprobs`` and
``top_logprobs``, and reads ``p(yes) / (p(yes) + p(no))`` over the top tokens (any case,
surrounding blanks ignored).  llama-server and the hosted OpenAI API both report
``choices[0].logprobs.content[0].top_logprobs``.

The conversation is a short standalone prompt (``enrich.judges``: one system message shared by
every question, then the quoted passage and the question), so a question costs about 150
prompt tokens and one generated token.

Asked of letterchunk's own model (its id, :data:`~letterchunk.llm.backend.MODEL_ID`), a question
also carries llama-server's ``cache_prompt: false``: the server then computes the whole prompt
afresh instead of reusing the part it shares with the request before.  Its arithmetic differs
slightly with what it reuses, so without this a probability depended on the request sequence (a
recording, a replayed run and a live run differed by up to 0.05); with it a question's answer is
a function of its prompt alone.  It costs the ~60 shared prompt tokens of compute a question, on
the local server only.  Hosted APIs never get the field (they refuse unknown ones).

Answers are cached like structured ones (key: the messages, the question's settings and mode
``LOGPROBS``), so a rerun asks nothing.  When the backend cannot give a probability (no
``logprobs`` in its answer, or neither "yes" nor "no" among the top tokens), ``p_yes`` is
``None`` and the caller decides without it.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.cache import CachedAnswer
from letterchunk.llm.client import LLMClient, Usage, usage_of

__all__ = [
    "TOP_LOGPROBS",
    "YesNo",
    "ask_yes_no",
    "is_question",
    "question_answer",
    "question_body",
    "yes_no_key",
]

TOP_LOGPROBS = 10  # within the hosted API's limit (20); "yes"/"no" are always among them here
_MODE = "LOGPROBS"


@dataclass(frozen=True)
class YesNo:
    """What one yes/no question gave."""

    p_yes: float | None  # p(yes) / (p(yes) + p(no)); None when no probability was available
    usage: Usage
    source: Literal["cache", "live"]
    http_attempts: int = 0
    latency_s: float = 0.0
    cached_tokens: int = 0  # prompt tokens the server reported as served from its cache


class _QuestionParams(TypedDict):
    """The parameters of a one-token yes/no question (they enter its cache key)."""

    temperature: float
    seed: int
    max_tokens: int
    logprobs: bool
    top_logprobs: int


def _params(client: LLMClient) -> _QuestionParams:
    s = client.settings
    return {
        "temperature": s.temperature,
        "seed": s.seed,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
    }


def yes_no_key(client: LLMClient, messages: list[dict]) -> str:
    """The cache key of this yes/no question on the client's settings."""
    return client.answer_key_for(
        messages, schema={"answer": "yes/no"}, params=_params(client), mode=_MODE
    )


def question_body(client: LLMClient, messages: list[dict]) -> dict[str, Any]:
    """The request body of the yes/no question ``messages`` (a live call and a batch line)."""
    body: dict[str, Any] = {"model": client.settings.model, "messages": messages, **_params(client)}
    if client.settings.model == MODEL_ID:  # llama-server: see the module docstring
        body["cache_prompt"] = False
    return body


def is_question(body: dict[str, Any]) -> bool:
    """Whether a request body is a one-token yes/no question."""
    return body.get("max_tokens") == 1 and bool(body.get("logprobs"))


def question_answer(
    response: Any, model: str, messages: list[dict] | None = None
) -> tuple[CachedAnswer, Usage]:
    """A question's answer as the cache keeps it (the first token's top logprobs as JSON; none
    is an answer too, so that a rerun does not ask again) and its usage (counted from
    ``messages`` when the server reports none)."""
    top = _top_logprobs(response)
    usage = usage_of(response, request_messages=messages or [], raw_text=top[0][0] if top else "")
    answer = CachedAnswer(
        raw_text=json.dumps(top),
        finish_reason="length",
        refusal=None,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        model=str(getattr(response, "model", None) or model),
    )
    return answer, usage


def _p_yes(top: list[tuple[str, float]]) -> float | None:
    yes = sum(math.exp(lp) for token, lp in top if token.strip().lower() == "yes")
    no = sum(math.exp(lp) for token, lp in top if token.strip().lower() == "no")
    return yes / (yes + no) if yes + no > 0 else None


def _top_logprobs(response: Any) -> list[tuple[str, float]]:
    """``(token, logprob)`` of the first generated token's alternatives; [] when absent."""
    try:
        first = response.choices[0].logprobs.content[0]
        return [(str(t.token), float(t.logprob)) for t in first.top_logprobs]
    except (AttributeError, IndexError, TypeError):
        return []


def ask_yes_no(client: LLMClient, messages: list[dict], *, chunk_id: str) -> YesNo:
    """Ask the conversation ``messages`` (ending with a yes/no question) for one token."""
    started = time.monotonic()
    cache = client.cache
    key = yes_no_key(client, messages)
    if cache is not None:
        hit = cache.lookup(key, chunk_id=chunk_id)  # offline miss raises CacheMiss
        if hit is not None:
            top = [(str(t), float(lp)) for t, lp in json.loads(hit.raw_text)]
            return YesNo(_p_yes(top), Usage(), "cache", 0, time.monotonic() - started)
    response, attempts = client.send_plain(question_body(client, messages), chunk_id=chunk_id)
    answer, usage = question_answer(response, client.settings.model, messages)
    client.count_usage(usage)
    if cache is not None:
        cache.store(key, answer)
    top = [(str(t), float(lp)) for t, lp in json.loads(answer.raw_text)]
    return YesNo(
        _p_yes(top), usage, "live", attempts, time.monotonic() - started, _cached_tokens(response)
    )


def _cached_tokens(response: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` (llama-server and OpenAI report it), or 0."""
    details = getattr(getattr(response, "usage", None), "prompt_tokens_details", None)
    return int(getattr(details, "cached_tokens", 0) or 0)
