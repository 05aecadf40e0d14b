"""RateLimiter: TPM/RPM rolling window, correction by reported usage, budget caps."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from fake_openai import FakeOpenAI, answer, prompt_tokens_of
from letterchunk.errors import BudgetExceeded, ConfigError
from letterchunk.llm.client import estimate_tokens
from letterchunk.llm.limiter import RateLimiter
from letterchunk.runner.ledger import ModelPrice


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("OPENAI_TPM_LIMIT", "OPENAI_RPM_LIMIT"):
        monkeypatch.delenv(var, raising=False)


def timed(fn, *args):
    t0 = time.monotonic()
    fn(*args)
    return time.monotonic() - t0


def test_estimate_matches_what_the_server_charges():
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Float is $1.2 billion."},
    ]
    body = {"messages": messages, "max_tokens": 300}
    assert estimate_tokens(body) == prompt_tokens_of(body) + 300


def test_tpm_blocks_until_the_window_frees_room():
    lim = RateLimiter(tpm=1000, window_s=0.4)
    for _ in range(2):
        assert timed(lim.acquire, 400) < 0.05
        lim.settle(400, 400)
    waited = timed(lim.acquire, 400)  # 1200 > 1000: must wait for the first charge to expire
    assert 0.3 < waited < 1.0
    assert lim.stats().waits == 1


def test_a_charge_is_counted_from_its_settle_not_its_acquire():
    # the server admitted the request somewhere between our acquire and settle: only the settle
    # time is certain not to free room before the server does
    lim = RateLimiter(tpm=1000, window_s=0.4)
    lim.acquire(600)
    time.sleep(0.3)  # slow answer
    lim.settle(600, 600)
    waited = timed(lim.acquire, 600)
    assert waited > 0.3  # 0.4 s after the settle, not 0.1 s


def test_settling_below_the_estimate_frees_room_at_once():
    lim = RateLimiter(tpm=1000, window_s=5.0)
    lim.acquire(400)
    lim.settle(400, 100)
    lim.acquire(400)
    lim.settle(400, 100)
    assert timed(lim.acquire, 700) < 0.05  # 100 + 100 + 700 <= 1000


def test_settle_from_another_thread_wakes_a_waiter():
    lim = RateLimiter(tpm=1000, window_s=30.0)
    lim.acquire(900)

    def later():
        time.sleep(0.2)
        lim.settle(900, 50)

    threading.Thread(target=later).start()
    waited = timed(lim.acquire, 900)  # would be 30 s without the settle
    assert 0.15 < waited < 2.0


def test_rpm_limit():
    lim = RateLimiter(rpm=2, window_s=0.3)
    for _ in range(2):
        lim.acquire(1)
        lim.settle(1, 1)
    assert timed(lim.acquire, 1) > 0.2


def test_underestimates_are_corrected_upward():
    lim = RateLimiter(tpm=10_000, window_s=60.0)
    lim.acquire(100)
    lim.settle(100, 150)  # server counted 1.5x what we estimated
    lim.acquire(100)
    assert lim.stats().scale == pytest.approx(1.575)
    # the new charge is 158 tokens, the settled one 150
    lim.settle(100, 100)
    assert lim.spent_tokens == 250


def test_token_cap_raises_before_sending_and_stays_tripped():
    lim = RateLimiter(max_tokens_total=1000)
    lim.acquire(600)
    lim.settle(600, 500)
    with pytest.raises(BudgetExceeded) as exc:
        lim.acquire(600)  # 500 + 600 > 1000
    assert (exc.value.what, exc.value.used, exc.value.cap) == ("tokens", 500, 1000)
    assert "--max-tokens-total" in str(exc.value)
    with pytest.raises(BudgetExceeded):
        lim.acquire(1)  # tripped: the run stops scheduling
    assert lim.spent_tokens == 500


def test_token_cap_counts_requests_in_flight():
    lim = RateLimiter(max_tokens_total=1000)
    lim.acquire(400)
    lim.acquire(400)
    lim.acquire(150)
    with pytest.raises(BudgetExceeded):
        lim.acquire(100)  # 950 in flight + 100 > 1000, although nothing has been spent yet
    assert lim.spent_tokens == 0


def test_cost_cap_uses_the_price_split():
    price = ModelPrice("gpt-4o", 2.5, 10.0)
    lim = RateLimiter(max_cost=0.01, price=price)
    lim.acquire(1000)  # worst case 1000 output tokens = $0.01: fits exactly
    lim.settle(1000, 1000, prompt_tokens=800, completion_tokens=200)  # $0.002 + $0.002
    lim.acquire(500)  # 0.004 + 0.005 <= 0.01
    lim.settle(500, 500, prompt_tokens=400, completion_tokens=100)  # +0.002 -> 0.006
    with pytest.raises(BudgetExceeded) as exc:
        lim.acquire(500)  # 0.006 + 0.005 > 0.01
    assert exc.value.what == "cost" and "--max-cost" in str(exc.value)


def test_cost_cap_without_a_price_is_a_config_error():
    with pytest.raises(ConfigError, match="--max-tokens-total"):
        RateLimiter(max_cost=1.0, price=None)


def test_request_larger_than_the_tpm_limit_is_a_config_error():
    with pytest.raises(ConfigError, match="TPM"):
        RateLimiter(tpm=100).acquire(101)


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        ({}, {}, (None, None)),
        ({"OPENAI_TPM_LIMIT": "90000", "OPENAI_RPM_LIMIT": "60"}, {}, (90000, 60)),
        ({"OPENAI_TPM_LIMIT": "90000"}, {"tpm": 30000, "rpm": None}, (30000, None)),
    ],
)
def test_from_env(env, overrides, expected):
    lim = RateLimiter.from_env(env, **overrides)
    assert (lim.tpm, lim.rpm) == expected


def test_bad_env_names_the_variable():
    with pytest.raises(ConfigError, match="OPENAI_RPM_LIMIT"):
        RateLimiter.from_env({"OPENAI_RPM_LIMIT": "sixty"})


def test_many_threads_against_a_rate_limited_server_get_no_429():
    """8 workers hammer a server enforcing 3000 TPM over a 1 s window: zero 429s."""
    tpm, window = 3000, 1.0
    text = '{"summary": "' + "float " * 40 + '"}'
    with FakeOpenAI(
        lambda req: answer(text), latency_s=0.02, tpm_limit=tpm, window_s=window
    ) as server:
        lim = RateLimiter(tpm=tpm, window_s=window)
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        errors: list[Exception] = []

        def worker(i: int) -> None:
            for j in range(6):
                messages = [{"role": "user", "content": f"chunk {i}-{j}: " + "berkshire " * 60}]
                est = estimate_tokens({"messages": messages, "max_tokens": 120})
                lim.acquire(est)
                try:
                    out = client.chat.completions.create(
                        model="m", messages=messages, max_tokens=120
                    )
                except Exception as exc:  # noqa: BLE001 - collected and asserted below
                    errors.append(exc)
                    lim.settle(est, 0)
                    continue
                lim.settle(
                    est,
                    out.usage.total_tokens,
                    prompt_tokens=out.usage.prompt_tokens,
                    completion_tokens=out.usage.completion_tokens,
                )

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert server.rate_limited_count == 0
        assert server.chat_count == 48
        assert lim.stats().waits > 0  # the limiter, not luck, kept us under the limit
        assert lim.spent_tokens == server.usage_total.total_tokens


def test_learned_prompt_ratio_shrinks_in_flight_charges_but_not_the_budget():
    # estimates = prompt estimate (incl. a schema the server does not count) + max_tokens 1000
    lim = RateLimiter(tpm=100_000, completion_allowance=1000, max_tokens_total=20_000)
    for _ in range(5):  # until 5 answers are known, a request is charged its full estimate
        lim.acquire(5000)
        assert lim._window[-1].tokens == 5000
        lim.settle(5000, 2000)  # the server reported 2000 for a 4000-token prompt estimate
    lim.acquire(5000)
    # rate charge: 4000 * (2000/4000 * 1.10) + 1000 = 3200; the budget keeps the worst case
    assert lim._window[-1].tokens == 3200
    assert lim._unsettled[-1].budget == 5000
    assert lim.stats().prompt_ratio == pytest.approx(0.55)
    with pytest.raises(BudgetExceeded):
        lim.acquire(5_500)  # 10000 spent + 5000 in flight + 5500 > 20000


def test_learned_ratio_keeps_a_rate_limited_server_free_of_429s():
    """Schema-heavy estimates (2x what the server counts) still never overrun its limit."""
    tpm, window = 4000, 1.0
    text = '{"summary": "' + "float " * 30 + '"}'
    with FakeOpenAI(
        lambda req: answer(text), latency_s=0.02, tpm_limit=tpm, window_s=window
    ) as server:
        lim = RateLimiter(tpm=tpm, window_s=window, completion_allowance=100)
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        errors: list[Exception] = []

        def worker(i: int) -> None:
            for j in range(5):
                messages = [{"role": "user", "content": f"chunk {i}-{j}: " + "berkshire " * 60}]
                # counts a "schema" too
                est = 2 * estimate_tokens({"messages": messages, "max_tokens": 0}) + 100
                lim.acquire(est)
                actual = 0
                try:
                    out = client.chat.completions.create(
                        model="m", messages=messages, max_tokens=100
                    )
                    actual = out.usage.total_tokens
                except Exception as exc:  # noqa: BLE001 - collected and asserted below
                    errors.append(exc)
                finally:
                    lim.settle(est, actual)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and server.rate_limited_count == 0
        assert lim.stats().prompt_ratio is not None and lim.stats().prompt_ratio < 0.8


def test_one_token_questions_do_not_inflate_the_learned_prompt_ratio():
    """A yes/no question's estimate holds 1 completion token, not the run's max_tokens: taking
    the run's allowance off it made every later full request look 2-3x bigger."""
    allowance = 1000
    lim = RateLimiter(tpm=10**7, window_s=60, completion_allowance=allowance)
    for _ in range(6):  # full answers whose prompts were estimated right
        lim.acquire(3000)
        lim.settle(3000, 2000 + 300, prompt_tokens=2000, completion_tokens=300)
    before = lim._rate_charge_locked(3000, allowance)
    for _ in range(6):  # questions: 2000-token prompts, one token out
        lim.acquire(2001, max_tokens=1)
        lim.settle(2001, 2001, prompt_tokens=2000, completion_tokens=1)
    assert lim._rate_charge_locked(3000, allowance) == before <= 3000 * 1.2
