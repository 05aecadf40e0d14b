"""Transport faults of one HTTP request to the LLM backend: which are worth retrying (and after
how long the server asked to wait), and which end the run with a :class:`BackendError` that
says what to fix.  Used by :class:`letterchunk.llm.client.LLMClient`.

An HTTP 200 whose body is not a chat completion (a proxy's HTML error page, an empty or cut
body, plain text, JSON without ``choices``) is a transport fault too: no model answered, so it
is retried like a 5xx rather than handed to the repair loop or ending the run
(:func:`not_a_completion`).

A slow answer from letterchunk's own llama-server is not a fault while the server is still
working on it: :func:`wait_plan` says how long to wait before asking (the timeout, or longer
when the measured prompt speed says this prompt needs it) and how long to wait at most;
:func:`probe_server` asks llama-server's ``GET /slots`` (``GET /health`` where that is
disabled) whether it is busy.  Closing the connection would make llama-server drop the work
it has done, and sending the prompt again would start it over."""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from letterchunk.errors import BackendError
from letterchunk.llm.config import LLMSettings
from letterchunk.redact import redact

__all__ = [
    "BUSY_WAIT_FACTOR",
    "ServerState",
    "ServerWatch",
    "Transient",
    "WaitPlan",
    "classify",
    "not_a_completion",
    "probe_server",
    "seconds",
    "short",
    "wait_plan",
]

log = logging.getLogger(__name__)
_R = TypeVar("_R")  # what a request's create function returns

# A request to a server that says it is working on it is waited for up to this many timeouts
# (40 min with the embedded default of 600 s), or longer when the measured speed says so.
BUSY_WAIT_FACTOR = 4.0
# The measured speed gives an expected duration; wait this many times that before asking the
# server, and up to BUSY_WAIT_FACTOR times as long in all.
EXPECTED_MARGIN = 1.5


class Transient(Exception):
    """Internal: a transport fault worth retrying; carries the wait the server asked for."""

    def __init__(
        self,
        description: str,
        retry_after: float | None,
        cause: BaseException,
        *,
        rate_limited: bool = False,
    ) -> None:
        super().__init__(description)
        self.description = description
        self.retry_after = retry_after
        self.cause = cause
        # an HTTP 429: the server's limit is shared by every worker, so all of them back off
        self.rate_limited = rate_limited


def retry_after_seconds(response: object) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date), if present."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(parsed.timestamp() - time.time(), 0.0)


def classify(exc: BaseException, settings: LLMSettings) -> Transient | BackendError | None:
    """Map an openai exception to a retryable fault, a final BackendError, or None (not ours)."""
    # deferred: openai takes ~0.5 s to import; only a model call pays it
    import openai

    where = redact(settings.base_url)
    if isinstance(exc, openai.APITimeoutError):
        return Transient(f"no answer within {settings.timeout_s:g} s", None, exc)
    if isinstance(exc, openai.APIConnectionError):
        return Transient(f"connection to {where} failed ({exc.__cause__ or exc})", None, exc)
    if isinstance(exc, openai.APIResponseValidationError):  # a client in strict mode
        return not_a_completion(getattr(exc, "body", None) or "", cause=exc)
    if isinstance(exc, openai.RateLimitError):
        return Transient(
            "HTTP 429 rate limited", retry_after_seconds(exc.response), exc, rate_limited=True
        )
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        if code >= 500 or code in (408, 409):
            return Transient(f"HTTP {code} from the server", retry_after_seconds(exc.response), exc)
        hint = {
            401: "check OPENAI_API_KEY"
            + (
                " and the user:password in the base URL (sent as HTTP Basic auth)"
                if "@" in urlsplit(settings.base_url).netloc
                else ""
            ),
            403: "check the key's permissions for this model",
            404: f"check OPENAI_BASE_URL ({where}) and the model id {settings.model!r} "
            "(LETTERCHUNK_MODEL)",
        }.get(
            code,
            f"the server rejected the request; if it does not support instructor mode "
            f"{settings.mode}, set LETTERCHUNK_INSTRUCTOR_MODE (e.g. JSON_SCHEMA, TOOLS, MD_JSON)",
        )
        return BackendError(f"LLM backend at {where} answered HTTP {code}: {short(exc)}; {hint}")
    return None


def not_a_completion(response: object, *, cause: BaseException | None = None) -> Transient | None:
    """A :class:`Transient` when a 200 ``response`` is not a chat completion, else None.

    ``response`` is what the openai client returned (its text when the content type was not
    JSON, a ChatCompletion built without validation otherwise) or the body it could not parse.
    """
    if not isinstance(response, (str, bytes)):
        if _has_message(response):
            return None
        dump = getattr(response, "model_dump", None)
        if callable(dump):  # built from the body without validation: what the body held
            response = dump(exclude_unset=True, warnings=False)
        body = json.dumps(response, default=str)
        what = "JSON that is not a chat completion"
    else:
        body = response.decode("utf-8", "replace") if isinstance(response, bytes) else response
        what = "a body that is not JSON"
    text = " ".join(body.split())
    seen = f"starts {short(text, 60)!r}" if text else "empty"
    description = f"HTTP 200 with {what} ({seen})"
    return Transient(description, None, cause or ValueError(description))


def _has_message(response: object) -> bool:
    """Whether a parsed 200 body has a first choice with a message, as every answer has."""
    if isinstance(response, dict):
        choices = response.get("choices")
    else:
        choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return False
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else getattr(first, "message", None)
    return message is not None


def short(exc: BaseException | str, limit: int = 300) -> str:
    """One line of an error for a message; keys and URL passwords masked (``redact``)."""
    text = redact(exc).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- a slow server


def seconds(value: float) -> str:
    """``0.4 s``, ``12 s``, ``2,400 s``: a wait for a message."""
    return f"{value:.1f} s" if value < 10 else f"{value:,.0f} s"


@dataclass(frozen=True)
class WaitPlan:
    """How long one request to the embedded server is waited for."""

    deadline_s: float  # wait this long before asking the server whether it is still working
    cap_s: float  # never wait longer than this, busy or not
    expected_s: float | None  # what the measured speeds predict for this request
    basis: str  # what it rests on: "prompt ~6,600 tokens at a measured 9 tokens/s and …"


def wait_plan(
    timeout_s: float,
    prompt_tokens: int,
    max_tokens: int,
    speeds: tuple[float, float] | None,
    cap_s: float | None = None,
) -> WaitPlan:
    """The waits for a request of ``prompt_tokens`` (+ up to ``max_tokens`` generated), given
    the server's measured ``(prompt tokens/s, generated tokens/s)`` or None before the first
    answer.  ``cap_s`` overrides the longest wait; the deadline never exceeds it."""
    expected = None
    basis = f"prompt ~{prompt_tokens:,} tokens; no speed measured yet"
    if speeds is not None and speeds[0] > 0 and speeds[1] > 0:
        expected = prompt_tokens / speeds[0] + max_tokens / speeds[1]
        basis = (
            f"prompt ~{prompt_tokens:,} tokens at a measured {speeds[0]:.0f} tokens/s and up to "
            f"{max_tokens:,} more at {speeds[1]:.0f} tokens/s: ~{seconds(expected)} expected"
        )
    deadline = max(timeout_s, EXPECTED_MARGIN * expected if expected else 0.0)
    if cap_s is None:
        cap_s = BUSY_WAIT_FACTOR * deadline
    return WaitPlan(min(deadline, cap_s), max(cap_s, 0.0), expected, basis)


@dataclass(frozen=True)
class ServerState:
    """What llama-server says about itself."""

    reachable: bool  # it answered the probe
    busy: bool | None  # a slot is processing a request; None: alive, but it cannot say
    detail: str  # what was asked and answered, for a message


def _slots_busy(slots: object) -> tuple[int, int] | None:
    """(slots processing, slots) from a ``GET /slots`` body; None when it is not a slot list."""
    if not isinstance(slots, list) or not slots or not all(isinstance(x, dict) for x in slots):
        return None
    # "is_processing" in current llama-server; "state" (0 = idle) in older builds
    busy = sum(1 for x in slots if x.get("is_processing") or x.get("state") not in (None, 0))
    return busy, len(slots)


def probe_server(base_url: str, timeout_s: float) -> ServerState:
    """Ask the llama-server behind ``base_url`` (``http://host:port/v1``) whether it is busy."""
    # deferred: httpx comes with openai; only a slow request pays the import
    import httpx

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        reply = httpx.get(f"{root}/slots", timeout=timeout_s)
    except httpx.HTTPError as exc:
        return ServerState(False, None, f"GET /slots: {type(exc).__name__}")
    if reply.status_code == 200:
        try:
            counts = _slots_busy(reply.json())
        except ValueError:
            counts = None
        if counts is not None:
            busy, total = counts
            return ServerState(True, busy > 0, f"GET /slots: {busy} of {total} slot(s) processing")
    # no slot list (started with --no-slots, or an older build): is it alive at all?
    try:
        health = httpx.get(f"{root}/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        return ServerState(False, None, f"GET /health: {type(exc).__name__}")
    if health.status_code == 200:
        return ServerState(True, None, "GET /health: ok (no slot list)")
    return ServerState(False, None, f"GET /health: HTTP {health.status_code}")


class ServerWatch:
    """Sends requests to letterchunk's own llama-server and waits for them while it works.

    Each request goes out from a helper thread; past its plan's deadline the server is asked
    (:func:`probe_server`) every ``probe_interval_s``.  While it is busy the same request stays
    open (a warning says why, once; :attr:`waiting` tells a progress display), up to the cap;
    then BackendError, since sending it again would only start the work over.  An idle or
    unreachable server ends the attempt with a :class:`Transient`, retried as a timeout is.
    """

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._speeds: deque[tuple[float, float]] = deque(maxlen=8)  # (prompt, generated) tok/s
        self._waiting: dict[str, str] = {}

    @property
    def waiting(self) -> dict[str, str]:
        """chunk id -> why its request is being waited for past its deadline."""
        with self._lock:
            return dict(self._waiting)

    def measure(self, response: object) -> None:
        """Keep the speeds llama-server reports with an answer (``timings``), from requests
        large enough to measure them."""
        timings = (getattr(response, "model_extra", None) or {}).get("timings")
        if not isinstance(timings, dict):
            return
        try:
            prompt_n, prompt_tps = int(timings["prompt_n"]), float(timings["prompt_per_second"])
            gen_n, gen_tps = int(timings["predicted_n"]), float(timings["predicted_per_second"])
        except (KeyError, TypeError, ValueError):
            return
        if prompt_n >= 64 and gen_n >= 16 and prompt_tps > 0 and gen_tps > 0:
            with self._lock:
                self._speeds.append((prompt_tps, gen_tps))

    def plan(self, prompt_tokens: int, max_tokens: int) -> WaitPlan:
        """:func:`wait_plan` at the slowest speeds measured lately."""
        with self._lock:
            speeds = (
                (min(p for p, _ in self._speeds), min(g for _, g in self._speeds))
                if self._speeds
                else None
            )
        s = self.settings
        return wait_plan(s.timeout_s, prompt_tokens, max_tokens, speeds, s.busy_wait_max_s)

    def send(self, chunk_id: str, create: Callable[[float], _R], plan: WaitPlan) -> _R:
        """``create(http_timeout)``'s result, or its exception, waited for as ``plan`` says."""
        s = self.settings
        answered: list[_R] = []
        failed: list[BaseException] = []
        done = threading.Event()

        def run() -> None:
            # the connection outlives every wait below: closing it would cancel the work
            try:
                answered.append(create(plan.cap_s + s.probe_timeout_s + s.probe_interval_s))
            except BaseException as exc:  # handed to the waiting thread, raised there
                failed.append(exc)
            finally:
                done.set()

        started = time.monotonic()
        threading.Thread(target=run, name=f"letterchunk-{chunk_id}", daemon=True).start()
        try:
            if not done.wait(plan.deadline_s):
                self._wait_while_busy(chunk_id, done, started, plan)
        finally:
            with self._lock:
                self._waiting.pop(chunk_id, None)
        if failed:
            raise failed[0]
        return answered[0]

    def _wait_while_busy(
        self, chunk_id: str, done: threading.Event, started: float, plan: WaitPlan
    ) -> None:
        s = self.settings
        idle_probes = 0
        while True:
            state = probe_server(s.base_url, s.probe_timeout_s)
            elapsed = time.monotonic() - started
            if done.is_set():
                return
            if not state.reachable or state.busy is False:
                # idle twice in a row, a probe apart: not an answer already on its way
                idle_probes += 1 if state.reachable else 2
                if idle_probes >= 2:
                    raise Transient(
                        f"no answer within {seconds(elapsed)} and the server is not working "
                        f"on it ({state.detail})",
                        None,
                        TimeoutError(state.detail),
                    )
            else:
                idle_probes = 0
                self._say_why(chunk_id, elapsed, state, plan)
            if elapsed >= plan.cap_s:
                raise BackendError(
                    f"{chunk_id}: the embedded LLM server was still working on this request "
                    f"after {seconds(elapsed)} ({plan.basis}), the longest letterchunk waits for "
                    "one; it was not sent again, which would start the work over: raise "
                    "--timeout (env LETTERCHUNK_TIMEOUT_S; a busy server is waited for "
                    f"{BUSY_WAIT_FACTOR:g} times as long), give the server more cores "
                    "(LETTERCHUNK_THREADS) or a lighter load, or set OPENAI_BASE_URL to a faster "
                    "server, then rerun (answers already received are cached)"
                )
            if done.wait(min(s.probe_interval_s, max(plan.cap_s - elapsed, 0.01))):
                return

    def _say_why(self, chunk_id: str, elapsed: float, state: ServerState, plan: WaitPlan) -> None:
        """A warning the first time a request is waited for, then a line at INFO per probe."""
        with self._lock:
            first = chunk_id not in self._waiting
            if first:
                self._waiting[chunk_id] = (
                    f"the embedded server is still working on it ({state.detail}): waiting "
                    f"for this request instead of sending it again, up to "
                    f"{seconds(plan.cap_s)} ({plan.basis})"
                )
            reason = self._waiting[chunk_id]
        if first:
            log.warning("%s: no answer after %s, but %s", chunk_id, seconds(elapsed), reason)
        else:
            log.info("%s: still waiting after %s (%s)", chunk_id, seconds(elapsed), state.detail)
