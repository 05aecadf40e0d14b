"""Credentials in a base URL (``OPENAI_BASE_URL=http://user:SECRET@host/v1``) never leave a run.

httpx sends a URL's ``user:password`` as HTTP Basic auth (base64 of the percent-decoded pair); a
server that answers 401 quoting the ``Authorization`` header put that base64, which decodes to
the password, on stderr and into ``run.json``.  Server text is untrusted: every form of every
configured secret is masked before it is printed or stored.  The table below gives each form
alone to :func:`letterchunk.redact.redact`; the run test has a real fake server echo the header
it received together with every other form, and looks for each in everything the run left.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from urllib.parse import quote

import pytest

from fake_openai import FakeOpenAI, status
from letterchunk.cli import main
from letterchunk.redact import redact, url_secrets

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
USER, PASSWORD = "svc-user", "S@cret/pw+9"  # '@' and '/' must be percent-encoded in a URL
KEY = "Zq9-opaque-llm-key"
USERINFO = f"{quote(USER, safe='')}:{quote(PASSWORD, safe='')}"  # as written in the URL


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def urlsafe_b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


# every way a server may quote the secrets back: (name, text)
FORMS = [
    ("password", PASSWORD),
    ("password, URL-encoded", quote(PASSWORD, safe="")),
    ("user:password", f"{USER}:{PASSWORD}"),
    ("user:password as written in the URL", USERINFO),
    ("Basic header", f"Basic {b64(f'{USER}:{PASSWORD}')}"),
    ("base64 of user:password alone", b64(f"{USER}:{PASSWORD}")),
    ("base64 without padding", b64(f"{USER}:{PASSWORD}").rstrip("=")),
    ("URL-safe base64", urlsafe_b64(f"{USER}:{PASSWORD}")),
    ("base64 of the password alone", b64(PASSWORD)),
    ("API key", KEY),
    ("base64 of :key (key as a Basic password)", b64(f":{KEY}")),
    ("base64 of key: (key as a Basic user name)", b64(f"{KEY}:")),
    ("Basic header of another pair", f"basic {b64('someone:other-secret')}"),
]
SECRETS = [PASSWORD, quote(PASSWORD, safe=""), KEY, *(text for _, text in FORMS[4:9])]


@pytest.fixture
def credentials(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://{USERINFO}@127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.mark.parametrize(("name", "text"), FORMS, ids=[n for n, _ in FORMS])
def test_each_form_of_each_secret_is_masked(credentials, name, text):
    message = f"Incorrect API key provided: {text}. Check it."
    masked = redact(message)
    assert text not in masked and "***" in masked, name
    assert masked.startswith("Incorrect API key provided: ") and masked.endswith(". Check it.")


def test_url_secrets_as_written_and_decoded():
    assert set(url_secrets(f"http://{USERINFO}@h/v1")) == {
        PASSWORD,
        quote(PASSWORD, safe=""),
        f"{USER}:{PASSWORD}",
        USERINFO,
    }
    assert url_secrets("http://tok%2Dabc123@h/") == ("tok%2Dabc123", "tok-abc123")
    assert url_secrets("http://h/v1") == url_secrets("not a url @ all") == ()


@pytest.mark.parametrize(
    "text",
    ["basic principles of insurance", "Basic Economics", "the basic dXNlcg== idea"],
)
def test_ordinary_words_after_basic_stay(text):
    assert redact(text) == text


def test_a_server_echoing_the_basic_header_leaks_nothing(monkeypatch, tmp_path, capsys, caplog):
    holder: dict[str, FakeOpenAI] = {}

    def echo(body: dict):
        sent = holder["server"].all_chat_requests[-1].headers.get("Authorization")
        quoted = "; ".join(text for _, text in FORMS)
        return status(401, {"error": {"message": f"Incorrect API key provided: {sent}; {quoted}"}})

    server = holder["server"] = FakeOpenAI(default=echo)
    with server:
        base = server.base_url.replace("http://", f"http://{USERINFO}@")
        monkeypatch.setenv("OPENAI_BASE_URL", base)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        out = tmp_path / "out"
        with caplog.at_level(logging.DEBUG):
            code = main(["-v", "run", str(LETTER), "--out", str(out), "--retries", "1"])
        sent = server.chat_requests[0].headers.get("Authorization")
    assert sent == f"Basic {b64(f'{USER}:{PASSWORD}')}"  # the pair really went out
    std = capsys.readouterr()
    texts = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir() if p.is_file()}
    texts.update(stdout=std.out, stderr=std.err, log=caplog.text)
    assert code == 2 and "HTTP 401" in std.err and "Basic ***" in std.err
    assert "check OPENAI_API_KEY and the user:password in the base URL" in std.err
    assert "Basic ***" in texts["run.json"]
    leaks = {(where, s) for where, text in texts.items() for s in SECRETS if s in text}
    assert not leaks
