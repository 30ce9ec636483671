"""Issue 14, items 1, 4 and 9: a caller cancelled while it shares an in-flight call with others never breaks
their call; a lone surrogate in a model's text is stored and returned, not an internal error; another
application's SQLite file is refused untouched."""

from __future__ import annotations

import json
import sqlite3

import anyio
import pytest

from judge_mcp.backends.base import user
from judge_mcp.methods.call_cache import CallCache
from judge_mcp.methods import pairwise
from judge_mcp.methods.judge import Judge
from judge_mcp.store import APPLICATION_ID, Store, StoreError
from tests.helpers import Hold, http_backend, until
from tests.judge_script import UniversalJudge
from tests.scripted import Reply, chat_body
from judge_mcp.methods.call_cache import CacheTable


def backend_for(server):
    return http_backend(server, max_retries=0)


async def test_a_cancelled_caller_leaves_the_shared_call_to_the_others(scripted, store):
    hold = Hold(lambda p: "the shared answer")
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(store)
    request = user("judge this")
    flights = lambda: list(cache._inflight.values())  # noqa: E731
    first, second = Judge(backend, cache, store), Judge(backend, cache, store)
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
        await until(lambda: [f.waiters for f in flights()] == [2])  # the second caller shares it
        first_scope.cancel()  # the first caller gives up while the call is in flight
        await until(lambda: [f.waiters for f in flights()] == [1])
        hold.release()
    assert first_scope.cancelled_caught and "first" not in got
    assert got["second"].text == "the shared answer"
    assert len(server.requests) == 1  # the second caller was not given a fresh call: it kept the shared one
    assert (second.calls, second.cached_calls, first.calls) == (1, 0, 0)  # the survivor accounts for the one call
    key = request.cache_key(backend.identity())
    assert CacheTable(store).get_many([key])[key]["text"] == "the shared answer"
    await backend.aclose()


async def test_a_call_nobody_waits_for_is_cancelled_and_a_new_caller_starts_afresh(scripted, store):
    hold = Hold(lambda p: "late answer")  # only the first request is held; the new caller's is answered at once
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(store)
    request = user("judge this")
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def caller() -> None:
            with scope:
                await cache.complete(backend, request)

        tg.start_soon(caller)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)
        scope.cancel()
    assert scope.cancelled_caught
    assert cache._inflight == {}  # forgotten at once: a newcomer does not join the dying call
    completion, cached = await cache.complete(backend, request)
    hold.release()
    assert (completion.text, cached) == ("late answer", False)
    assert len(server.requests) == 2
    await backend.aclose()


async def test_cancelling_one_compare_pair_never_breaks_an_identical_one(scripted, store):
    """The reported failure: "'NoneType' object has no attribute 'parse_ok'" in the surviving call."""
    hold = Hold(UniversalJudge(), count=2)  # both orders of the first call stay in flight until released
    server = scripted(hold)
    backend, cache = backend_for(server), CallCache(store)
    args = dict(prompt="What is the capital of Australia?", response_a="Sydney.", response_b="Canberra.")
    flights = lambda: list(cache._inflight.values())  # noqa: E731
    results = {}

    async with anyio.create_task_group() as tg:
        doomed = anyio.CancelScope()

        async def cancelled() -> None:
            with doomed:
                await pairwise.compare_pair(Judge(backend, cache, store), **args)

        async def survivor() -> None:
            results["b"] = await pairwise.compare_pair(Judge(backend, cache, store), **args)

        tg.start_soon(cancelled)
        assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # both orders are at the backend
        tg.start_soon(survivor)
        await until(lambda: sorted(f.waiters for f in flights()) == [2, 2])  # the survivor shares both calls
        doomed.cancel()
        await until(lambda: sorted(f.waiters for f in flights()) == [1, 1])
        hold.release()
    assert doomed.cancelled_caught
    result = results["b"]
    assert all(t.parse_ok for t in result.trials) and result.winner == "B" and result.consistent
    assert len(server.requests) == 2  # the two orders, each sent once and shared
    await backend.aclose()


async def test_a_lone_surrogate_in_the_answer_is_replaced_and_stored(scripted, store):
    body = json.dumps(chat_body("[[A>B]] fine")).replace("fine", "fine \\ud800 end").encode()
    server = scripted(lambda p: Reply(raw_body=body))
    backend = backend_for(server)
    completion, cached = await CallCache(store).complete(backend, user("x"))
    assert completion.text == "[[A>B]] fine \ufffd end" and not cached
    again, cached = await CallCache(store).complete(backend, user("x"))
    assert cached and again.text == completion.text
    await backend.aclose()


def test_another_applications_database_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another application.*invoices"):
        Store(path)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["invoices"]
    conn.close()


def test_new_and_older_judge_mcp_databases_are_marked(tmp_path):
    new = Store(tmp_path / "new.db")
    assert new.query("PRAGMA application_id")[0]["application_id"] == APPLICATION_ID
    new.conn.execute("PRAGMA application_id = 0")  # as a database made before the mark existed
    new.close()
    reopened = Store(tmp_path / "new.db")
    assert reopened.query("PRAGMA application_id")[0]["application_id"] == APPLICATION_ID
    reopened.close()
