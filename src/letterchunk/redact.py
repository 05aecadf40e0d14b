"""Secrets out of every message: one function applied wherever an error or a record becomes text.

:func:`redact` replaces

* OpenAI-style keys (``sk-…``, ``sk-proj-…``) with ``sk-***``;
* the actual value of ``OPENAI_API_KEY`` (read when called, never at import), wherever it
  appears, whatever its shape, with ``***``;
* credentials in URLs (``https://user:password@host`` -> ``https://***@host``);
* bearer tokens (``Bearer abc…`` -> ``Bearer ***``).

Backends echo keys in error bodies ("Incorrect API key provided: sk-…"), and a base URL may carry
a password; both reach stderr, ``DIR/run.json`` and ``DIR/YYYY.report.jsonl`` through here.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["redact", "redact_obj"]

_KEY = re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-*]{6,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'<>]+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._\-~+/=]{8,}")
_MIN_SECRET = 6  # a shorter OPENAI_API_KEY ("x", "test") would blank out ordinary words


def redact(text: Any) -> str:
    """``str(text)`` with API keys, the configured key and URL credentials masked."""
    out = str(text)
    secret = os.environ.get("OPENAI_API_KEY", "").strip()
    if len(secret) >= _MIN_SECRET:
        out = out.replace(secret, "***")
    out = _KEY.sub("sk-***", out)
    out = _URL_CREDENTIALS.sub(r"\1***@", out)
    return _BEARER.sub(r"\1***", out)


def redact_obj(value: Any) -> Any:
    """Every string inside nested dicts / lists / tuples passed through :func:`redact`."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_obj(v) for v in value)
    return value
