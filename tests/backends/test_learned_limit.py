"""What a process learns of a backend's limit is kept for the next: a limit lowered by 429s is stored in the database
when the App closes, and the next App on that database starts its backend there (backends/limiter.py,
storage/backend_limits.py). Counted against a scripted server over real HTTP that takes 16 requests at once and
answers 429 past that; no wall-clock asserts."""

from __future__ import annotations

import uuid

from judge_mcp.backends import base
from judge_mcp.backends.base import user
from judge_mcp.backends.limiter import AdaptiveLimit
from judge_mcp.config.settings import DEFAULT_CONCURRENCY
from judge_mcp.storage.backend_limits import BackendLimits
from tests.backends.test_adaptive_limit import Capacity
from tests.engines import on_both_engines
from tests.helpers import gather, make_app


def env(base_url: str, db, **extra: str) -> dict[str, str]:
    return {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": str(db), **extra}


async def burst_of_calls(app, n: int) -> list:
    backend = app.backend(None)

    async def one():
        return await backend.complete(user(f"judge {uuid.uuid4().hex}"))

    return await gather(n, one)


async def test_a_restarted_process_starts_at_the_limit_the_last_one_learned_and_is_not_refused_again(tmp_path, monkeypatch):
    monkeypatch.setattr(base, "SLOW_START_GRACE_S", 0.5)  # the refusals read before the grace, under load too
    with Capacity(16, 0.2) as scripted:  # long enough that the slow start's first round (24) is in flight at once
        first = make_app(env(scripted.server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="6"))
        results = await burst_of_calls(first, 100)
        learned = first.backend(None).limit.learned
        await first.aclose()
        refused_first = scripted.refused
        assert not [r for r in results if isinstance(r, Exception)]
        assert 1 <= refused_first <= 16  # the first burst overshoots once (the slow start's first round): nothing was known

        second = make_app(env(scripted.server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="6"))
        backend = second.backend(None)
        assert learned is not None and (backend.limit.limit, backend.limit.probe) == learned and learned[0] <= 17
        assert backend.limit.history[0][1] == "resume"
        scripted.server.max_in_flight = 0
        results = await burst_of_calls(second, 100)
        await second.aclose()
    assert not [r for r in results if isinstance(r, Exception)]
    assert scripted.refused - refused_first <= 2  # a probe above the resumed limit at most, not the burst
    assert scripted.server.max_in_flight <= learned[0] + 2


async def test_a_backend_that_never_refused_leaves_nothing_and_the_next_process_slow_starts_again(tmp_path, scripted):
    server = scripted(lambda payload: "ok")
    app = make_app(env(server.base_url, tmp_path / "judge.db"))
    await burst_of_calls(app, 20)
    await app.aclose()
    again = make_app(env(server.base_url, tmp_path / "judge.db"))
    assert again.backend(None).limit.slow_start  # nothing learned: a slow start towards the ceiling, again
    assert again.backend(None).limit.ceiling == DEFAULT_CONCURRENCY["openai"]
    assert BackendLimits(again.store).all() == {}
    await again.aclose()


async def test_only_too_many_requests_is_learned_not_a_passing_overload_or_a_timeout():
    limit = AdaptiveLimit(64)
    limit.overloaded(status=503)
    limit.overloaded(event="timeout")
    limit.overloaded(status=529)
    assert limit.limit < 64 and limit.learned is None
    limit.overloaded(status=429)
    assert limit.learned == (limit.limit, limit.probe)
    resumed = AdaptiveLimit(8)
    resumed.resume(12, 4)  # learned under a higher ceiling: the configured one wins
    assert resumed.limit == 8 and resumed.learned == (8, 4)


@on_both_engines
async def test_the_table_keeps_one_limit_per_backend(store):
    limits = BackendLimits(store)
    limits.put({"openai|http://a/v1|m": (16, 2), "anthropic|https://b|c": (40, 1)})
    limits.put({"openai|http://a/v1|m": (18, 8)})
    assert limits.all() == {"openai|http://a/v1|m": (18, 8), "anthropic|https://b|c": (40, 1)}


