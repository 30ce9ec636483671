"""The call cache over real HTTP: identical temperature-0 requests in flight share one backend call, repeats are
answered from SQLite (also after reopening the store), samples (temperature > 0) are never cached, failures reach
every waiter and are not cached, and no API key ever lands in the database file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from judge_mcp.backends.base import Backend, Completion, user
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.cache import CallCache
from judge_mcp.calls.judge import Judge
from judge_mcp.storage.sqlite import Store
from tests.helpers import Hold, Rendezvous, until
from tests.scripted import Reply
from judge_mcp.storage.verdict_log import VerdictLog

KEY = "sk-cache-test-0d15ea5e-never-stored"


@pytest.fixture
def http(make_backend) -> Callable[..., tuple[Backend, Any]]:
    """http(responder, kind="openai", **backend_kwargs) -> (backend, server), with KEY configured."""

    def make(responder: Any, kind: str = "openai", model: str = "cache-model", **kwargs: Any) -> tuple[Backend, Any]:
        defaults = {"max_retries": 1, "backoff_base_s": 0.01, "api_key": KEY}
        return make_backend(responder, kind, name=f"cache-{kind}", model=model, **{**defaults, **kwargs})

    return make


async def gather(n: int, fn: Callable[[], Any]) -> list[Any]:
    """Run fn() n times concurrently; each result or raised exception, in completion order."""
    out: list[Any] = []

    async def one() -> None:
        try:
            out.append(await fn())
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            out.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return out


async def gather_while_held(n: int, fn: Callable[[], Any], hold: Hold, cache: CallCache) -> list[Any]:
    """gather(n, fn) against a backend that holds the call until all n callers wait on that one call in flight (so
    none of them can have been answered from SQLite instead)."""
    out: list[Any] = []

    async def run() -> None:
        out.extend(await gather(n, fn))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)
        await until(lambda: [f.waiters for f in cache._inflight.values()] == [n])
        hold.release()
    return out


def cache_rows(store: Store) -> int:
    return store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"]


async def test_identical_requests_in_flight_share_one_call(http, store):
    hold = Hold(lambda p: Reply(content="shared answer", prompt_tokens=12, completion_tokens=4))
    backend, server = http(hold)
    cache = CallCache(store)
    judge = Judge(backend, cache, store)
    request = user("judge this", system="be fair")

    results: list[Completion] = await gather_while_held(5, lambda: judge.complete(request), hold, cache)

    assert len(server.requests) == 1
    assert [r.text for r in results] == ["shared answer"] * 5
    assert (judge.calls, judge.cached_calls) == (1, 4)
    assert (judge.prompt_tokens, judge.completion_tokens) == (12, 4)  # tokens counted once, for the one real call
    assert sorted(rec["cached"] for rec in judge.records) == [False, True, True, True, True]


async def test_different_requests_are_not_shared(http, store):
    backend, server = http(lambda p: Reply(content=p["messages"][-1]["content"].upper(), delay_s=0.2))
    cache = CallCache(store)
    a, b = await gather(1, lambda: cache.complete(backend, user("one"))), await gather(1, lambda: cache.complete(backend, user("two")))
    c = await gather(1, lambda: cache.complete(backend, user("one", max_tokens=5)))
    assert [x[0][0].text for x in (a, b, c)] == ["ONE", "TWO", "ONE"]
    assert len(server.requests) == 3 and cache_rows(store) == 3


async def test_repeat_is_answered_from_sqlite_also_after_reopening(http, tmp_path):
    backend, server = http(lambda p: Reply(content="stored answer", finish_reason="length", prompt_tokens=30, completion_tokens=7))
    db = tmp_path / "cache.db"
    store = Store(db)
    request = user("same question", json_schema={"type": "object"})
    try:
        first, cached = await CallCache(store).complete(backend, request)
        assert not cached and first.attempts == 1
        second, cached = await CallCache(store).complete(backend, request)  # a fresh cache object: only SQLite knows
        assert cached and len(server.requests) == 1
        assert (second.text, second.finish_reason, second.structured) == ("stored answer", "length", True)
        assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (30, 7)
        assert second.raw["cached"] is True and second.attempts == 0
        stored = store.query("SELECT * FROM call_cache")
    finally:
        store.close()

    reopened = Store(db)
    try:
        third, cached = await CallCache(reopened).complete(backend, request)
        assert cached and third.text == "stored answer" and len(server.requests) == 1
        assert reopened.query("SELECT * FROM call_cache") == stored  # a hit is a pure read: nothing written
    finally:
        reopened.close()


async def test_cache_is_per_backend_identity(http, store):
    backend_a, server_a = http(lambda p: "from a", model="model-a")
    backend_b, server_b = http(lambda p: "from b", model="model-b")
    cache = CallCache(store)
    request = user("q")
    (ra, _), (rb, _) = await cache.complete(backend_a, request), await cache.complete(backend_b, request)
    assert (ra.text, rb.text) == ("from a", "from b")
    assert len(server_a.requests) == 1 and len(server_b.requests) == 1


async def test_samples_are_never_cached(http, store):
    counter = iter(range(100))
    together = Rendezvous(3, lambda p: f"sample {next(counter)}", rounds=1)  # the three concurrent samples all go out
    backend, server = http(together)
    judge = Judge(backend, CallCache(store), store)
    request = user("q", temperature=0.8)

    concurrent = await gather(3, lambda: judge.complete(request))
    again = await judge.complete(request)

    assert (together.met, together.broken) == (3, 0) and len(server.requests) == 4
    assert len({c.text for c in concurrent} | {again.text}) == 4  # every sample is its own answer
    assert (judge.calls, judge.cached_calls) == (4, 0)
    assert cache_rows(store) == 0


@pytest.mark.parametrize("status, sent", [(400, 1), (503, 2)])  # fatal: one request; retryable: its retries, once
async def test_a_failure_reaches_every_waiter_and_is_not_cached(http, store, status, sent):
    state = {"fail": True}

    def respond(payload: dict[str, Any]) -> Reply | str:
        return Reply(status=status) if state["fail"] else "recovered"

    hold = Hold(respond)
    backend, server = http(hold)
    cache = CallCache(store)
    request = user("q")

    outcomes = await gather_while_held(4, lambda: cache.complete(backend, request), hold, cache)

    assert len(server.requests) == sent
    assert len(outcomes) == 4 and all(isinstance(o, BackendError) for o in outcomes)
    assert all(f"HTTP {status}" in str(o) and "cache-openai" in str(o) for o in outcomes)
    assert cache_rows(store) == 0

    state["fail"] = False
    completion, cached = await cache.complete(backend, request)
    assert completion.text == "recovered" and not cached
    assert len(server.requests) == sent + 1


def db_bytes(path: Path) -> bytes:
    """The database file and its -wal / -shm companions, as they are on disk."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_api_key_never_reaches_the_database_file(http, tmp_path, kind):
    def respond(payload: dict[str, Any]) -> Reply | str:
        text = json.dumps(payload)
        if "retry me" in text and len(respond.seen) == 0:
            respond.seen.append(1)  # first time: a 429 whose body echoes the key, as some proxies do
            return Reply(status=429, raw_body=json.dumps({"error": {"message": f"slow down, {KEY}"}}).encode())
        return Reply(content=f"verdict-text-{kind}")

    respond.seen = []  # type: ignore[attr-defined]
    backend, server = http(respond, kind=kind)
    db = tmp_path / "keys.db"
    store = Store(db)
    try:
        judge = Judge(backend, CallCache(store), store)
        await judge.complete(user("retry me", system="sys", json_schema={"type": "object", "properties": {}}))
        await judge.complete(user("retry me", system="sys", json_schema={"type": "object", "properties": {}}))  # cached
        await judge.complete(user("sample", temperature=0.5))
        VerdictLog(store).log("compare_pair", backend.name, backend.model_id, {"prompt": "p"}, {"winner": "A"},
                          judge.usage().model_dump(), judge.records)

        sent = server.headers[0].get("authorization", "") + server.headers[0].get("x-api-key", "")
        assert KEY in sent  # the key was configured and used on the wire
        assert any("retried_errors" in r for r in judge.records)  # the echoed error was recorded (redacted)
        on_disk = db_bytes(db)
        assert f"verdict-text-{kind}".encode() in on_disk  # the calls did reach the file...
        assert KEY.encode() not in on_disk  # ...the key did not
    finally:
        store.close()
    assert KEY.encode() not in db_bytes(db)
