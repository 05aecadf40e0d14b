"""Secrets out of every message: one function applied wherever an error or a record becomes text.

:func:`redact` replaces

* the value of every configured secret, wherever it appears, whatever its shape, with ``***``:
  the environment variables letterchunk and its clients read (``OPENAI_API_KEY``,
  ``LETTERCHUNK_EMBED_API_KEY``), any other variable named like a secret (``*_API_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...), and keys handed to a client in code
  (:func:`register_secret`).  Values are read when called, never at import, and also masked
  in the escaped forms a message may carry them in (JSON, a Python ``repr``, URL-encoded) and
  in the base64 forms an HTTP Basic ``Authorization`` header carries (``user:password``,
  ``:key``, ``key:``);
* the credentials of every URL in the environment (``OPENAI_BASE_URL=http://user:pw@host``,
  a proxy variable) or given in code (:func:`register_url`): the password, ``user:password``,
  each as written and percent-decoded (httpx sends the decoded pair as Basic auth), and the
  user name alone when there is no password (a token as user name);
* HTTP Basic credentials (``Basic dXNlcjpw…`` -> ``Basic ***``), whatever their value;
* OpenAI-style keys (``sk-…``, ``sk-proj-…``) with ``sk-***``;
* credentials in URLs (``https://user:password@host`` -> ``https://***@host``);
* bearer tokens (``Bearer abc…`` -> ``Bearer ***``).

Backends echo keys in error bodies ("Incorrect API key provided: …"), and a base URL may carry
a password; both reach stderr, ``DIR/run.json`` and ``DIR/YYYY.report.jsonl`` through here.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TypeVar, cast
from urllib.parse import quote, quote_plus, unquote, urlsplit

from letterchunk.settings import process_env

__all__ = [
    "SECRET_ENV_VARS",
    "redact",
    "redact_obj",
    "register_secret",
    "register_url",
    "secret_values",
    "url_secrets",
]

_KEY = re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-*]{6,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'<>]+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._\-~+/=]{8,}")
_BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/_\-]{4,}=*)")
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


def register_url(url: str | None) -> None:
    """Mask the credentials of ``url`` from now on (a base URL given in code or an option)."""
    for value in url_secrets(url or ""):
        register_secret(value)


@functools.lru_cache(maxsize=256)
def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a URL's ``user:password@`` carries: the password and ``user:password``, as
    written and percent-decoded; the user name when there is no password."""
    if "@" not in url or "://" not in url:
        return ()
    try:
        parts = urlsplit(url.strip())
        user, password = parts.username, parts.password
    except ValueError:  # not a URL after all (a bad port, brackets)
        return ()
    values: set[str] = set()
    if password is not None:
        for u, p in ((user or "", password), (unquote(user or ""), unquote(password))):
            values |= {p, f"{u}:{p}"}
    elif user:
        values |= {user, unquote(user)}
    return tuple(sorted(v for v in values if v))


@functools.lru_cache(maxsize=1024)
def _is_secret_name(name: str) -> bool:
    return name in SECRET_ENV_VARS or bool(_SECRET_NAME.search(name.upper()))


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask, longest first (so a secret that contains another goes whole)."""
    env = process_env() if env is None else env
    values = {v.strip() for name, v in env.items() if _is_secret_name(name)}
    for v in env.values():  # any variable may be a URL with credentials (a base URL, a proxy)
        if "://" in v and "@" in v:
            values.update(url_secrets(v))
    with _registered_lock:
        values |= _registered
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=lambda v: (-len(v), v))


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """``secret`` as it may appear in a message: raw, JSON-escaped, inside a Python ``repr``
    (how openai quotes an error body), URL-encoded, base64 as HTTP Basic auth carries it (the
    secret as ``user:password``, as a password ``:secret``, as a user name ``secret:``; with and
    without padding, standard and URL-safe alphabets); longest first."""
    raw = secret.encode("utf-8", "surrogatepass")
    encoded = [
        encode(pair).decode("ascii")
        for pair in (raw, b":" + raw, raw + b":")
        for encode in (base64.b64encode, base64.urlsafe_b64encode)
    ]
    forms = {
        *encoded,
        *(e.rstrip("=") for e in encoded),
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


def _basic(match: re.Match[str]) -> str:
    """``Basic <base64>`` masked when the base64 decodes to a ``user:password`` pair (so the
    words "basic principles" stay as written)."""
    token = match.group(2)
    try:
        pair = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        try:
            pair = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
        except (binascii.Error, ValueError):
            return match.group(0)
    return match.group(1) + _MASK if b":" in pair else match.group(0)


def redact(text: object) -> str:
    """``str(text)`` with configured secrets, API keys and URL credentials masked."""
    out = _mask_values(str(text), secret_values())
    out = _KEY.sub("sk-***", out)
    out = _URL_CREDENTIALS.sub(r"\1***@", out)
    out = _BASIC.sub(_basic, out)
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
