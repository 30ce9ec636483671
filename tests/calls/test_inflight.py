"""Identical temperature-0 requests in flight share one backend call (calls/cache.py): the callers of one call all get
its answer (tokens counted once) or all get its failure, which is not cached; different requests are not shared; a
caller cancelled while it shares a call never breaks the others' call, and a call nobody waits for any more is
cancelled, so a new caller starts afresh (also when the event loop that started it ended)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from judge_mcp.backends.base import Completion, user
from judge_mcp.backends.errors import BackendError
from testkit.scripted_servers import Reply
from testkit.scripted_judges import UniversalJudge
from judge_mcp.calls.cache import CallCache, scoped_key
from judge_mcp.storage.call_cache import CacheTable
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import pairwise
from judge_mcp.storage.sqlite import SqliteEngine
from tests.helpers import Hold, gather, http_backend, settled, survivor_of_twin
from tests.engines import on_both_engines


def cache_rows(store: SqliteEngine) -> int:
    return store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"]


def backend_for(server):
    return http_backend(server, max_retries=0)


async def test_a_cancelled_caller_leaves_the_shared_call_to_the_others(scripted, store):
    hold = Hold(lambda p: "the shared answer")
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(store)
    request = user("judge this")
    first, second = CallContext(backend, cache, store), CallContext(backend, cache, store)
    got = {}

    async with anyio.create_task_group() as tg:
        first_scope = anyio.CancelScope()

        async def first_caller() -> None:
            with first_scope:
                got["first"] = await first.complete(request)

        async def second_caller() -> None:
            got["second"] = await second.complete(request)

        tg.start_soon(first_caller)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # the first caller's call is at the backend
        tg.start_soon(second_caller)
        await settled(store)  # the second caller waits too: on the first one's call (it sent nothing, see below)
        first_scope.cancel()  # the first caller gives up while the call is in flight
        await settled(store)
        hold.release()
    assert first_scope.cancelled_caught and "first" not in got
    assert got["second"].text == "the shared answer"
    assert len(server.requests) == 1  # the second caller was not given a fresh call: it kept the shared one
    assert (second.calls, second.cached_calls, first.calls) == (1, 0, 0)  # the survivor accounts for the one call
    key = scoped_key(request.cache_key(backend.identity()), "tenant:local")  # the key as this tenant's calls store it
    assert CacheTable(store).get_many([key])[key]["text"] == "the shared answer"
    await backend.aclose()


async def test_a_call_nobody_waits_for_is_cancelled_and_a_new_caller_starts_afresh(scripted):
    hold = Hold(lambda p: "late answer")  # only the first request is held; the new caller's is answered at once
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(None)  # no table: a lookup goes straight to the calls in flight
    request = user("judge this")
    got = {}
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def caller() -> None:
            with scope:
                await cache.complete(backend, request)

        async def newcomer() -> None:
            got["new"] = await cache.complete(backend, request)

        tg.start_soon(caller)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)
        scope.cancel()  # the call's only waiter leaves...
        tg.start_soon(newcomer)  # ...and a new caller arrives at once, before the abandoned call has wound down
    hold.release()
    assert scope.cancelled_caught
    completion, cached = got["new"]  # its own call, answered while the abandoned one was still held at the backend
    assert (completion.text, cached) == ("late answer", False) and len(server.requests) == 2
    await backend.aclose()
async def test_cancelling_one_compare_pair_never_breaks_an_identical_one(scripted, store):
    """The reported failure: "'NoneType' object has no attribute 'parse_ok'" in the surviving call."""
    hold = Hold(UniversalJudge(), count=2)  # both orders of the first call stay in flight until released
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(store)
    args = dict(prompt="What is the capital of Australia?", response_a="Sydney.", response_b="Canberra.")
    result = await survivor_of_twin(lambda: pairwise.compare_pair(CallContext(backend, cache, store), **args), hold, store)
    assert all(t.parse_ok for t in result.trials) and result.winner == "B" and result.consistent
    assert len(server.requests) == 2  # the two orders, each sent once and shared
    await backend.aclose()


async def gather_while_held(n: int, fn: Callable[[], Any], hold: Hold, store: SqliteEngine) -> list[Any]:
    """gather(n, fn) against a backend that holds the call until all n callers wait (so none of them can have been
    answered from SQLite instead)."""
    out: list[Any] = []

    async def run() -> None:
        out.extend(await gather(n, fn))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)
        await settled(store)
        hold.release()
    return out


@on_both_engines
async def test_identical_requests_in_flight_share_one_call(http, store):
    hold = Hold(lambda p: Reply(content="shared answer", prompt_tokens=12, completion_tokens=4))
    backend, server = http(hold)
    cache = CallCache(store)
    judge = CallContext(backend, cache, store)
    request = user("judge this", system="be fair")

    results: list[Completion] = await gather_while_held(5, lambda: judge.complete(request), hold, store)

    assert len(server.requests) == 1
    assert [r.text for r in results] == ["shared answer"] * 5
    assert (judge.calls, judge.cached_calls) == (1, 4)
    assert (judge.prompt_tokens, judge.completion_tokens) == (12, 4)  # tokens counted once, for the one real call
    assert sorted(rec["cached"] for rec in judge.records) == [False, True, True, True, True]


@on_both_engines
async def test_different_requests_are_not_shared(http, store):
    backend, server = http(lambda p: Reply(content=p["messages"][-1]["content"].upper(), delay_s=0.2))
    cache = CallCache(store)
    a, b = await gather(1, lambda: cache.complete(backend, user("one"))), await gather(1, lambda: cache.complete(backend, user("two")))
    c = await gather(1, lambda: cache.complete(backend, user("one", max_tokens=5)))
    assert [x[0][0].text for x in (a, b, c)] == ["ONE", "TWO", "ONE"]
    assert len(server.requests) == 3 and cache_rows(store) == 3


@pytest.mark.parametrize("status, sent", [(400, 1), (503, 2)])  # fatal: one request; retryable: its retries, once
@on_both_engines
async def test_a_failure_reaches_every_waiter_and_is_not_cached(http, store, status, sent):
    state = {"fail": True}

    def respond(payload: dict[str, Any]) -> Reply | str:
        return Reply(status=status) if state["fail"] else "recovered"

    hold = Hold(respond)
    backend, server = http(hold)
    cache = CallCache(store)
    request = user("q")

    outcomes = await gather_while_held(4, lambda: cache.complete(backend, request), hold, store)

    assert len(server.requests) == sent
    assert len(outcomes) == 4 and all(isinstance(o, BackendError) for o in outcomes)
    assert all(f"HTTP {status}" in str(o) and "cache-openai" in str(o) for o in outcomes)
    assert cache_rows(store) == 0

    state["fail"] = False
    completion, cached = await cache.complete(backend, request)
    assert completion.text == "recovered" and not cached
    assert len(server.requests) == sent + 1


def test_a_flight_cut_off_by_the_end_of_its_event_loop_is_forgotten_and_the_next_loop_calls_afresh(make_judge, store) -> None:
    from judge_mcp.backends.base import user
    from judge_mcp.calls.cache import CallCache

    judge, server = make_judge(lambda p: "an answer")
    cache = CallCache(None)  # no table: straight to the flight
    request = user("asked in two event loops")

    async def cut_off() -> None:
        asyncio.get_running_loop().create_task(cache.lookup(judge.backend, request))
        await asyncio.sleep(0)  # the flight's task exists; the loop ends before it ever runs

    asyncio.run(cut_off())  # its last waiter, cancelled as the loop ended, let go of it: the next loop calls afresh
    completion, cached = asyncio.run(asyncio.wait_for(cache.complete(judge.backend, request), 10))
    assert completion.text == "an answer" and not cached and len(server.requests) == 1
