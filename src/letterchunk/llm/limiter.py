"""Client-side tokens-per-minute / requests-per-minute limiter and budget caps.

The LLM client calls :meth:`RateLimiter.acquire` with a request's estimated tokens right before
each HTTP request (it blocks until the request fits, or raises :class:`BudgetExceeded`) and
:meth:`RateLimiter.settle` with the tokens the server reported once the answer (or failure)
arrives.  The limiter is thread-safe: one instance is shared by every worker of the pool.

How it counts — mirroring how the hosted API (and ``tests/fake_openai.py``) count:

* A request is charged its *estimate* when it is sent
  (:func:`letterchunk.llm.client.estimate_tokens`: prompt tokens, o200k, +4 per message, plus
  its ``max_tokens``).  The server admits a request only when the tokens charged in the
  rolling window plus this estimate fit the limit, so the estimate must be the server's worst
  case, not an average.
* When the answer arrives the charge is corrected to the usage the server reported
  (``settle``); a failed request (429, 5xx, reset) is corrected to 0.  Requests still in flight
  keep their estimate.
* If the server's usage ever comes out above our estimate (our tokenizer undercounts: schema or
  tool tokens, another model's tokenizer), later estimates are scaled up by the largest recent
  ratio seen, so we stop underestimating instead of collecting 429s.
* When the limiter knows the completion allowance (``max_tokens``) inside every estimate, it
  learns how the server counts the *prompt* part: the server charges an admitted request
  prompt + max_tokens, and the reported usage (prompt + completion) is an upper bound of that
  prompt.  The rate charge of a new request is then ``prompt_estimate x r + max_tokens``, with
  r the largest ratio usage / prompt_estimate of the last 50 requests (+10%), once 5 are
  known.  Our estimate counts the response schema, which some servers do not count: without
  this correction every request in flight would hold twice its real charge and the limit could
  not be used fully.  Budget caps always use the uncorrected worst case.
* A charge leaves the window ``window_s + skew_s`` after the request was *settled*, not after it
  was sent.  The server counts a request from the moment it admitted it, which lies somewhere
  between our ``acquire`` and our ``settle`` (a worker can stall for a second between the two
  under CPU load, we measured it); anchoring at settle is the only choice that can never free
  room before the server does.  It costs about ``latency / window`` of the limit (1-2% with a
  60 s window and sub-second answers; more with slow answers).  ``skew_s`` (default 0) adds
  margin for a server whose clock runs behind ours.

Budget caps count tokens and cost of *this process* (cache hits cost nothing, so a rerun with a
higher cap resumes where the capped run stopped).  The check runs before sending: spent +
in-flight estimates + this request's estimate must stay within the cap, otherwise
:class:`BudgetExceeded` is raised and the limiter stays tripped (every later acquire raises too),
so the run stops scheduling work while in-flight requests finish.

Env vars (read by :meth:`RateLimiter.from_env`, never at import): ``OPENAI_TPM_LIMIT``,
``OPENAI_RPM_LIMIT``; unset means no rate limit (a local model has none).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from letterchunk.errors import BudgetExceeded, ConfigError
from letterchunk.settings import Settings

__all__ = [
    "RateLimiter",
    "LimiterStats",
]

log = logging.getLogger(__name__)

_COST_EPSILON = 1e-9  # dollars

_MIN_SAMPLES = 5  # settled requests before the learned prompt ratio is trusted
_RATIO_MARGIN = 1.10  # on top of the largest recent usage / prompt-estimate ratio


@dataclass
class _Charge:
    at: float
    tokens: int
    cost: float  # budget-cap cost of this charge (estimate until settled)
    est: int = 0  # the estimate the caller passed (to match settle calls)
    budget: int = 0  # budget-cap tokens of this charge (the estimate until settled)
    settled: bool = False
    allowance: int | None = None  # the max_tokens this estimate includes


@dataclass(frozen=True)
class LimiterStats:
    requests: int  # acquired (sent) requests
    settled: int
    estimated_tokens: int  # sum of estimates as passed in
    actual_tokens: int  # sum of settled usage
    waited_s: float  # total time callers were blocked by the rate limits
    waits: int  # acquires that had to wait
    scale: float  # current estimate correction factor (>= 1)
    prompt_ratio: float | None = None  # learned prompt correction (see module docstring)

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class Price(Protocol):
    """A model's price (``runner.ledger.ModelPrice``): what the cost cap needs of it."""

    @property
    def input_per_mtok(self) -> float: ...

    @property
    def output_per_mtok(self) -> float: ...

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float: ...


def _positive(name: str, value: float | None, option: str) -> float | None:
    if value is None:
        return None
    if value <= 0:
        raise ConfigError(f"{option} must be positive, got {value}; leave it unset for no limit")
    return value


class RateLimiter:
    """Rolling-window TPM/RPM limiter plus token/cost budget caps; share one per run."""

    def __init__(
        self,
        *,
        tpm: int | None = None,
        rpm: int | None = None,
        window_s: float = 60.0,
        skew_s: float | None = None,
        max_tokens_total: int | None = None,
        max_cost: float | None = None,
        price: Price | None = None,
        completion_allowance: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``price`` is a :class:`letterchunk.runner.ledger.ModelPrice` (needed for ``max_cost``);
        ``completion_allowance`` the ``max_tokens`` every estimate includes (enables the learned
        prompt correction described in the module docstring)."""
        self.tpm = _positive("tpm", tpm, "--tpm / OPENAI_TPM_LIMIT")
        self.rpm = _positive("rpm", rpm, "--rpm / OPENAI_RPM_LIMIT")
        self.max_tokens_total = _positive(
            "max_tokens_total", max_tokens_total, "--max-tokens-total"
        )
        self.max_cost = _positive("max_cost", max_cost, "--max-cost")
        if window_s <= 0:
            raise ConfigError(f"limiter window must be positive, got {window_s}")
        if self.max_cost is not None and price is None:
            raise ConfigError(
                "--max-cost needs the model's price, and the price table has none for this model; "
                "add it to the price file (--prices / LETTERCHUNK_PRICES) or cap with "
                "--max-tokens-total instead"
            )
        self.window_s = float(window_s)
        self.skew_s = 0.0 if skew_s is None else float(skew_s)
        self.price = price
        self._clock = clock
        self._cond = threading.Condition()
        self._window: deque[_Charge] = deque()
        self._local = threading.local()
        self._unsettled: list[_Charge] = []  # in-flight, oldest first, for cross-thread settle
        self._spent_tokens = 0
        self._spent_cost = 0.0
        self._tripped: BudgetExceeded | None = None
        self._pause_until = 0.0
        self._penalties = 0
        self._scale = 1.0
        self._ratios: deque[float] = deque(maxlen=50)
        self.completion_allowance = (
            completion_allowance if completion_allowance and completion_allowance > 0 else None
        )
        self._prompt_ratios: deque[float] = deque(maxlen=50)
        self._n_requests = self._n_settled = self._est_total = self._waits = 0
        self._waited_s = 0.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> RateLimiter:
        """``OPENAI_TPM_LIMIT`` / ``OPENAI_RPM_LIMIT`` (read by
        :meth:`letterchunk.settings.Settings.from_env`), then ``overrides`` that are not None."""
        s = Settings.from_env(env)
        kw: dict[str, object] = {"tpm": s.tpm_limit, "rpm": s.rpm_limit}
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ public hook
    @property
    def active(self) -> bool:
        """True when there is anything to enforce."""
        return any(
            v is not None for v in (self.tpm, self.rpm, self.max_tokens_total, self.max_cost)
        )

    def acquire(self, estimated_tokens: int, *, max_tokens: int | None = None) -> None:
        """Block until a request of ``estimated_tokens`` fits the limits, then charge it.

        ``max_tokens``: the completion allowance this request's estimate includes, when it is
        not the run's ``completion_allowance`` (a one-token yes/no question asks for 1).

        Raises :class:`BudgetExceeded` (before anything is sent) when the request would pass
        ``max_tokens_total`` / ``max_cost``, and :class:`ConfigError` when it can never fit the
        TPM limit.
        """
        est = max(0, int(estimated_tokens))
        allowance = self.completion_allowance if max_tokens is None else max_tokens
        with self._cond:
            charge_tokens = self._rate_charge_locked(est, allowance)
            if self.tpm is not None and charge_tokens > self.tpm:
                raise ConfigError(
                    f"one request is estimated at {charge_tokens} tokens, more than the TPM limit "
                    f"{self.tpm}; raise --tpm / OPENAI_TPM_LIMIT or lower the request's max_tokens"
                )
            budget_tokens = max(est, charge_tokens)
            cost = self._worst_cost(budget_tokens)
            self._check_budget_locked(budget_tokens, cost)
            started, waited = self._clock(), False
            while True:
                now = self._clock()
                wait = self._wait_needed_locked(now, charge_tokens)
                if wait <= 0:
                    break
                waited = True
                self._cond.wait(timeout=wait)
                self._check_budget_locked(budget_tokens, cost)  # another worker may have tripped it
            if waited:
                self._waits += 1
                self._waited_s += self._clock() - started
            charge = _Charge(
                at=self._clock(),
                tokens=charge_tokens,
                cost=cost,
                est=est,
                budget=budget_tokens,
                allowance=allowance,
            )
            self._window.append(charge)
            self._unsettled.append(charge)
            self._pending().append((est, charge))
            self._n_requests += 1
            self._est_total += est

    def settle(
        self,
        estimated: int,
        actual_total_tokens: int | None,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        """Correct the charge made by the matching :meth:`acquire` to the reported usage.

        ``actual_total_tokens`` None or 0 means the request failed and the server charged
        nothing.  Pass ``prompt_tokens`` / ``completion_tokens`` when known so the cost cap uses
        the exact price split (otherwise the output price, the dearer one, is assumed).
        """
        est = max(0, int(estimated))
        actual = int(actual_total_tokens or 0)
        if actual == 0 and (prompt_tokens or completion_tokens):
            actual = int(prompt_tokens or 0) + int(completion_tokens or 0)
        with self._cond:
            charge = self._find_charge_locked(est)
            if charge is None:
                log.debug("settle(%s, %s) without a matching acquire; ignored", est, actual)
                return
            if (
                prompt_tokens is not None
                and completion_tokens is not None
                and self.price is not None
            ):
                cost = self.price.cost(int(prompt_tokens), int(completion_tokens))
            else:
                cost = self._worst_cost(actual)
            self._settle_charge_locked(charge, actual, cost)
            if actual and est:
                self._ratios.append(actual / est)
                worst = max(self._ratios)
                if worst > 1.0:
                    self._scale = min(worst * 1.05, 4.0)
                # the prompt side of the estimate: without the allowance of this very request
                allowance = charge.allowance
                if (
                    allowance is not None
                    and allowance == self.completion_allowance
                    and est > allowance
                ):
                    self._prompt_ratios.append(actual / (est - allowance))
            self._cond.notify_all()

    def penalize(self, retry_after_s: float) -> None:
        """The server answered 429 anyway (the client calls this when it sees one): hold every
        worker's new request for ``retry_after_s``."""
        with self._cond:
            self._pause_until = max(self._pause_until, self._clock() + max(0.0, retry_after_s))
            self._penalties += 1

    @property
    def paused_until(self) -> float:
        """The clock time before which no new request starts (a 429's penalty); 0 when none."""
        with self._cond:
            return self._pause_until

    @property
    def penalties(self) -> int:
        """How many 429s held the workers back."""
        with self._cond:
            return self._penalties

    # ------------------------------------------------------------------ observation
    @property
    def spent_tokens(self) -> int:
        with self._cond:
            return self._spent_tokens

    @property
    def tripped(self) -> BudgetExceeded | None:
        return self._tripped

    def stats(self) -> LimiterStats:
        with self._cond:
            return LimiterStats(
                requests=self._n_requests,
                settled=self._n_settled,
                estimated_tokens=self._est_total,
                actual_tokens=self._spent_tokens,
                waited_s=round(self._waited_s, 3),
                waits=self._waits,
                scale=round(self._scale, 4),
                prompt_ratio=(
                    round(max(self._prompt_ratios) * _RATIO_MARGIN, 4)
                    if len(self._prompt_ratios) >= _MIN_SAMPLES
                    else None
                ),
            )

    # ------------------------------------------------------------------ internals
    def _pending(self) -> list[tuple[int, _Charge]]:
        pending = getattr(self._local, "pending", None)
        if pending is None:
            pending = self._local.pending = []
        return pending

    def _rate_charge_locked(self, est: int, allowance: int | None) -> int:
        """What a request of estimate ``est`` (``allowance`` of it for the completion) holds in
        the rate window until it is settled."""
        if allowance is not None and allowance != self.completion_allowance:
            return math.ceil(est * self._scale)  # learned only for full answers
        if allowance is not None and est > allowance and len(self._prompt_ratios) >= _MIN_SAMPLES:
            ratio = max(self._prompt_ratios) * _RATIO_MARGIN
            return math.ceil((est - allowance) * ratio) + allowance
        return math.ceil(est * self._scale)

    def _worst_cost(self, tokens: int) -> float:
        if self.price is None:
            return 0.0
        return (
            self.price.cost(0, tokens)
            if self.price.output_per_mtok >= self.price.input_per_mtok
            else self.price.cost(tokens, 0)
        )

    def _settle_charge_locked(self, charge: _Charge, actual: int, cost: float) -> None:
        charge.tokens, charge.budget, charge.cost, charge.settled = actual, actual, cost, True
        charge.at = self._clock()  # the window counts it from the answer (see module docstring)
        self._spent_tokens += actual
        self._spent_cost += cost
        self._n_settled += 1
        with contextlib.suppress(ValueError):  # it may have left the in-flight list already
            self._unsettled.remove(charge)

    def _find_charge_locked(self, est: int) -> _Charge | None:
        pending = self._pending()
        for i in range(len(pending) - 1, -1, -1):
            if pending[i][0] == est and not pending[i][1].settled:
                return pending.pop(i)[1]
        # settled from another thread (async clients): oldest in-flight charge of that estimate
        for charge in self._unsettled:
            if charge.est == est:
                return charge
        return None

    def _check_budget_locked(self, tokens: int, cost: float) -> None:
        if self._tripped is not None:
            raise self._tripped
        inflight_tokens = sum(c.budget for c in self._unsettled)
        if self.max_tokens_total is not None:
            used = self._spent_tokens + inflight_tokens
            if used + tokens > self.max_tokens_total:
                self._tripped = BudgetExceeded(
                    "tokens",
                    used,
                    self.max_tokens_total,
                    f"the next request (~{tokens} tokens) would pass --max-tokens-total "
                    f"{self.max_tokens_total} ({used} used or in flight); finished letters are "
                    "written and valid, rerun the same command with a higher cap to resume",
                )
                raise self._tripped
        if self.max_cost is not None:
            used_cost = self._spent_cost + sum(c.cost for c in self._unsettled)
            # Costs are sums of floats: allow a nano-dollar of rounding so a cap set exactly at
            # what a run needs is not tripped by 0.1 + 0.2 > 0.3.
            if used_cost + cost > self.max_cost + _COST_EPSILON:
                self._tripped = BudgetExceeded(
                    "cost",
                    round(used_cost, 6),
                    self.max_cost,
                    f"the next request (up to ${cost:.4f}) would pass "
                    f"--max-cost ${self.max_cost:g} (${used_cost:.4f} spent or in flight); "
                    "finished letters are written and valid, "
                    "rerun the same command with a higher cap to resume",
                )
                raise self._tripped

    def _wait_needed_locked(self, now: float, tokens: int) -> float:
        """Seconds until the request fits (0 when it fits now)."""
        horizon = self.window_s + self.skew_s
        self._window = deque(c for c in self._window if not c.settled or now - c.at < horizon)
        pause = self._pause_until - now
        if self.tpm is None and self.rpm is None:
            return max(0.0, pause)
        used = sum(c.tokens for c in self._window)
        count = len(self._window)

        def fits(freed: int, removed: int) -> bool:
            ok_tpm = self.tpm is None or used - freed + tokens <= self.tpm
            ok_rpm = self.rpm is None or count - removed + 1 <= self.rpm
            return ok_tpm and ok_rpm

        if fits(0, 0):
            return max(0.0, pause)
        freed = 0
        # settled charges leave in the order they were settled; in-flight ones only when settled
        for removed, charge in enumerate(
            sorted((c for c in self._window if c.settled), key=lambda c: c.at), start=1
        ):
            freed += charge.tokens
            if fits(freed, removed):
                return max(charge.at + horizon - now, pause, 0.001)
        return max(horizon, pause)  # only in-flight settles can make room: settle() wakes us
