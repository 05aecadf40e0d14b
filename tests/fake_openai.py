"""A real, scripted OpenAI-compatible HTTP server for tests and benchmarks.

It listens on ``127.0.0.1`` (a free port), speaks just enough of the OpenAI HTTP API for the
``openai`` client and instructor (``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /health``), and answers each chat request from a queue of scripted replies, then from a
default responder.  It also speaks the Batch API letterchunk uses (``POST /v1/files``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]``): each line of a
batch is answered from the same queue and responder when the batch is first read after
``batch_outcome`` says it is done — ``"completed"``, ``"in_progress"`` (nothing yet),
``"failed"`` (a batch-level error, no results) or ``"expired"`` (only the first
``expire_after`` lines answered, the rest ``batch_expired`` in the error file); a scripted
``status`` reply becomes that request's error line.  It records every request and the usage it
served, so tests can assert on what was sent and on token counts without trusting the client
under test.

::

    # tests/ is on sys.path under pytest
    from fake_openai import FakeOpenAI, answer, rate_limited, hang, reset

    with FakeOpenAI(default=lambda req: '{"ok": true}') as server:
        server.enqueue(rate_limited(retry_after=0.05), answer('{"ok": true}'))
        client = OpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.chat_count == 2

Reply kinds (module-level constructors):

==================  ======================================================================
``answer``          JSON answer text placed in ``choices[0].message.content`` (or in a tool
                    call when the request used ``tools``); finish_reason and usage settable
``malformed``       content that is not JSON
``truncated``       a JSON document cut in half, finish_reason ``"length"``
``refusal``         ``message.refusal`` set, content ``null``
``status``          raw status + headers + body (``rate_limited`` = 429 with Retry-After,
                    ``server_error`` = 500)
``hang``            wait (past the client's timeout), then answer or drop the connection
``reset``           close the socket without a response (TCP RST)
==================  ======================================================================

The default responder is ``callable(request_json) -> str | dict | Reply``; a dict is sent as
JSON text.  Without one, an empty queue answers HTTP 500 naming the problem, so a test that
sends more requests than it scripted fails loudly.

Usage is deterministic: prompt tokens = ``count_tokens`` over the messages' text contents
(+ 4 per message), completion tokens = ``count_tokens`` of the answer text, unless a reply sets
them.  An optional fixed ``latency_s`` is added to every chat request, and an optional
tokens-per-minute / requests-per-minute limit over a rolling window (``window_s``, 60 by
default; shorten it for fast tests) answers 429 with ``Retry-After`` when a request would pass it.

llama-server's side, for the embedded backend's tests (all off unless asked for):

* ``slots`` serves ``GET /slots``: ``"auto"`` one slot per chat request being answered, with
  ``is_processing`` true (one idle slot when none is); ``"idle"`` always idle (the server lost
  the request); ``"off"`` HTTP 501 as ``--no-slots`` does (``/health`` still answers);
  ``"hang"`` neither ``/slots`` nor ``/health`` ever answers (a wedged server).  Unset, both
  routes behave as before (``/slots`` is 404).
* ``timings=(prompt tokens/s, generated tokens/s)`` adds llama-server's ``timings`` object to
  every chat answer, computed from its usage.

``POST /v1/embeddings`` answers deterministic unit vectors, or plays ``embedding_reply`` (a
``status`` reply, e.g. an error body) when it is set.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import math
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from letterchunk.tokens import count_tokens

__all__ = [
    "FakeOpenAI",
    "Reply",
    "RecordedRequest",
    "ServedUsage",
    "answer",
    "malformed",
    "truncated",
    "refusal",
    "status",
    "rate_limited",
    "server_error",
    "hang",
    "reset",
    "not_json",
    "response_schema",
]

MODEL_ID = "fake-model"


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """One scripted reply.  Build it with the constructors below rather than by hand."""

    kind: str  # "answer" | "refusal" | "status" | "hang" | "reset"
    content: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    refusal_text: str | None = None
    status_code: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    delay_s: float = 0.0
    then: Reply | None = None  # for "hang": what to do after the delay (None = drop)
    top_logprobs: tuple[tuple[str, float], ...] | None = None  # first token's alternatives


def answer(
    content: str | dict | list,
    *,
    finish_reason: str = "stop",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
) -> Reply:
    """A 200 answer; ``content`` (a dict/list is JSON-encoded) becomes the message content."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(
        "answer",
        content=text,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def yes_no(p_yes: float | None) -> Reply:
    """The one-token answer to a yes/no question (``llm.judge``): "yes" or "no", with
    ``top_logprobs`` giving p(yes) = ``p_yes``; ``None`` answers "no" without logprobs, as a
    server that does not report them would."""
    if p_yes is None:
        return Reply("answer", content="no", finish_reason="length", completion_tokens=1)
    p = min(max(p_yes, 1e-6), 1 - 1e-6)
    top = (("yes", math.log(p)), ("no", math.log(1 - p)))
    if p < 0.5:
        top = top[::-1]
    return Reply(
        "answer",
        content=top[0][0],
        finish_reason="length",
        completion_tokens=1,
        top_logprobs=top,
    )


def is_yes_no_question(body: dict) -> bool:
    """Whether a chat request is a one-token yes/no question (``llm.judge``)."""
    return isinstance(body, dict) and bool(body.get("logprobs")) and body.get("max_tokens") == 1


def malformed(text: str = '{"contextual_summary": "unterminated, "themes": [}') -> Reply:
    """A 200 answer whose content is not valid JSON."""
    return answer(text)


def truncated(
    content: str | dict | list = '{"contextual_summary": "The letter', **kw: Any
) -> Reply:
    """A 200 answer cut off by the token limit: half a JSON document, finish_reason "length".

    A dict/list is encoded and cut in the middle.
    """
    text = content if isinstance(content, str) else json.dumps(content)
    if not isinstance(content, str):
        text = text[: max(1, len(text) // 2)]
    return answer(text, finish_reason="length", **kw)


def refusal(text: str = "I'm sorry, I can't help with that.") -> Reply:
    """A 200 answer where the model refused (``message.refusal`` set, content null)."""
    return Reply("refusal", refusal_text=text)


def status(code: int, body: str | bytes | dict | None = None, headers: dict | None = None) -> Reply:
    """A raw HTTP reply.  A dict body is JSON-encoded; the default body is an OpenAI error."""
    if body is None:
        body = {
            "error": {"message": f"fake_openai scripted HTTP {code}", "type": "fake", "code": code}
        }
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    raw = raw.encode() if isinstance(raw, str) else raw
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    return Reply("status", status_code=code, headers=tuple(hdrs.items()), body=raw)


def not_json(body: str | bytes = b"", content_type: str = "text/html") -> Reply:
    """An HTTP 200 whose body is not a chat completion (a proxy's HTML page, an empty body)."""
    return status(200, body, {"Content-Type": content_type})


def rate_limited(retry_after: float | None = 1.0) -> Reply:
    """HTTP 429 with a ``Retry-After`` header in seconds (omitted when ``None``)."""
    headers = {} if retry_after is None else {"Retry-After": _fmt_seconds(retry_after)}
    return status(
        429,
        {
            "error": {
                "message": "Rate limit reached (fake)",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        headers,
    )


def server_error(code: int = 500) -> Reply:
    return status(code)


def hang(seconds: float = 30.0, then: Reply | None = None) -> Reply:
    """Wait ``seconds`` (longer than the client's timeout), then send ``then`` or drop."""
    return Reply("hang", delay_s=seconds, then=then)


def reset() -> Reply:
    """Close the connection without any response (the client sees a connection reset)."""
    return Reply("reset")


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else f"{s:.3f}"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None
    at: float  # time.monotonic() when received


@dataclass(frozen=True)
class ServedUsage:
    """Usage the server reported for one 200 chat answer (or charged for a refusal)."""

    prompt_tokens: int
    completion_tokens: int
    question: bool = False  # the answer to a one-token yes/no question (``llm.judge``)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def response_schema(request: dict) -> dict | None:
    """The JSON schema the client asked for (json_schema response_format or the first tool)."""
    rf = request.get("response_format") or {}
    if rf.get("type") == "json_schema":
        return (rf.get("json_schema") or {}).get("schema")
    tools = request.get("tools") or []
    if tools:
        return tools[0].get("function", {}).get("parameters")
    return None


def prompt_tokens_of(request: dict) -> int:
    """Deterministic prompt token count: o200k tokens of every text part + 4 per message."""
    total = 0
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        total += 4 + count_tokens(content or "")
    return total


# --------------------------------------------------------------------------- server


class FakeOpenAI:
    """Scripted OpenAI-compatible server; use as a context manager (stops on exit)."""

    def __init__(
        self,
        default: Callable[[dict], str | dict | Reply] | None = None,
        *,
        latency_s: float = 0.0,
        tpm_limit: int | None = None,
        rpm_limit: int | None = None,
        window_s: float = 60.0,
        model: str = MODEL_ID,
        judge: Callable[[dict], float | None] | None = None,
        slots: str | None = None,
        timings: tuple[float, float] | None = None,
    ) -> None:
        if slots not in (None, "auto", "idle", "off", "hang"):
            raise ValueError(f"slots must be auto, idle, off or hang, got {slots!r}")
        self.default = default
        self.slots = slots
        self.timings = timings
        self.in_flight = 0  # chat requests being answered right now (what /slots reports)
        self.probes: list[str] = []  # paths of the /slots and /health requests, in order
        self.embedding_reply: Reply | None = None
        # answers yes/no questions (p_yes, or None: no logprobs) without using the scripted
        # queue, so a script of structured replies stays in step whatever the judges ask
        self.judge = judge
        self.latency_s = latency_s
        self.tpm_limit = tpm_limit
        self.rpm_limit = rpm_limit
        self.window_s = window_s
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.served: list[ServedUsage] = []
        self.replies: list[str] = []  # kind of reply given to each chat request, in order
        self.rate_limited_count = 0  # 429s produced by the TPM/RPM limiter (not scripted)
        self._queue: deque[Reply] = deque()
        self._question_queue: deque[Reply] = deque()  # replies to yes/no questions, then judge
        self._lock = threading.Lock()
        self._window: deque[list] = deque()  # [admitted at, tokens charged]
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Batch API
        self.files: dict[str, dict] = {}  # id -> {"filename", "purpose", "data"}
        self.batches: dict[str, dict] = {}  # id -> the batch object as served
        self.batch_outcome = "completed"  # completed | in_progress | failed | expired
        self.expire_after = 0  # with "expired": lines answered before the window closed
        self.batch_lines: list[dict] = []  # request bodies a batch answered, in order

    # -- lifecycle
    def start(self) -> FakeOpenAI:
        if self._httpd is not None:
            return self
        # the usage of an answer is counted in o200k tokens; the first count loads the
        # encoding (about 0.6 s), which would delay the first answer past a short client
        # timeout, so it is loaded before any request: replies take their scripted time only
        count_tokens("")
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in hang()/latency
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """URL to give the openai client (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting
    def enqueue(self, *replies: Reply | str | dict) -> None:
        """Append replies; a str/dict is shorthand for ``answer(...)``."""
        with self._lock:
            for r in replies:
                self._queue.append(r if isinstance(r, Reply) else answer(r))

    def enqueue_question(self, *replies: Reply) -> None:
        """Append replies for the next yes/no questions (before ``judge`` answers them)."""
        with self._lock:
            self._question_queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- observations
    @property
    def all_chat_requests(self) -> list[RecordedRequest]:
        """Every chat request, the one-token yes/no questions (``llm.judge``) included."""
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The structured chat requests (enrichment calls and re-asks), yes/no questions left out:
        what a test of the answer script counts."""
        return [r for r in self.all_chat_requests if not is_yes_no_question(r.body)]

    @property
    def chat_count(self) -> int:
        return len(self.chat_requests)

    @property
    def structured_requests(self) -> list[RecordedRequest]:
        """Chat requests other than yes/no questions (same as :attr:`chat_requests`)."""
        return self.chat_requests

    @property
    def question_count(self) -> int:
        """Yes/no questions asked (``llm.judge``)."""
        return len(self.all_chat_requests) - self.chat_count

    @property
    def usage_total(self) -> ServedUsage:
        with self._lock:
            return ServedUsage(
                sum(u.prompt_tokens for u in self.served),
                sum(u.completion_tokens for u in self.served),
            )

    @property
    def answers_usage_total(self) -> ServedUsage:
        """Usage of the structured answers only (the repair report's records), questions out."""
        with self._lock:
            served = [u for u in self.served if not u.question]
        return ServedUsage(
            sum(u.prompt_tokens for u in served), sum(u.completion_tokens for u in served)
        )

    # -- Batch API (called by the handler)
    def completion(self, reply: Reply, body: dict) -> tuple[int, dict]:
        """(status, JSON body) of one chat answer; usage recorded in ``served``."""
        if reply.kind in ("hang", "reset"):
            return 500, {"error": {"message": f"fake: {reply.kind} inside a batch"}}
        if reply.kind == "status":
            try:
                return reply.status_code, json.loads(reply.body or b"{}")
            except json.JSONDecodeError:
                return reply.status_code, {"error": {"message": reply.body.decode()}}
        p_tok = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_tokens_of(body)
        text = reply.content if reply.kind == "answer" else reply.refusal_text or ""
        c_tok = (
            reply.completion_tokens if reply.completion_tokens is not None else count_tokens(text)
        )
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if reply.kind == "refusal":
            message["refusal"] = reply.refusal_text
        elif body.get("tools"):
            name = body["tools"][0].get("function", {}).get("name", "tool")
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": reply.content},
                }
            ]
        else:
            message["content"] = reply.content
        finish = reply.finish_reason
        if message.get("tool_calls") and finish == "stop":
            finish = "tool_calls"
        with self._lock:
            self.served.append(ServedUsage(p_tok, c_tok, is_yes_no_question(body)))
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": _logprobs(reply),
                }
            ],
            "usage": {
                "prompt_tokens": p_tok,
                "completion_tokens": c_tok,
                "total_tokens": p_tok + c_tok,
            },
        }
        if self.timings is not None:
            completion["timings"] = _timings(p_tok, c_tok, *self.timings)
        return 200, completion

    def _file(self, filename: str, purpose: str, data: bytes) -> dict:
        file_id = f"file-{uuid.uuid4().hex[:20]}"
        with self._lock:
            self.files[file_id] = {"filename": filename, "purpose": purpose, "data": data}
        return self._file_object(file_id)

    def _file_object(self, file_id: str) -> dict:
        f = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(f["data"]),
            "created_at": int(time.time()),
            "filename": f["filename"],
            "purpose": f["purpose"],
            "status": "processed",
        }

    def _create_batch(self, body: dict) -> tuple[int, dict]:
        input_id = body.get("input_file_id")
        if input_id not in self.files:
            return 404, {"error": {"message": f"no file {input_id}"}}
        batch_id = f"batch_{uuid.uuid4().hex[:20]}"
        lines = self.files[input_id]["data"].decode().splitlines()
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "input_file_id": input_id,
            "completion_window": body.get("completion_window"),
            "status": "validating",
            "created_at": int(time.time()),
            "metadata": body.get("metadata"),
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        with self._lock:
            self.batches[batch_id] = batch
        return 200, batch

    def _read_batch(self, batch_id: str) -> dict | None:
        """The batch, moved on to ``batch_outcome`` unless it already finished."""
        batch = self.batches.get(batch_id)
        if batch is None or batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return batch
        outcome = self.batch_outcome
        if outcome == "in_progress":
            batch["status"] = "in_progress"
        elif outcome == "failed":
            batch["status"] = "failed"
            batch["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": "fake: scripted batch failure"}],
            }
        else:
            self._run_batch(batch, limit=self.expire_after if outcome == "expired" else None)
            batch["status"] = outcome
        return batch

    def _run_batch(self, batch: dict, *, limit: int | None) -> None:
        out, errors = [], []
        lines = self.files[batch["input_file_id"]]["data"].decode().splitlines()
        for n, raw in enumerate(line for line in lines if line.strip()):
            request = json.loads(raw)
            record: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": request["custom_id"]}
            if limit is not None and n >= limit:
                record.update(
                    response=None,
                    error={"code": "batch_expired", "message": "not run before the window closed"},
                )
                errors.append(record)
                continue
            with self._lock:
                self.batch_lines.append(request["body"])
            code, body = self.completion(self._next_reply(request["body"]), request["body"])
            record.update(response={"status_code": code, "request_id": "req", "body": body})
            record["error"] = None
            (out if code == 200 else errors).append(record)
        for key, records in (("output_file_id", out), ("error_file_id", errors)):
            if records:
                data = "".join(json.dumps(r) + "\n" for r in records).encode()
                batch[key] = self._file(f"{batch['id']}_{key}.jsonl", "batch_output", data)["id"]
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(out),
            "failed": len(errors),
        }

    # -- internals used by the handler
    def _next_reply(self, body: dict) -> Reply:
        if is_yes_no_question(body):
            with self._lock:
                if self._question_queue:
                    return self._question_queue.popleft()
            return yes_no(self.judge(body) if self.judge is not None else None)
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.default is None:
            return status(
                500,
                {
                    "error": {
                        "message": "fake_openai: no scripted reply left and no default responder"
                    }
                },
            )
        out = self.default(body)
        return out if isinstance(out, Reply) else answer(out)

    def _admit(self, body: dict) -> tuple[float | None, list | None]:
        """Reserve room in the rolling window for this request.

        Like the hosted API, a request is charged its estimate (prompt tokens + max_tokens) when
        admitted and corrected to the tokens actually served when answered.  Returns
        ``(seconds_to_wait, None)`` when the request would pass a limit, else ``(None, slot)``.
        """
        if self.tpm_limit is None and self.rpm_limit is None:
            return None, None
        estimate = prompt_tokens_of(body) + int(
            body.get("max_completion_tokens") or body.get("max_tokens") or 0
        )
        now = time.monotonic()
        with self._lock:
            while self._window and now - self._window[0][0] >= self.window_s:
                self._window.popleft()
            used = sum(entry[1] for entry in self._window)
            count = len(self._window)

            def fits(freed: int, removed: int) -> bool:
                ok_tpm = self.tpm_limit is None or used - freed + estimate <= self.tpm_limit
                ok_rpm = self.rpm_limit is None or count - removed + 1 <= self.rpm_limit
                return ok_tpm and ok_rpm

            if fits(0, 0):
                slot = [now, estimate]
                self._window.append(slot)
                return None, slot
            self.rate_limited_count += 1
            wait, freed = self.window_s, 0
            for removed, (t, tokens) in enumerate(self._window, start=1):
                freed += tokens
                if fits(freed, removed):
                    wait = t + self.window_s - now
                    break
            return max(wait, 0.001), None

    def _charge(self, slot: list | None, tokens: int) -> None:
        """Correct an admitted request's window charge to the tokens actually served."""
        if slot is not None:
            with self._lock:
                slot[1] = tokens

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when the sleep ran its course."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


def _make_handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # the headers and the body leave in two writes; with Nagle's algorithm on, the body
        # waits for the client's delayed ACK of the headers, about 40 ms on every reply
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _record(self, body: Any) -> None:
            with server._lock:
                server.requests.append(
                    RecordedRequest(
                        self.command, self.path, dict(self.headers.items()), body, time.monotonic()
                    )
                )

        def _send(self, code: int, body: bytes, headers: dict[str, str] | tuple = ()) -> None:
            self.send_response(code)
            items = headers.items() if isinstance(headers, dict) else headers
            names = set()
            for k, v in items:
                self.send_header(k, v)
                names.add(k.lower())
            if "content-type" not in names:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def _send_json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            self._send(code, json.dumps(obj).encode(), headers or {})

        def _reset(self) -> None:
            # SO_LINGER(on, 0) makes close() send a TCP RST instead of FIN
            with contextlib.suppress(OSError):
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.close()

        def _llama_route(self, path: str) -> bool:
            """``/slots`` and ``/health`` as llama-server answers them (``slots`` set)."""
            if server.slots is None or path not in ("/slots", "/health", "/v1/health"):
                return False
            with server._lock:
                server.probes.append(path)
                busy = server.in_flight
            if server.slots == "hang":
                server._sleep(3600.0)  # until the server stops
                self._reset()
            elif path != "/slots":
                self._send_json(200, {"status": "ok"})
            elif server.slots == "off":
                message = "This server does not support slots endpoint. Start it with `--slots`"
                self._send_json(501, {"error": {"code": 501, "message": message}})
            else:
                n = busy if server.slots == "auto" else 0
                slots = [{"id": i, "n_ctx": 8192, "is_processing": True} for i in range(n)]
                self._send_json(200, slots or [{"id": 0, "n_ctx": 8192, "is_processing": False}])
            return True

        def do_GET(self) -> None:
            self._record(None)
            path = self.path.rstrip("/")
            if self._llama_route(path):
                return
            if path in ("/health", "/v1/health"):
                self._send_json(200, {"status": "ok"})
            elif path in ("/v1/models", "/models"):
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": server.model, "object": "model", "owned_by": "fake"}],
                    },
                )
            elif path.startswith("/v1/files/") and path.endswith("/content"):
                f = server.files.get(path.split("/")[3])
                if f is None:
                    self._send_json(404, {"error": {"message": f"no file {self.path}"}})
                else:
                    self._send(200, f["data"], {"Content-Type": "application/octet-stream"})
            elif path.startswith("/v1/batches/"):
                batch = server._read_batch(path.split("/")[3])
                if batch is None:
                    self._send_json(404, {"error": {"message": f"no batch {self.path}"}})
                else:
                    self._send_json(200, batch)
            elif path.split("?")[0] == "/v1/batches":
                data = [server._read_batch(b) for b in list(server.batches)][::-1]
                self._send_json(200, {"object": "list", "data": data, "has_more": False})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def _upload(self, raw: bytes) -> None:
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                f"Content-Type: {self.headers.get('Content-Type')}\r\n\r\n".encode() + raw
            )
            fields: dict[str, Any] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[str(name)] = (part.get_filename(), part.get_payload(decode=True))
            filename, data = fields.get("file", (None, b""))
            purpose = (fields.get("purpose", (None, b""))[1] or b"").decode()
            self._send_json(200, server._file(filename or "upload.jsonl", purpose, data))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            self._record(body)
            if self.path.rstrip("/") == "/v1/files":
                self._upload(raw)
                return
            if self.path.rstrip("/") == "/v1/batches" and isinstance(body, dict):
                self._send_json(*server._create_batch(body))
                return
            if self.path.rstrip("/") == "/v1/embeddings" and isinstance(body, dict):
                self._embeddings(body)
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            if not isinstance(body, dict):
                self._send_json(400, {"error": {"message": "request body is not a JSON object"}})
                return
            wait, self._slot = server._admit(body)
            if wait is not None:
                with server._lock:
                    server.replies.append("rate_limited")
                self._send_json(
                    429,
                    {
                        "error": {
                            "message": "Rate limit reached for tokens per min (fake)",
                            "code": "rate_limit_exceeded",
                        }
                    },
                    {
                        "Retry-After": _fmt_seconds(round(wait, 3)),
                        "retry-after-ms": str(int(wait * 1000)),
                    },
                )
                return
            reply = server._next_reply(body)
            with server._lock:
                server.in_flight += 1
            try:
                if server.latency_s and not server._sleep(server.latency_s):
                    server._charge(self._slot, 0)
                    self._reset()
                    return
                self._play(reply, body)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _embeddings(self, body: dict) -> None:
            reply = server.embedding_reply
            if reply is not None:
                self._send(reply.status_code, reply.body, reply.headers)
                return
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            data = [
                {"object": "embedding", "index": i, "embedding": _embedding(str(t))}
                for i, t in enumerate(texts)
            ]
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model") or server.model,
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                },
            )

        def _play(self, reply: Reply, body: dict) -> None:
            with server._lock:
                server.replies.append(reply.kind)
            if reply.kind == "hang":
                if not server._sleep(reply.delay_s) or reply.then is None:
                    server._charge(self._slot, 0)
                    self._reset()
                    return
                with contextlib.suppress(OSError):  # the client gave up long ago
                    self._play(reply.then, body)
                return
            if reply.kind == "reset":
                server._charge(self._slot, 0)
                self._reset()
                return
            if reply.kind == "status":
                server._charge(self._slot, 0)
                self._send(reply.status_code, reply.body, reply.headers)
                return
            self._send_completion(reply, body)

        def _send_completion(self, reply: Reply, body: dict) -> None:
            code, completion = server.completion(reply, body)
            usage = completion.get("usage") or {}
            server._charge(self._slot, int(usage.get("total_tokens") or 0))
            self._send_json(code, completion)

    return Handler


def _timings(prompt_n: int, predicted_n: int, prompt_tps: float, predicted_tps: float) -> dict:
    """llama-server's ``timings`` of one answer at the given speeds."""
    return {
        "cache_n": 0,
        "prompt_n": prompt_n,
        "prompt_ms": 1000.0 * prompt_n / prompt_tps,
        "prompt_per_second": prompt_tps,
        "predicted_n": predicted_n,
        "predicted_ms": 1000.0 * predicted_n / predicted_tps,
        "predicted_per_second": predicted_tps,
    }


def _embedding(text: str, dims: int = 8) -> list[float]:
    """A deterministic unit vector for ``text``."""
    data = text.encode()
    raw = [1.0 + sum(data[i::dims]) % 97 for i in range(dims)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def _logprobs(reply: Reply) -> dict | None:
    """The ``logprobs`` of a one-token answer, shaped as the API sends them."""
    if reply.top_logprobs is None:
        return None
    top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in reply.top_logprobs]
    return {"content": [{**top[0], "top_logprobs": top}]}
