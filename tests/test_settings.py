"""One owner of the environment: ``letterchunk.settings`` reads every variable, parses it once
and says what is wrong with a bad value; no other module reads ``os.environ``; every variable is
in ``docs/settings.md``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from letterchunk.errors import ConfigError
from letterchunk.settings import (
    DEFAULT_CONTEXT_TOKENS,
    HOSTED_CONTEXT,
    VARIABLES,
    Settings,
)

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "letterchunk"
DOC = ROOT / "docs" / "settings.md"
OWNER = PKG / "settings.py"
# what reads (or writes) the process environment: os.environ, os.getenv, os.putenv, ...
_ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(source: str) -> list[int]:
    """Line numbers where ``source`` touches the process environment through ``os``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in _ENV_NAMES:
            lines.append(node.lineno)  # os.environ..., os.getenv(...), posix.environ
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module in ("os", "posix")
            and any(a.name in _ENV_NAMES or a.name == "*" for a in node.names)
        ):
            lines.append(node.lineno)  # from os import environ / getenv
    return lines


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import os\nx = os.environ.get('A')\n", [2]),
        ("import os\nx = os.getenv('A')\n", [2]),
        ("from os import environ\nx = environ['A']\n", [1]),
        ("import os as o\no.environ.setdefault('A', '1')\n", [2]),
        ("import os\nx = os.path.join('a', 'b')\n", []),
    ],
)
def test_the_checker_finds_an_environment_read(source, found):
    assert environment_reads(source) == found


def test_only_settings_reads_the_environment():
    readers = {
        str(path.relative_to(PKG)): lines
        for path in sorted(PKG.rglob("*.py"))
        if path != OWNER and (lines := environment_reads(path.read_text(encoding="utf-8")))
    }
    assert readers == {}, f"read the environment outside settings.py (file: lines): {readers}"
    assert environment_reads(OWNER.read_text(encoding="utf-8")), "settings.py reads nothing?"


class Recording(Mapping[str, str]):
    """A mapping that records every name looked up in it."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.asked = values, set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return self.values[name]

    def get(self, name, default=None):  # noqa: ANN001, ANN201 - Mapping.get
        self.asked.add(name)
        return self.values.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def test_every_variable_read_is_listed_and_every_listed_one_is_read():
    env = Recording({})
    Settings._parse(env)
    assert env.asked == set(VARIABLES)


def _documented() -> set[str]:
    """The variables of the tables in docs/settings.md (first column)."""
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([A-Z0-9_]+)`", row).group(1) for row in rows}


def test_every_variable_is_documented_once_in_a_table():
    rows = [
        line
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `") and line.count("|") == 6  # name, type, default, what, who
    ]
    names = [re.match(r"\| `([A-Z0-9_]+)`", row).group(1) for row in rows]
    assert sorted(names) == sorted(set(names)), "a variable has two rows"
    assert set(names) == set(VARIABLES) == _documented()


def test_defaults_and_empty_values_count_as_unset():
    s = Settings.from_env({"LETTERCHUNK_TIMEOUT_S": "", "OPENAI_API_KEY": "  ", "HOME": "/h"})
    assert (s.openai_api_key, s.timeout_s, s.api_configured) == (None, None, False)
    assert (s.max_tokens, s.seed, s.transport_retries, s.ctx_size) == (1024, 42, 3, 8192)
    assert (s.cache_dir, s.model_dir) == (Path("cache"), Path("/h/.cache/letterchunk/models"))
    assert (s.rate_window_s, s.progress_interval_s, s.embed_api_key) == (60.0, 30.0, "none")
    assert s.budget.given() == {}


def test_values_are_parsed_once_into_their_types():
    s = Settings.from_env(
        {
            "LETTERCHUNK_INSTRUCTOR_MODE": "md_json",
            "LETTERCHUNK_TIMEOUT_S": "2.5",
            "OPENAI_TPM_LIMIT": "9000",
            "CHUNK_SAFETY_BUFFER": "0.5",
            "LETTERCHUNK_PRICES": "/p.json",
        }
    )
    assert (s.instructor_mode, s.timeout_s, s.tpm_limit) == ("MD_JSON", 2.5, 9000)
    assert s.budget.given() == {"tpm": 9000, "safety_buffer": 0.5}
    assert s.prices == Path("/p.json")


def test_a_key_never_shows_in_the_record():
    s = Settings.from_env({"OPENAI_API_KEY": "sk-secret-1", "LETTERCHUNK_EMBED_API_KEY": "e-2x"})
    assert s.openai_api_key == "sk-secret-1"
    assert "sk-secret-1" not in repr(s) and "e-2x" not in repr(s)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("LETTERCHUNK_TIMEOUT_S", "soon", "is not a number of seconds"),
        ("LETTERCHUNK_TIMEOUT_S", "0", "must be more than 0 seconds"),
        ("LETTERCHUNK_TIMEOUT_S", "nan", "is not a number of seconds"),
        ("LETTERCHUNK_PROGRESS_INTERVAL", "-1", "must be 0 or more seconds"),
        ("LETTERCHUNK_TRANSPORT_RETRIES", "-1", "must be 0 or more"),
        ("LETTERCHUNK_MAX_TOKENS", "lots", "is not a whole number of 1 or more"),
        ("LETTERCHUNK_CONTEXT_TOKENS", "8k", "is not a whole number of 1 or more"),
        ("LETTERCHUNK_INSTRUCTOR_MODE", "FUNCTIONS", "one of JSON_SCHEMA, TOOLS, MD_JSON, JSON"),
        ("OPENAI_RPM_LIMIT", "0", "must be 1 or more"),
        ("CHUNK_SAFETY_BUFFER", "1.5", "must be in (0, 1]"),
        ("CHUNK_RESERVED_PROMPT_TOKENS", "-5", "must be 0 or more"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_it_accepts(name, raw, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        Settings.from_env({name: raw})
    assert str(info.value).startswith(name)


@pytest.mark.parametrize(
    ("env", "option", "run", "validation"),
    [
        # unset: a run uses its backend's size, validate the documented default
        ({}, None, 8192, DEFAULT_CONTEXT_TOKENS),
        ({"LETTERCHUNK_CTX_SIZE": "16384"}, None, 16384, DEFAULT_CONTEXT_TOKENS),
        ({"OPENAI_API_KEY": "sk-x"}, None, HOSTED_CONTEXT, DEFAULT_CONTEXT_TOKENS),
        # set: both use it, whatever the backend
        ({"OPENAI_API_KEY": "sk-x", "LETTERCHUNK_CONTEXT_TOKENS": "32000"}, None, 32000, 32000),
        ({"LETTERCHUNK_CONTEXT_TOKENS": "4096"}, None, 4096, 4096),
        # --context-tokens wins for the run
        ({"LETTERCHUNK_CONTEXT_TOKENS": "4096"}, 9000, 9000, 4096),
    ],
)
def test_one_context_setting_with_one_fallback_rule_per_use(env, option, run, validation):
    s = Settings.from_env(env)
    assert (s.run_context(option), s.validation_context()) == (run, validation)


def test_the_validator_and_the_run_read_the_same_variable(monkeypatch):
    from letterchunk.contract.rules import PROMPT_RESERVE_TOKENS, max_chunk_tokens
    from letterchunk.llm.connect import context_tokens

    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("LETTERCHUNK_CONTEXT_TOKENS", "20000")
    assert context_tokens() == 20000 == max_chunk_tokens() + PROMPT_RESERVE_TOKENS
    monkeypatch.setenv("LETTERCHUNK_CONTEXT_TOKENS", "twenty")
    for read in (context_tokens, max_chunk_tokens):
        with pytest.raises(ConfigError, match="LETTERCHUNK_CONTEXT_TOKENS"):
            read()


def test_the_process_environment_is_read_when_asked_not_before(monkeypatch):
    monkeypatch.setenv("LETTERCHUNK_SEED", "7")
    assert Settings.from_env().seed == 7
    monkeypatch.setenv("LETTERCHUNK_SEED", "8")
    assert Settings.from_env().seed == 8
