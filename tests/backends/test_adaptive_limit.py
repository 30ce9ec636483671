"""The adaptive concurrency limit (backends/limiter.py): a remote backend starts low and grows as calls are accepted
(slow start), so a burst goes out at once against a backend that takes it without waiting for its answers, draws
few 429s from one that takes 16, settles near what a backend takes when it answers 429 past that, grows
back while calls succeed, and never passes a configured ceiling. Counted against scripted servers over real HTTP
(requests in flight, 429s answered, the limit's trajectory); no wall-clock asserts."""

from __future__ import annotations

import anyio
import pytest

from judge_mcp.backends import base
from judge_mcp.backends.base import user
from judge_mcp.backends.limiter import SLOW_START, SLOW_START_GROWTH, AdaptiveLimit
from testkit.scripted_servers import Reply, ScriptedServer
from judge_mcp.config.settings import DEFAULT_CONCURRENCY
from tests.helpers import Rendezvous, gather, http_backend


class Capacity:
    """A scripted server that takes `capacity` requests at once (each answered after `delay_s`) and answers 429 to
    every request past that, with `retry_after` as its Retry-After header when given. Counts the 429s."""

    def __init__(self, capacity: int, delay_s: float, retry_after: str | None = None):
        self.capacity, self.delay_s, self.retry_after = capacity, delay_s, retry_after
        self.refused = 0
        self.server = ScriptedServer(self.respond)

    def respond(self, payload: dict) -> Reply:
        if self.server.in_flight > self.capacity:
            self.refused += 1
            return Reply(status=429, headers={"retry-after": self.retry_after} if self.retry_after else {})
        return Reply(content="ok", delay_s=self.delay_s)

    def __enter__(self) -> "Capacity":
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


async def burst(backend, n: int) -> list:
    return await gather(n, lambda: backend.complete(user("judge this")))


def failures(results: list) -> list:
    return [r for r in results if isinstance(r, Exception)]


async def test_a_burst_goes_out_at_once_at_the_remote_default():
    """200 requests (a burst of 100 compare_pair calls) all in flight together against a backend that takes them:
    the server holds each request until all 200 are inside at once (a barrier, so a slow machine cannot pass or fail
    it by timing)."""
    meet = Rendezvous(200, lambda payload: "ok", timeout_s=60.0)
    server = ScriptedServer(meet).start()
    backend = http_backend(server, concurrency=DEFAULT_CONCURRENCY["openai"], max_retries=0)
    try:
        results = await burst(backend, 200)
    finally:
        await backend.aclose()
        server.stop()
    assert failures(results) == []
    assert meet.met == 200 and meet.broken == 0 and server.max_in_flight == 200
    assert backend.limit.limit == DEFAULT_CONCURRENCY["openai"]


async def test_a_backend_that_takes_16_settles_the_limit_near_16_and_no_call_fails(monkeypatch):
    # the scripted server is a thread of this process: under load its refusals can take longer than the grace to be
    # written and read, which is the grace's timing (perf/burst.py measures it), not the slow start's counting
    monkeypatch.setattr(base, "SLOW_START_GRACE_S", 0.5)
    with Capacity(16, 0.2) as scripted:
        backend = http_backend(scripted.server, concurrency=DEFAULT_CONCURRENCY["openai"], backoff_base_s=0.1)
        try:
            first = await burst(backend, 200)
            refused_first = scripted.refused
            second = await burst(backend, 200)
        finally:
            await backend.aclose()
    assert failures(first) == [] and failures(second) == []  # every refused request was retried under the lower limit
    trajectory = [limit for _, event, limit in backend.limit.history if event == "overload"]
    assert trajectory[0] < SLOW_START  # the first refusal came with the slow start's first round in flight
    assert min(trajectory) >= 8 and 8 <= backend.limit.limit <= 17  # settled near 16, never below half of it
    # the first burst overshoots once (the slow start's first round past 16, a few more as the retries race the
    # settling; starting at the ceiling it was 187); the second goes out under the settled limit: at most a probe or
    # two above it is refused
    assert refused_first <= 16
    assert scripted.refused - refused_first <= 4


async def test_today_fixed_16_against_the_same_backend_for_comparison():
    """The configured ceiling is kept: at concurrency 16 no more than 16 are ever in flight, as before."""
    with Capacity(16, 0.1) as scripted:
        backend = http_backend(scripted.server, concurrency=16, backoff_base_s=0.1)
        try:
            results = await burst(backend, 100)
        finally:
            await backend.aclose()
    assert failures(results) == []
    assert scripted.server.max_in_flight <= 16
    assert all(limit <= 16 for _, _, limit in backend.limit.history)


async def test_retry_after_holds_growth_and_the_refused_calls_wait_for_it():
    with Capacity(4, 0.05, retry_after="1") as scripted:
        backend = http_backend(scripted.server, concurrency=8, backoff_base_s=0.05)
        try:
            results = await burst(backend, 12)
        finally:
            await backend.aclose()
    assert failures(results) == []
    assert scripted.refused >= 1
    history = list(backend.limit.history)
    first_overload = next(t for t, event, _ in history if event == "overload")
    assert all(t >= first_overload + 1.0 for t, event, _ in history if event == "grow")  # no growth inside Retry-After


# ---- the limit's rules, step by step (no server) --------------------------------------------------------------------
async def hold(limit: AdaptiveLimit, n: int, tg, release: anyio.Event) -> None:
    async def one() -> None:
        async with limit.limiter:
            await release.wait()

    for _ in range(n):
        tg.start_soon(one)
    await anyio.wait_all_tasks_blocked()


async def test_an_overload_lowers_to_the_others_in_flight_but_at_most_by_half():
    limit = AdaptiveLimit(100, slow_start=False)
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        await hold(limit, 80, tg, release)
        limit.overloaded()  # 79 others in flight
        assert limit.limit == 79
        release.set()
    limit.overloaded()  # nothing in flight: halved, not dropped to 1
    assert limit.limit == 40
    limit.overloaded()
    assert limit.limit == 20
    assert [event for _, event, _ in limit.history] == ["overload"] * 3


async def test_the_limit_grows_by_one_per_window_of_saturated_successes_and_probes_less_after_a_failed_probe():
    limit = AdaptiveLimit(10, slow_start=False)
    limit.limiter.total_tokens = 4  # as if lowered to 4 earlier
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        await hold(limit, 4, tg, release)
        for _ in range(3):
            limit.success()
        assert limit.limit == 4
        limit.success()  # the 4th saturated success: one more slot
        assert limit.limit == 5 and limit.history[-1][1:] == ("grow", 5)
        release.set()
    for _ in range(20):  # not saturated: no growth
        limit.success()
    assert limit.limit == 5
    limit.overloaded()  # the probe at 5 failed (nothing else in flight: halved to 3)
    assert limit.limit == 3 and limit.probe == 2
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        await hold(limit, 3, tg, release)
        for _ in range(5):
            limit.success()
        assert limit.limit == 3  # now 3 x 2 successes per slot
        limit.success()
        assert limit.limit == 4
        release.set()


async def test_the_ceiling_is_never_passed():
    limit = AdaptiveLimit(2)
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        await hold(limit, 2, tg, release)
        for _ in range(100):
            limit.success()
        release.set()
    assert limit.limit == 2 and not limit.history


def test_a_ceiling_below_one_is_refused():
    with pytest.raises(ValueError, match="ceiling"):
        AdaptiveLimit(0)


async def test_slow_start_begins_low_grows_per_accepted_call_and_ends_at_the_first_overload_or_the_ceiling():
    limit = AdaptiveLimit(256)
    assert limit.slow_start and limit.limit == SLOW_START
    limit.accepted()
    assert limit.limit == SLOW_START + SLOW_START_GROWTH and limit.history[-1][1:] == ("slow start", limit.limit)
    limit.overloaded(status=429)  # nothing in flight: halved, and slow start is over
    assert not limit.slow_start and limit.limit == (SLOW_START + SLOW_START_GROWTH + 1) // 2
    limit.accepted()
    assert limit.limit == (SLOW_START + SLOW_START_GROWTH + 1) // 2  # accepted calls no longer grow it
    grown = AdaptiveLimit(40)
    for _ in range(10):
        grown.accepted()
    assert grown.limit == 40 and not grown.slow_start  # the ceiling ends it
    resumed = AdaptiveLimit(256)
    resumed.resume(30)
    assert not resumed.slow_start and resumed.limit == 30
    assert not AdaptiveLimit(SLOW_START).slow_start and AdaptiveLimit(SLOW_START).limit == SLOW_START  # a low ceiling: at once
