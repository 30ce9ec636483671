"""Issue 14, items 1, 4 and 9: a caller cancelled while it shares an in-flight call with others never breaks
their call; a lone surrogate in a model's text is stored and returned, not an internal error; another
application's SQLite file is refused untouched."""

from __future__ import annotations

import json
import sqlite3

import anyio
import pytest

from judge_mcp.backends.base import user
from judge_mcp.calls.cache import CallCache
from judge_mcp.methods import pairwise
from judge_mcp.calls.judge import Judge
from judge_mcp.storage.sqlite import APPLICATION_ID, Store, StoreError
from tests.helpers import Hold, http_backend, until
from judge_mcp.bench.scripted_judges import UniversalJudge
from judge_mcp.bench.scripted import Reply, chat_body
from judge_mcp.calls.cache import CacheTable


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


async def test_a_read_that_began_before_a_write_committed_does_not_send_the_request_again(scripted, tmp_path, monkeypatch):
    """The race a bench test hit under load: caller B's cache read takes its snapshot while caller A's identical
    request is at the backend; A's answer is then written with A's verdict (App's write path), and only then does
    B's read come back, empty. B must find the answer among the recently written ones, not call the backend again."""
    import threading
    from functools import partial

    from judge_mcp.storage.verdict_log import VerdictLog
    from tests.helpers import app_env, make_app

    hold = Hold(lambda p: "the answer")
    server = scripted(hold)
    app = make_app(app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0"))
    backend, request = app.backend(None), user("judge this")
    snapshot_taken, let_it_return = threading.Event(), threading.Event()
    real_get_many = CacheTable.get_many

    def stale_get_many(self, keys):
        found = real_get_many(self, keys)  # read before A's write commits
        if not snapshot_taken.is_set():
            snapshot_taken.set()
            let_it_return.wait(10)
        return found

    rows: list = []
    first, second = Judge(backend, app.cache, app.store, cache_rows=rows), Judge(backend, app.cache, app.store)
    got = {}

    async def caller(name: str, judge: Judge) -> None:
        got[name] = await judge.complete(request)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller, "first", first)
            assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # A's request is at the backend
            monkeypatch.setattr(CacheTable, "get_many", stale_get_many)
            tg.start_soon(caller, "second", second)
            assert await anyio.to_thread.run_sync(snapshot_taken.wait, 10)  # B's read has its (empty) snapshot
            hold.release()
            await until(lambda: "first" in got)
            write = partial(VerdictLog(app.store).log, "compare_pair", "b", "m", {}, {}, {}, [], rows)
            await app.store.writes.run(app._write, write, rows)  # as App._logged writes a verdict
            assert app.cache._unwritten == {}
            let_it_return.set()
    finally:
        await app.aclose()
    assert got["second"].text == "the answer" and (second.calls, second.cached_calls) == (0, 1)
    assert len(server.requests) == 1


def test_recently_written_answers_are_bounded_and_dropped_rows_are_not_kept(monkeypatch):
    from judge_mcp.calls import cache as call_cache
    from judge_mcp.calls.cache import CacheRow

    monkeypatch.setattr(call_cache, "RECENTLY_WRITTEN", 2)
    cache = CallCache(None)
    rows = [CacheRow(f"k{i}", "b", "m", {}, {"text": f"answer {i}"}) for i in range(4)]
    for row in rows:
        cache._unwritten[row.key] = row.response
    cache.written(rows[:3], stored=True)
    cache.written(rows[3:])  # dropped with a failed write: never answered from memory
    assert cache._recent == {"k1": {"text": "answer 1"}, "k2": {"text": "answer 2"}} and cache._unwritten == {}
