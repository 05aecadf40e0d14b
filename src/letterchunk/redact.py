"""Secrets out of every message: one function applied wherever an error or a record becomes text.

:func:`redact` replaces

* the value of every configured secret, wherever it appears, whatever its shape, with ``***``:
  the environment variables letterchunk and its clients read (``OPENAI_API_KEY``,
  ``LETTERCHUNK_EMBED_API_KEY``), any other variable named like a secret (``*_API_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...), and keys handed to a client in code
  (:func:`register_secret`).  Values are read when called, never at import, and also masked
  in the escaped forms a message may carry them in (JSON, a Python ``repr``, URL-encoded);
* OpenAI-style keys (``sk-…``, ``sk-proj-…``) with ``sk-***``;
* credentials in URLs (``https://user:password@host`` -> ``https://***@host``);
* bearer tokens (``Bearer abc…`` -> ``Bearer ***``).

Backends echo keys in error bodies ("Incorrect API key provided: …"), and a base URL may carry
a password; both reach stderr, ``DIR/run.json`` and ``DIR/YYYY.report.jsonl`` through here.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TypeVar, cast
from urllib.parse import quote, quote_plus

from letterchunk.settings import process_env

__all__ = ["SECRET_ENV_VARS", "redact", "redact_obj", "register_secret", "secret_values"]

_KEY = re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-*]{6,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'<>]+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._\-~+/=]{8,}")
_MIN_SECRET = 6  # a shorter value ("x", "none", "test") would blank out ordinary words
_MASK = "***"

#: the secret variables letterchunk (and the openai client it drives) read
SECRET_ENV_VARS = ("OPENAI_API_KEY", "LETTERCHUNK_EMBED_API_KEY")
# any other variable named like a secret: a key a plugin or a proxy may read and a server echo
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD|PASSPHRASE)$"
)

_T = TypeVar("_T")
_registered: set[str] = set()
_registered_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Mask ``value`` from now on, like a key read from the environment (a key given in code)."""
    value = (value or "").strip()
    if len(value) >= _MIN_SECRET:
        with _registered_lock:
            _registered.add(value)


@functools.lru_cache(maxsize=1024)
def _is_secret_name(name: str) -> bool:
    return name in SECRET_ENV_VARS or bool(_SECRET_NAME.search(name.upper()))


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask, longest first (so a secret that contains another goes whole)."""
    env = process_env() if env is None else env
    values = {v.strip() for name, v in env.items() if _is_secret_name(name)}
    with _registered_lock:
        values |= _registered
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=lambda v: (-len(v), v))


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """``secret`` as it may appear in a message: raw, JSON-escaped, inside a Python ``repr``
    (how openai quotes an error body), URL-encoded; longest first."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        secret.replace("\\", "\\\\").replace("'", "\\'"),
        secret.replace("\\", "\\\\").replace('"', '\\"'),
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
    }
    return tuple(sorted(forms, key=lambda f: (-len(f), f)))


def _mask_values(text: str, secrets: Iterable[str]) -> str:
    forms = [form for secret in secrets for form in _forms(secret)]
    # masking can join what was around a secret into a secret again ("x" + "***" when a key is
    # "x***"); every change shortens the text (a form is longer than the mask), so this ends
    changed = True
    while changed:
        changed = False
        for form in forms:
            if form in text:
                text, changed = text.replace(form, _MASK), True
    return text


def redact(text: object) -> str:
    """``str(text)`` with configured secrets, API keys and URL credentials masked."""
    out = _mask_values(str(text), secret_values())
    out = _KEY.sub("sk-***", out)
    out = _URL_CREDENTIALS.sub(r"\1***@", out)
    return _BEARER.sub(r"\1***", out)


def redact_obj(value: _T) -> _T:
    """Every string inside nested dicts / lists / tuples passed through :func:`redact`; the
    value keeps its type (a dict stays a dict, a tuple a tuple)."""
    if isinstance(value, str):
        return cast(_T, redact(value))
    if isinstance(value, dict):
        return cast(_T, {k: redact_obj(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return cast(_T, type(value)(redact_obj(v) for v in value))
    return value
