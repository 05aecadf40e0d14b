"""Transport faults of one HTTP request to the LLM backend: which are worth retrying (and after
how long the server asked to wait), and which end the run with a :class:`BackendError` that
says what to fix.  Used by :class:`letterchunk.llm.client.LLMClient`."""

from __future__ import annotations

import email.utils
import time
from typing import TYPE_CHECKING, Any

from letterchunk.errors import BackendError
from letterchunk.redact import redact

if TYPE_CHECKING:  # pragma: no cover
    from letterchunk.llm.client import LLMSettings

__all__ = ["Transient", "classify", "short"]


class Transient(Exception):
    """Internal: a transport fault worth retrying; carries the wait the server asked for."""

    def __init__(self, description: str, retry_after: float | None, cause: BaseException) -> None:
        super().__init__(description)
        self.description = description
        self.retry_after = retry_after
        self.cause = cause


def retry_after_seconds(response: Any) -> float | None:
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
    if isinstance(exc, openai.RateLimitError):
        return Transient("HTTP 429 rate limited", retry_after_seconds(exc.response), exc)
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        if code >= 500 or code in (408, 409):
            return Transient(f"HTTP {code} from the server", retry_after_seconds(exc.response), exc)
        hint = {
            401: "check OPENAI_API_KEY",
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


def short(exc: BaseException | str, limit: int = 300) -> str:
    """One line of an error for a message; keys and URL passwords masked (``redact``)."""
    text = redact(exc).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
