"""The OpenAI Batch API: requests built exactly as a live call would send them, input files,
batches, and their results turned into cached answers.

* :func:`request_body` is the chat-completions body instructor sends for a question on these
  settings — captured from ``instructor.patch`` at the moment it would go out, not rebuilt by
  hand — so a batch answer is an answer to the very request a live run makes.  Each request's
  ``custom_id`` is that question's cache key (:meth:`LLMClient.answer_key`), so a collected
  answer is filed where a live run looks it up.
* :func:`split_requests` cuts requests into input files within the API's limits (requests per
  batch, bytes per file).
* :class:`BatchAPI` uploads a file, creates, finds, retrieves a batch and downloads its files,
  through the ``openai`` client; every API error is a :class:`~letterchunk.errors.BackendError`
  that says to rerun (nothing already submitted is sent again).
* :func:`parse_results` reads a batch's output and error files into :class:`BatchResult`
  records: a :class:`~letterchunk.llm.cache.CachedAnswer` per answered request, an error text
  per failed one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel

from letterchunk.errors import BackendError, ConfigError
from letterchunk.llm.cache import CachedAnswer
from letterchunk.llm.client import LLMSettings, answer_parts, usage_of
from letterchunk.llm.judge import question_answer
from letterchunk.redact import redact

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = [
    "BATCH_ENDPOINT",
    "COMPLETION_WINDOW",
    "FINISHED",
    "MAX_FILE_BYTES",
    "MAX_REQUESTS",
    "BatchAPI",
    "BatchRequest",
    "BatchResult",
    "BatchState",
    "parse_results",
    "request_body",
    "split_requests",
]

log = logging.getLogger(__name__)

BATCH_ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
MAX_REQUESTS = 50_000  # requests in one batch (OpenAI's limit)
MAX_FILE_BYTES = 200 * 1024 * 1024  # one input file (OpenAI's limit)
# states after which a batch changes no more
FINISHED = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchRequest:
    """One line of a batch input file."""

    custom_id: str  # the answer's cache key
    chunk_id: str
    body: dict[str, Any]  # the chat-completions request, as a live call sends it

    def line(self) -> str:
        return json.dumps(
            {
                "custom_id": self.custom_id,
                "method": "POST",
                "url": BATCH_ENDPOINT,
                "body": self.body,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )


class _Captured(Exception):
    """Internal: stops instructor once the request it would send has been seen."""


def request_body(
    settings: LLMSettings, messages: list[dict], response_model: type[BaseModel]
) -> dict[str, Any]:
    """The body instructor sends for ``messages`` asking ``response_model`` on ``settings``:
    the same call :meth:`LLMClient.complete` makes, stopped before any HTTP."""
    # deferred: instructor imports openai, which takes ~0.5 s; only a model call pays it
    import instructor

    seen: dict[str, Any] = {}

    def capture(**request: Any) -> Any:
        seen.update(request)
        raise _Captured

    create = instructor.patch(create=capture, mode=instructor.Mode[settings.mode])
    try:
        create(
            response_model=response_model,
            messages=[dict(m) for m in messages],  # instructor may edit messages in place
            max_retries=0,
            model=settings.model,
            **settings.generation_params,
        )
    except Exception:  # instructor wraps _Captured in its own retry exception
        if not seen:
            raise
    body: dict[str, Any] = json.loads(json.dumps(seen))  # plain JSON, as it goes on the wire
    return body


def split_requests(
    requests: Sequence[BatchRequest],
    *,
    max_requests: int = MAX_REQUESTS,
    max_bytes: int = MAX_FILE_BYTES,
) -> list[list[BatchRequest]]:
    """``requests`` in order, cut into input files of at most ``max_requests`` lines and
    ``max_bytes`` bytes each."""
    parts: list[list[BatchRequest]] = []
    current: list[BatchRequest] = []
    size = 0
    for request in requests:
        n = len(request.line().encode("utf-8")) + 1
        if n > max_bytes:
            raise ConfigError(
                f"the request for {request.chunk_id} is {n:,} bytes, more than one batch file "
                f"may hold ({max_bytes:,}); enrich that letter with `letterchunk run`"
            )
        if current and (len(current) >= max_requests or size + n > max_bytes):
            parts.append(current)
            current, size = [], 0
        current.append(request)
        size += n
    if current:
        parts.append(current)
    return parts


@dataclass(frozen=True)
class BatchState:
    """What the API says of one batch."""

    id: str
    status: str
    input_file_id: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)  # batch-level errors (a failed batch)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @classmethod
    def of(cls, batch: Any) -> BatchState:
        counts = getattr(batch, "request_counts", None)
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        return cls(
            id=batch.id,
            status=str(batch.status),
            input_file_id=batch.input_file_id,
            total=int(getattr(counts, "total", 0) or 0),
            completed=int(getattr(counts, "completed", 0) or 0),
            failed=int(getattr(counts, "failed", 0) or 0),
            output_file_id=batch.output_file_id,
            error_file_id=batch.error_file_id,
            errors=[f"{e.code or 'error'}: {e.message or ''}".strip() for e in errors],
        )


@dataclass(frozen=True)
class BatchResult:
    """One request's result: an answer, or why there is none."""

    custom_id: str
    answer: CachedAnswer | None
    error: str | None = None


def parse_results(text: str, *, model: str, questions: Collection[str] = ()) -> list[BatchResult]:
    """The lines of a batch output or error file (JSONL) as results.

    A line whose response is HTTP 200 carries a chat completion: its answer is stored as a live
    answer would be (malformed, truncated and refused answers included, for the repair loop;
    for a yes/no question, one of ``questions``' custom ids, its first token's top logprobs as
    :func:`letterchunk.llm.judge.ask_yes_no` keeps them).  Any other line is a failed request.
    """
    # deferred: openai takes ~0.5 s to import; only a model call pays it
    from openai.types.chat import ChatCompletion

    results = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or {}
        error = line.get("error")
        if response.get("status_code") != 200 or error:
            results.append(BatchResult(custom_id, None, _error_text(error, response)))
            continue
        completion = ChatCompletion.model_validate(response.get("body") or {})
        if custom_id in questions:
            results.append(BatchResult(custom_id, question_answer(completion, model)[0]))
            continue
        raw_text, finish_reason, refusal = answer_parts(completion)
        usage = usage_of(completion, request_messages=[], raw_text=raw_text)
        answer = CachedAnswer(
            raw_text=raw_text,
            finish_reason=finish_reason,
            refusal=refusal,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            model=str(completion.model or model),
        )
        results.append(BatchResult(custom_id, answer))
    return results


def _error_text(error: Any, response: dict) -> str:
    if isinstance(error, dict) and error:
        return f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    body = response.get("body") or {}
    inner = body.get("error") if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else None
    return f"HTTP {response.get('status_code')}: {message or 'no answer'}"


class BatchAPI:
    """The Batch API calls letterchunk makes, on the server of ``settings``."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._openai: openai.OpenAI | None = None

    def _client(self) -> openai.OpenAI:
        if self._openai is None:
            # deferred: openai takes ~0.5 s to import; only a model call pays it
            import openai

            self._openai = openai.OpenAI(
                base_url=self.settings.base_url,
                api_key=self.settings.api_key,
                # no silent retries: an upload or create retried after a lost answer could
                # pay twice; a rerun finds what was created instead (see runner.batch)
                max_retries=0,
                timeout=self.settings.timeout_s,
            )
        return self._openai

    def close(self) -> None:
        if self._openai is not None:
            self._openai.close()
            self._openai = None

    def __enter__(self) -> BatchAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self, what: str, exc: BaseException) -> BackendError:
        return BackendError(
            f"Batch API at {redact(self.settings.base_url)}: {what} failed "
            f"({redact(exc).splitlines()[0] if str(exc) else type(exc).__name__}); check the "
            "server supports the Batch API (hosted OpenAI does) and rerun the same command: "
            "what was already submitted is not sent again"
        )

    def upload(self, path: Path) -> str:
        """Upload a batch input file; its file id."""
        try:
            with path.open("rb") as fh:
                return str(self._client().files.create(file=(path.name, fh), purpose="batch").id)
        except Exception as exc:
            raise self._fail(f"uploading {path.name}", exc) from exc

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchState:
        try:
            batch = self._client().batches.create(
                input_file_id=input_file_id,
                endpoint=BATCH_ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
            )
        except Exception as exc:
            raise self._fail("creating a batch", exc) from exc
        return BatchState.of(batch)

    def find(self, input_file_id: str) -> BatchState | None:
        """The batch already created from ``input_file_id``, if any (a create whose answer was
        lost when the process was stopped)."""
        try:
            for batch in self._client().batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return BatchState.of(batch)
        except Exception as exc:
            raise self._fail("listing batches", exc) from exc
        return None

    def retrieve(self, batch_id: str) -> BatchState:
        try:
            return BatchState.of(self._client().batches.retrieve(batch_id))
        except Exception as exc:
            raise self._fail(f"reading batch {batch_id}", exc) from exc

    def download(self, file_id: str) -> str:
        try:
            return str(self._client().files.content(file_id).text)
        except Exception as exc:
            raise self._fail(f"downloading file {file_id}", exc) from exc

    def results(
        self, state: BatchState, *, model: str, questions: Collection[str] = ()
    ) -> list[BatchResult]:
        """Every result a finished batch has: its output file and its error file
        (``questions``: the custom ids of yes/no questions, see :func:`parse_results`)."""
        out: list[BatchResult] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id:
                out += parse_results(self.download(file_id), model=model, questions=questions)
        return out
