"""Ledger: per-letter totals, price table, unknown cost is never 0, atomic run.json."""

from __future__ import annotations

import json
import threading

import pytest

from letterchunk.errors import ConfigError
from letterchunk.layout import RUN_FILE
from letterchunk.runner.ledger import Ledger, ModelPrice, load_prices, price_for


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("LETTERCHUNK_PRICES", raising=False)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_shipped_price_table_has_hosted_and_local_models():
    table = load_prices()
    assert table["gpt-4o-mini"] == ModelPrice("gpt-4o-mini", 0.15, 0.60, 0.075, 0.30)
    # the Batch API's rate is half the standard one for every hosted model listed
    for price in table.values():
        assert price.batch_cost(10**6, 10**6) in (None, price.cost(10**6, 10**6) / 2)
    assert table["qwen2.5-coder-1.5b-instruct"].cost(10**6, 10**6) == 0.0


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),  # dated snapshot falls back to the undated id
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("fake-model", None),
        ("gpt-5-turbo-ultra", None),
    ],
)
def test_price_lookup(model, expected):
    price = price_for(model)
    assert (price.model if price else None) == expected


def test_price_file_override_and_errors(tmp_path, monkeypatch):
    custom = tmp_path / "p.json"
    custom.write_text(
        json.dumps({"models": {"fake-model": {"input_per_mtok": 1, "output_per_mtok": 2}}})
    )
    monkeypatch.setenv("LETTERCHUNK_PRICES", str(custom))
    assert price_for("fake-model").cost(1_000_000, 500_000) == pytest.approx(2.0)
    custom.write_text(json.dumps({"models": {"m": {"input_per_mtok": -1, "output_per_mtok": 2}}}))
    with pytest.raises(ConfigError, match="non-negative"):
        load_prices()
    with pytest.raises(ConfigError, match="not found"):
        load_prices(tmp_path / "missing.json")


def test_totals_per_letter_and_cost(tmp_path):
    clock = Clock()
    ledger = Ledger("gpt-4o", clock=clock)
    ledger.letter_started(1977)
    ledger.record_completion(1977, source="live", prompt_tokens=1000, completion_tokens=200)
    ledger.record_completion(
        1977, source="live", prompt_tokens=800, completion_tokens=100, requests=2
    )
    ledger.record_completion(1977, source="cache")
    ledger.record_repairs(1977, 1)
    for _ in range(3):
        ledger.record_chunk(1977)
    clock.t += 2.5
    ledger.letter_finished(1977)
    ledger.record_completion(1978, source="cache")
    ledger.record_chunk(1978)
    clock.t += 1
    ledger.finish()
    path = ledger.write(tmp_path)
    assert path.name == RUN_FILE
    data = json.loads(path.read_text())
    l77 = data["letters"]["1977"]
    assert (l77["requests"], l77["prompt_tokens"], l77["completion_tokens"]) == (3, 1800, 300)
    assert (l77["cache_hits"], l77["cache_misses"], l77["repairs"], l77["chunks"]) == (1, 2, 1, 3)
    assert l77["wall_s"] == 2.5
    assert l77["cost_usd"] == pytest.approx((1800 * 2.5 + 300 * 10) / 1e6)
    assert data["letters"]["1978"]["cost_usd"] == 0.0  # known model, nothing spent
    assert data["totals"]["total_tokens"] == 2100 and data["totals"]["wall_s"] == 3.5
    assert data["status"] == "complete"
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temp file


def test_unknown_model_cost_is_null_not_zero(tmp_path):
    ledger = Ledger("fake-model")
    ledger.record_completion(1977, source="live", prompt_tokens=10, completion_tokens=5)
    ledger.finish("budget_exceeded", "cap")
    data = json.loads(ledger.write(tmp_path).read_text())
    assert data["price"] is None
    assert data["totals"]["cost_usd"] is None and data["letters"]["1977"]["cost_usd"] is None
    text = "\n".join(ledger.summary_lines())
    assert "unknown" in text and "budget_exceeded" in text


def test_thread_safe_counts():
    ledger = Ledger("gpt-4o-mini")

    def work():
        for _ in range(500):
            ledger.record_completion(2000, source="live", prompt_tokens=1, completion_tokens=1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.totals().requests == 4000 and ledger.totals().prompt_tokens == 4000


def test_embedded_model_is_priced_at_zero():
    from letterchunk.llm.backend import MODEL_ID

    price = price_for(MODEL_ID)
    assert price is not None and price.cost(10**6, 10**6) == 0.0
