"""One structured LLM call per request, through instructor, with transport retries and a cache.

``LLMClient.complete(messages, response_model, chunk_id=...)`` sends exactly one chat request
(unless the cache answers it) and returns a :class:`Completion`:

* a valid answer → ``value`` set;
* malformed JSON, truncated output (``finish_reason="length"``), a refusal or an answer that
  fails the response model → ``value=None`` and ``error`` set, with the raw text and the usage
  of that attempt.  These never raise: the repair loop (``repair.py``) decides what to re-ask.
  instructor is called with ``max_retries=0`` so it never re-asks on its own.

Transport faults are a separate loop, below instructor: HTTP 429 (``Retry-After`` honoured),
408/409/5xx, timeouts and connection resets are retried by tenacity on those named exception
types, with exponential backoff and a cap.  They are not repairs.  When they run out,
:class:`~letterchunk.errors.BackendError` says what to do.  Other HTTP errors (401, 400, 404)
raise BackendError at once.  ``KeyboardInterrupt`` is never caught.  An HTTP 200 whose body
is not a chat completion (HTML, empty, JSON without ``choices``) is retried the same way, for
the structured call and the one-token questions alike (``transport.not_a_completion``).  With
the embedded server (``LLMSettings.embedded``) a request the server is still working on is kept
open past its timeout rather than sent again (``transport.ServerWatch``).

An optional ``limiter`` (rate limits, budget caps) is called around every HTTP request:
``limiter.acquire(estimated_tokens)`` before (it may raise ``BudgetExceeded``) and
``limiter.settle(estimated_tokens, actual_total_tokens, prompt_tokens=, completion_tokens=)``
after (actual 0 and no split when the request failed without an answer).  The estimate is
the o200k token count of what is sent (messages, plus the schema instructor adds) +
``max_tokens``.

Settings are read from the environment only when :meth:`LLMSettings.from_env` is called
(``config.py``; re-exported here).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
)

from letterchunk.errors import BackendError, LetterchunkError
from letterchunk.llm.cache import CachedAnswer, ResponseCache, cache_key
from letterchunk.llm.config import HOSTED_OPENAI_URL, LLMSettings
from letterchunk.llm.transport import (
    ServerWatch,
    Transient,
    WaitPlan,
    classify,
    not_a_completion,
    short,
)
from letterchunk.redact import redact, register_secret, register_url, secret_values
from letterchunk.tokens import count_tokens

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = [
    "Usage",
    "LLMSettings",
    "Completion",
    "LLMClient",
    "Limiter",
    "HOSTED_OPENAI_URL",
    "estimate_tokens",
    "CompletionClient",
    "grammar_backed",
    "SERVER_FIELDS",
]

log = logging.getLogger(__name__)

# request fields of llama-server's own, outside the OpenAI API (``send_plain`` passes them on)
SERVER_FIELDS = frozenset({"cache_prompt"})


class _InstructorAttemptFilter(logging.Filter):
    """instructor logs each failed attempt at ERROR ("API call failed", "Max retries exceeded").

    Every one of those reaches letterchunk as an exception that it handles and reports (a
    Completion.error for the repair loop, or a BackendError), so they are demoted to DEBUG and
    shown only when letterchunk itself logs at DEBUG (``--verbose``).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger("letterchunk").isEnabledFor(logging.DEBUG)
        return True


logging.getLogger("instructor.v2.retry").addFilter(_InstructorAttemptFilter())

# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Usage:
    """Tokens and HTTP requests that produced an answer (cache hits cost nothing)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.requests + other.requests,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "requests": self.requests,
        }


@dataclass
class Completion:
    """What one request (or cache hit) gave.  ``error`` set ⇔ ``value`` is None."""

    value: BaseModel | None
    raw_text: str
    usage: Usage
    source: Literal["cache", "live", "file"]  # file: repair's stand-in for values already there
    latency_s: float
    finish_reason: str | None
    error: str | None = None
    http_attempts: int = 0  # HTTP requests sent, transport retries included (0 for a cache hit)
    cache_key: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


class Limiter(Protocol):
    """Rate limiter / budget hook (implemented in ``limiter.py``)."""

    def acquire(self, estimated_tokens: int, *, max_tokens: int | None = None) -> None: ...

    def settle(
        self,
        estimated_tokens: int,
        actual_total_tokens: int,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None: ...

    def penalize(self, retry_after_s: float) -> None: ...


PER_MESSAGE_TOKENS = 4  # role + separators per chat message (OpenAI's documented overhead)


def estimate_tokens(request: dict[str, Any]) -> int:
    """Tokens a request may cost, the charge a rate-limited API makes when it admits it: o200k
    count of what is sent (+4 per message), the schema or tools, and ``max_tokens``."""
    total = 0
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        total += PER_MESSAGE_TOKENS + count_tokens(content or "")
    for extra in ("tools", "response_format"):
        if request.get(extra):
            total += count_tokens(json.dumps(request[extra], sort_keys=True))
    return total + int(request.get("max_tokens") or 0)


# --------------------------------------------------------------------------- client


@dataclass
class _Call:
    """Per-call state shared between complete() and the create function instructor calls."""

    chunk_id: str
    cached: Any = None  # a ChatCompletion rebuilt from the cache, served instead of HTTP
    response: Any = None  # the ChatCompletion the server (or cache) gave
    http_attempts: int = 0
    usage: Usage = field(default_factory=Usage)


class CompletionClient(Protocol):
    """What the pipeline and the repair loop need of a client: its settings and one call."""

    @property
    def settings(self) -> LLMSettings: ...

    def complete(
        self,
        messages: list[dict],
        response_model: type[BaseModel],
        *,
        chunk_id: str,
        prompt_hash: str | None = None,
    ) -> Completion: ...


def grammar_backed(client: object) -> bool:
    """Whether the backend constrains answers by the JSON schema (instructor JSON_SCHEMA mode;
    also for no client at all, as the default mode).

    Then entity names and quotes are offered as enums of the chunk's own names and sentences;
    with tool calling (hosted OpenAI) the enums would only repeat the chunk in the request.
    """
    settings = getattr(client, "settings", None)
    return getattr(settings, "mode", "JSON_SCHEMA") == "JSON_SCHEMA"


class LLMClient:
    """Structured completions against one backend; thread-safe (one instance per run)."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        cache: ResponseCache | None = None,
        limiter: Limiter | None = None,
        prompt_hash: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.cache = cache
        self.limiter = limiter
        self.prompt_hash = prompt_hash
        self._sleep = sleep
        self._openai: openai.OpenAI | None = None
        self._lock = threading.Lock()
        self.usage = Usage()  # everything this client spent, failed answers included
        # a key given in code rather than in the environment is masked in messages too
        if settings.api_key not in secret_values():
            register_secret(settings.api_key)
        register_url(settings.base_url)  # a base URL's password, as given or from the env
        # the embedded server: a slow answer is waited for while the server is busy with it
        self._watch = ServerWatch(settings) if settings.embedded else None

    @property
    def waiting(self) -> dict[str, str]:
        """chunk id -> why the embedded server's answer is waited for past its deadline."""
        return self._watch.waiting if self._watch is not None else {}

    # -- plumbing
    def _client(self) -> openai.OpenAI:
        if self._openai is None:
            with self._lock:
                if self._openai is None:
                    # deferred: openai takes ~0.5 s to import; only a model call pays it
                    import openai

                    self._openai = openai.OpenAI(
                        base_url=self.settings.base_url,
                        api_key=self.settings.api_key,
                        max_retries=0,  # transport retries are ours (tenacity, below)
                        timeout=self.settings.timeout_s,
                    )
        return self._openai

    def close(self) -> None:
        if self._openai is not None:
            self._openai.close()
            self._openai = None

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, retry_state: RetryCallState) -> float:
        """Seconds before the next attempt: the server's Retry-After (clipped), else exponential
        backoff with jitter.  After a 429 the limiter holds every worker's next request as long,
        since the server's limit is shared: the others would only collect 429s of their own."""
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        s = self.settings
        if isinstance(exc, Transient) and exc.retry_after is not None:
            wait = min(exc.retry_after, s.retry_after_max_s)
        else:
            backoff = min(s.backoff_cap_s, s.backoff_base_s * 2 ** (retry_state.attempt_number - 1))
            wait = backoff * (0.5 + random.random() / 2)  # jitter: concurrent workers spread out
        if isinstance(exc, Transient) and exc.rate_limited and self.limiter is not None:
            self.limiter.penalize(wait)
        return wait

    def _send(self, call: _Call, **request: Any) -> Any:
        """The create function instructor calls: cache replay, or HTTP with transport retries."""
        if call.cached is not None:
            call.response = call.cached
            return call.cached

        s = self.settings

        def log_retry(rs: RetryCallState) -> None:
            # only Transient is retried, so the failed attempt raised one
            exc = rs.outcome.exception() if rs.outcome is not None else None
            log.warning(
                "%s: %s; retrying (attempt %d of %d)",
                call.chunk_id,
                exc.description if isinstance(exc, Transient) else exc,
                rs.attempt_number + 1,
                s.transport_retries + 1,
            )

        retrying = Retrying(
            stop=stop_after_attempt(s.transport_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(Transient),
            sleep=self._sleep,
            before_sleep=log_retry,
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    response = self._http(call, request)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise BackendError(
                f"{call.chunk_id}: LLM backend at {redact(s.base_url)} still failing after "
                f"{call.http_attempts} attempt(s) (last: {getattr(last, 'description', last)}); "
                "check that the server is up and reachable, lower the concurrency or the "
                "TPM/RPM limits, or raise --retries / --timeout (env "
                "LETTERCHUNK_TRANSPORT_RETRIES / LETTERCHUNK_TIMEOUT_S), "
                "then rerun (answers already received are cached)"
            ) from getattr(last, "cause", last)
        call.response = response
        return response

    def _http(self, call: _Call, request: dict[str, Any]) -> Any:
        # deferred: openai takes ~0.5 s to import; only a model call pays it
        import openai

        estimate = estimate_tokens(request)
        if self.limiter is not None:  # may raise BudgetExceeded: not caught here
            self.limiter.acquire(estimate, max_tokens=request.get("max_tokens"))
        call.http_attempts += 1
        split: dict[str, int] = {}
        try:
            client = self._client()
            if self._watch is not None:  # the embedded server: kept open while it is busy
                response = self._watch.send(
                    call.chunk_id,
                    lambda timeout: client.chat.completions.create(**request, timeout=timeout),
                    self.wait_plan(request),
                )
                self._watch.measure(response)
            else:
                response = client.chat.completions.create(**request)
            fault = not_a_completion(response)
            if fault is not None:
                raise fault
            usage = getattr(response, "usage", None)
            if usage is not None:
                split = {
                    "prompt_tokens": int(usage.prompt_tokens or 0),
                    "completion_tokens": int(usage.completion_tokens or 0),
                }
            return response
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 with no JSON body
            body = exc.doc if isinstance(exc, json.JSONDecodeError) else exc.object
            raise not_a_completion(body, cause=exc) or exc from exc
        except openai.OpenAIError as exc:
            mapped = classify(exc, self.settings)
            if mapped is None:
                raise BackendError(
                    f"{call.chunk_id}: unexpected error from the LLM client: {short(exc)}"
                ) from exc
            if isinstance(mapped, BackendError):
                raise mapped from exc
            raise mapped from exc
        finally:
            if self.limiter is not None:
                self.limiter.settle(estimate, sum(split.values()), **split)

    def wait_plan(self, request: dict[str, Any]) -> WaitPlan:
        """How long ``request`` is waited for on the embedded server (``transport.wait_plan``),
        from its size and the slowest speeds the server reported lately."""
        max_tokens = int(request.get("max_tokens") or 0)
        prompt = max(0, estimate_tokens(request) - max_tokens)
        return (self._watch or ServerWatch(self.settings)).plan(prompt, max_tokens)

    # -- the one public call
    def complete(
        self,
        messages: list[dict],
        response_model: type[BaseModel],
        *,
        chunk_id: str,
        prompt_hash: str | None = None,
    ) -> Completion:
        """Ask once for ``response_model``; see the module docstring for what can happen."""
        started = time.monotonic()
        call = _Call(chunk_id=chunk_id)
        key = self._look_up(call, messages, response_model, prompt_hash)
        value, error = self._ask(call, messages, response_model)
        if value is not None and type(value) is not response_model:
            value = _plain(value, response_model)
        response = call.response
        raw_text, finish_reason, refusal = answer_parts(response)
        value, error = self._judge(value, error, finish_reason, refusal)

        source: Literal["cache", "live"] = "cache" if call.cached is not None else "live"
        usage = Usage()
        if source == "live":
            usage = usage_of(response, request_messages=messages, raw_text=raw_text)
            self._remember(key, response, raw_text, finish_reason, refusal, usage)
        if error is not None:
            log.info("%s: unusable answer (%s)", chunk_id, error.split(":", 1)[0])
        return Completion(
            value=value if error is None else None,
            raw_text=raw_text,
            usage=usage,
            source=source,
            latency_s=time.monotonic() - started,
            finish_reason=finish_reason,
            error=error,
            http_attempts=call.http_attempts,
            cache_key=key,
        )

    # -- the steps of one call
    def _look_up(
        self,
        call: _Call,
        messages: list[dict],
        response_model: type[BaseModel],
        prompt_hash: str | None,
    ) -> str | None:
        """The cache key of this request (None without a cache); a cached answer is put on
        ``call`` so that ``_send`` serves it instead of HTTP.  Offline, a miss raises CacheMiss."""
        if self.cache is None:
            return None
        key = self.answer_key(messages, response_model, prompt_hash)
        hit = self.cache.lookup(key, chunk_id=call.chunk_id)  # offline miss raises CacheMiss
        if hit is not None:
            call.cached = _rebuild_completion(hit, self.settings.mode)
        return key

    def answer_key(
        self, messages: list[dict], response_model: type[BaseModel], prompt_hash: str | None = None
    ) -> str:
        """The cache key of this question on these settings (a batch files its answer here)."""
        s = self.settings
        return self.answer_key_for(
            messages,
            schema=response_model.model_json_schema(),
            params=s.generation_params,
            mode=s.mode,
            prompt_hash=prompt_hash,
        )

    def answer_key_for(
        self,
        messages: list[dict],
        *,
        schema: dict,
        params: Mapping[str, object],
        mode: str,
        prompt_hash: str | None = None,
    ) -> str:
        """The cache key of a request that is not a structured answer (see ``llm.judge``)."""
        return cache_key(
            model=self.settings.model,
            messages=messages,
            prompt_hash=self.prompt_hash if prompt_hash is None else prompt_hash,
            schema=schema,
            params=params,
            mode=mode,
        )

    def send_plain(self, request: dict[str, Any], *, chunk_id: str) -> tuple[Any, int]:
        """One chat completion request as given (no response model, no cache), with the same
        transport retries, limiter and errors as :meth:`complete`; (response, HTTP attempts).
        A field of llama-server's own (:data:`SERVER_FIELDS`) goes into the body as given."""
        call = _Call(chunk_id=chunk_id)
        sent = {k: v for k, v in request.items() if k not in SERVER_FIELDS}
        extra = {k: v for k, v in request.items() if k in SERVER_FIELDS}
        if extra:  # the OpenAI client takes only its own keyword arguments
            sent["extra_body"] = extra
        return self._send(call, **sent), call.http_attempts

    def count_usage(self, usage: Usage) -> None:
        """Add what a :meth:`send_plain` request cost to the client's total."""
        with self._lock:
            self.usage = self.usage + usage

    def _ask(
        self, call: _Call, messages: list[dict], response_model: type[BaseModel]
    ) -> tuple[BaseModel | None, str | None]:
        """(parsed value, error) from one instructor call through ``_send``.

        The package's own errors (budget, backend, cache) propagate, also when instructor
        wrapped them; a failure before any answer arrived is a BackendError; an answer that did
        not parse is returned as an error description, for the repair loop to re-ask.
        """
        # deferred: instructor imports openai, which takes ~0.5 s; only a model call pays it
        import instructor

        s = self.settings
        create = instructor.patch(
            create=lambda **kw: self._send(call, **kw), mode=instructor.Mode[s.mode]
        )
        try:
            value = create(
                response_model=response_model,
                messages=[dict(m) for m in messages],  # instructor may edit messages in place
                max_retries=0,  # never re-ask inside instructor: repair.py owns re-asks
                model=s.model,
                **s.generation_params,
            )
        except LetterchunkError:
            raise
        except instructor.core.exceptions.IncompleteOutputException:
            return None, "truncated"
        except Exception as exc:  # instructor wraps everything in InstructorRetryException
            cause = exc.__cause__
            if isinstance(cause, LetterchunkError):
                raise cause from cause.__cause__
            if call.response is None:
                raise BackendError(
                    f"{call.chunk_id}: the LLM call failed before any answer: {short(exc)}"
                ) from exc
            return None, _describe_parse_error(exc)
        return value, None

    def _judge(
        self,
        value: BaseModel | None,
        error: str | None,
        finish_reason: str | None,
        refusal: str | None,
    ) -> tuple[BaseModel | None, str | None]:
        """(value, error) once the answer's own signals are read: a refusal or an answer cut at
        max_tokens is unusable even when what arrived happened to parse."""
        if refusal is not None:
            return None, f"refusal: the model declined to answer ({short(refusal, 200)})"
        if finish_reason == "length":
            return None, (
                f"truncated: the answer hit max_tokens={self.settings.max_tokens} "
                "(finish_reason=length) before the JSON was complete"
            )
        if error == "truncated":  # instructor saw truncation our parts did not show
            return value, "truncated: the answer was incomplete (finish_reason=length)"
        return value, error

    def _remember(
        self,
        key: str | None,
        response: Any,
        raw_text: str,
        finish_reason: str | None,
        refusal: str | None,
        usage: Usage,
    ) -> None:
        """Store a live answer in the cache (when there is one) and add its usage to the
        client's total; cached answers cost nothing and are not stored again."""
        s = self.settings
        if self.cache is not None and key is not None:
            self.cache.store(
                key,
                CachedAnswer(
                    raw_text=raw_text,
                    finish_reason=finish_reason,
                    refusal=refusal,
                    prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens,
                    model=str(getattr(response, "model", s.model) or s.model),
                ),
            )
        with self._lock:
            self.usage = self.usage + usage


# --------------------------------------------------------------------------- helpers


def _plain(value: BaseModel, response_model: type[BaseModel]) -> BaseModel:
    """instructor returns a subclass of the response model carrying its raw response; hand back
    an instance of the caller's own class (already validated, so no second validation)."""
    data = {k: v for k, v in value.__dict__.items() if k not in ("_raw_response", "_total_usage")}
    return response_model.model_construct(_fields_set=set(value.model_fields_set), **data)


def answer_parts(response: Any) -> tuple[str, str | None, str | None]:
    """(raw answer text, finish_reason, refusal) of a ChatCompletion."""
    try:
        choice = response.choices[0]
    except (AttributeError, IndexError, TypeError):
        return "", None, None
    message = choice.message
    refusal = getattr(message, "refusal", None)
    tool_calls = getattr(message, "tool_calls", None) or []
    raw = (tool_calls[0].function.arguments or "") if tool_calls else (message.content or "")
    if not raw and refusal:
        raw = refusal
    return raw, choice.finish_reason, refusal


def usage_of(response: Any, *, request_messages: list[dict], raw_text: str) -> Usage:
    usage = getattr(response, "usage", None)
    if usage is not None and usage.prompt_tokens is not None:
        return Usage(int(usage.prompt_tokens), int(usage.completion_tokens or 0), 1)
    # a server that reports no usage: count it ourselves rather than dropping it
    prompt = sum(4 + count_tokens(str(m.get("content") or "")) for m in request_messages)
    return Usage(prompt, count_tokens(raw_text), 1)


def _describe_parse_error(exc: BaseException) -> str:

    cause = exc.__cause__ or exc
    if isinstance(cause, ValidationError):
        errors = cause.errors(include_url=False)
        if any(e.get("type") == "json_invalid" for e in errors):
            return f"malformed JSON: {short(errors[0].get('msg', ''), 200)}"
        parts = [
            f"{'.'.join(str(p) for p in e.get('loc', ())) or '<root>'}: {e.get('msg')}"
            for e in errors[:10]
        ]
        more = f" (+{len(errors) - 10} more)" if len(errors) > 10 else ""
        return "schema-invalid: " + "; ".join(parts) + more
    if isinstance(cause, json.JSONDecodeError):
        return f"malformed JSON: {cause.msg}"
    return f"unparseable answer: {short(cause, 200)}"


def _rebuild_completion(hit: CachedAnswer, mode: str) -> Any:
    """A ChatCompletion carrying a cached answer, shaped as the server would send it."""
    # deferred: openai takes ~0.5 s to import; only a model call pays it
    from openai.types.chat import ChatCompletion

    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": hit.refusal}
    if hit.refusal is None or hit.raw_text != hit.refusal:
        if mode == "TOOLS":
            message["tool_calls"] = [
                {
                    "id": "call_cached",
                    "type": "function",
                    "function": {"name": "cached", "arguments": hit.raw_text},
                }
            ]
        else:
            message["content"] = hit.raw_text
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-cached",
            "object": "chat.completion",
            "created": 0,
            "model": hit.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": hit.finish_reason or "stop"}
            ],
            "usage": {
                "prompt_tokens": hit.prompt_tokens,
                "completion_tokens": hit.completion_tokens,
                "total_tokens": hit.prompt_tokens + hit.completion_tokens,
            },
        }
    )
