"""A 429 seen by one worker holds every worker's next request (``RateLimiter.penalize``).

The server's rate limit is shared by the whole pool: when one worker is told to wait, the
others would only collect 429s of their own.  The assertions are lower bounds on one clock
(``time.monotonic``, which the limiter and the fake server both use), so a slow machine cannot
make them fail: the limiter may release a request late, never early.
"""

from __future__ import annotations

import threading
import time

from fake_openai import answer, rate_limited
from letterchunk.llm.connect import open_client
from letterchunk.llm.limiter import RateLimiter
from test_llm import GOOD, MESSAGES, Item

RETRY_AFTER_S = 0.6


def test_a_429_seen_by_one_worker_delays_the_next_request_of_another(fake_server):
    server = fake_server(lambda request: answer(GOOD))
    server.enqueue(rate_limited(retry_after=RETRY_AFTER_S))  # only the first request gets it
    limiter = RateLimiter(rpm=10_000)  # active, and far from binding: only the 429 holds
    errors: list[BaseException] = []

    with open_client(cache="off", limiter=lambda settings: limiter) as client:

        def first_worker() -> None:
            try:
                client.complete(MESSAGES, Item, chunk_id="1977-t1-001")
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        worker = threading.Thread(target=first_worker)
        worker.start()
        deadline = time.monotonic() + 30
        while limiter.penalties == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert limiter.penalties == 1, "the first worker's 429 did not reach the limiter"
        held_until = limiter.paused_until

        second = client.complete(MESSAGES, Item, chunk_id="1977-t1-002")
        worker.join(timeout=30)

    assert errors == [] and second.value == Item(**GOOD)
    requests = server.chat_requests
    assert len(requests) == 3  # the 429, the first worker's retry, the second worker's request
    # the penalty is the server's Retry-After, counted from after the 429 arrived
    assert held_until >= requests[0].at + RETRY_AFTER_S
    # neither worker's next request reached the server before the penalty ran out
    assert all(r.at >= held_until for r in requests[1:])
    assert limiter.penalties == 1
