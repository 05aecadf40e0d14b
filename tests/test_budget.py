"""docs/spec.md §B.5 budget: the worked example, precedence defaults < env < options, errors."""

from __future__ import annotations

import json

import pytest

from letterchunk.cli import main
from letterchunk.errors import ConfigError
from letterchunk.llm.budget import ENV_VARS, BudgetSettings, compute_budget, settings_from_env


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


def test_seed_worked_example():
    # spec §B.5: C=128000, Rp=1200, Ra=1500, K=6, B=0.8, TPM=90000, 10 req/min
    r = compute_budget(BudgetSettings())
    assert r.t_req == 9000
    assert r.t_chunk_tpm == 1050
    # the spec prints 20900, but floor((128000 - 2700) / 6) is 20883 (its own formula)
    assert r.t_chunk_ctx == 20883
    assert r.t_chunk_safe == 840
    assert r.w_chunk_safe == 646
    assert r.binding == "tpm"


@pytest.mark.parametrize(
    ("overrides", "t_safe", "w_safe", "binding"),
    [
        # context binds when the context is small: floor((8000-2700)/6)=883, *0.8 -> 706
        ({"context_limit": 8000, "tpm": 900_000}, 706, 543, "context"),
        # no headroom: B=1 gives the raw minimum
        ({"safety_buffer": 1.0}, 1050, 807, "tpm"),
        # more requests per minute -> smaller per-request allowance: 90000/15=6000 -> 550*0.8=440
        ({"requests_per_minute": 15}, 440, 338, "tpm"),
        # top-k 3 doubles the per-chunk share: (9000-2700)//3=2100 -> 1680
        ({"top_k": 3}, 1680, 1292, "tpm"),
    ],
)
def test_table(overrides, t_safe, w_safe, binding):
    r = compute_budget(BudgetSettings(**overrides))
    assert (r.t_chunk_safe, r.w_chunk_safe, r.binding) == (t_safe, w_safe, binding)


def test_env_overrides_defaults_and_options_override_env():
    env = {
        "OPENAI_TPM_LIMIT": "180000",
        "TARGET_TOP_K_FOR_BUDGET": "4",
        "CHUNK_SAFETY_BUFFER": "0.5",
    }
    s = settings_from_env(env)
    assert (s.tpm, s.top_k, s.safety_buffer, s.context_limit) == (180000, 4, 0.5, 128000)
    s = settings_from_env(env, tpm=60000, top_k=None)
    assert (s.tpm, s.top_k) == (60000, 4)


def test_bad_env_value_names_the_variable():
    with pytest.raises(ConfigError, match="OPENAI_TPM_LIMIT"):
        settings_from_env({"OPENAI_TPM_LIMIT": "lots"})


@pytest.mark.parametrize(
    ("overrides", "option"),
    [
        ({"tpm": 0}, "--tpm"),
        ({"top_k": -1}, "--top-k"),
        ({"safety_buffer": 1.5}, "--safety-buffer"),
        ({"reserved_prompt": 100_000, "reserved_answer": 30_000}, "--reserved-prompt"),
        ({"tpm": 20_000}, "--tpm"),  # 20000/10 = 2000 <= 2700 reserved
    ],
)
def test_invalid_settings_name_the_option(overrides, option):
    with pytest.raises(ConfigError, match=option):
        compute_budget(BudgetSettings(**overrides))


def test_hints_override_computed_sizes():
    r = compute_budget(BudgetSettings(max_tokens_hint=500))
    assert (r.t_chunk_safe, r.max_tokens_per_chunk, r.max_words_per_chunk) == (840, 500, 384)


def test_cli_human_output(capsys):
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert "840 tokens" in out and "646 words" in out


def test_cli_json_with_env_and_option(capsys, monkeypatch):
    monkeypatch.setenv("EXPECTED_REQUESTS_PER_MINUTE", "20")  # T_req 4500 -> 300*0.8 = 240
    assert main(["budget", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["t_req"], data["t_chunk_safe"]) == (4500, 240)
    assert main(["budget", "--json", "--requests-per-minute", "10"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["t_chunk_safe"], data["w_chunk_safe"]) == (840, 646)
    assert data["settings"]["requests_per_minute"] == 10


def test_cli_bad_option_exits_2(capsys):
    assert main(["budget", "--tpm", "1000"]) == 2
    assert "--tpm" in capsys.readouterr().err
