"""Issue 15, item 4: the store's lanes (one persistent thread each for reads and for writes, store.Lane), which carry
the two trips of every tool call. A job runs off the event loop, in the same thread each time; a caller cancelled
while its write waits or runs stops waiting, and the write still commits whole (its cache rows answered from
memory until then); a read never queues behind a write; a loop that ends before its job or its shared call is
answered breaks nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import anyio
import pytest

from judge_mcp.methods import pairwise
from judge_mcp.storage.sqlite import Store, StoreError
from judge_mcp.storage.verdict_log import VerdictLog
from tests.helpers import app_env, make_app, until
from tests.judge_script import PAIR, UniversalJudge
from tests.engines import on_both_engines


def _blocker(store: Store) -> tuple[threading.Event, threading.Event, Callable[[], None]]:
    """A job for the write lane that holds it (inside a write transaction) until released."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction():
            entered.set()
            assert release.wait(10)

    return entered, release, hold


@on_both_engines
async def test_jobs_run_off_the_loop_in_one_persistent_thread_each(store: Store) -> None:
    loop_thread = threading.get_ident()
    reads = {await store.reads.run(threading.get_ident) for _ in range(3)}
    writes = {await store.writes.run(threading.get_ident) for _ in range(3)}
    assert len(reads) == 1 and len(writes) == 1 and reads != writes and loop_thread not in reads | writes
    assert await store.writes.run(lambda a, b=0: a + b, 2, b=3) == 5


@on_both_engines
async def test_a_jobs_error_is_raised_to_its_caller_and_the_lane_goes_on(store: Store) -> None:
    with pytest.raises(StoreError, match="could not read the database"):
        await store.reads.run(store.query, "SELECT nothing FROM no_such_table")
    assert await store.reads.run(store.query, "SELECT 1 AS one") == [{"one": 1}]


@on_both_engines
async def test_a_cancelled_caller_stops_waiting_and_its_write_still_commits_whole(store: Store) -> None:
    entered, release, hold = _blocker(store)
    blocked = asyncio.get_running_loop().create_task(store.writes.run(hold))
    assert await anyio.to_thread.run_sync(entered.wait, 10)
    log = VerdictLog(store)
    writer = asyncio.get_running_loop().create_task(store.writes.run(log.log, "t", "b", "m", {"x": 1}, {"y": 2}, {}, []))
    await asyncio.sleep(0.01)
    writer.cancel()  # while its write is queued behind the held transaction
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"] == 0
    release.set()
    await blocked
    assert await store.writes.run(lambda: None) is None  # every job handed over before this one has run
    rows = log.recent()
    assert [(r["tool"], r["inputs"], r["output"]) for r in rows] == [("t", {"x": 1}, {"y": 2})]


@on_both_engines
async def test_a_read_never_queues_behind_a_write(store: Store) -> None:
    entered, release, hold = _blocker(store)
    blocked = asyncio.get_running_loop().create_task(store.writes.run(hold))
    try:
        assert await anyio.to_thread.run_sync(entered.wait, 10)
        with anyio.fail_after(5):  # the write lane is held; the read lane answers all the same
            assert await store.reads.run(store.query, "SELECT COUNT(*) AS n FROM verdicts") == [{"n": 0}]
    finally:
        release.set()
        await blocked


def test_a_loop_that_ends_before_its_answer_breaks_nothing(store: Store) -> None:
    entered, release, hold = _blocker(store)

    async def hand_over_and_leave() -> None:
        store.writes.submit(hold, lambda result, error: None)
        store.writes.submit(lambda: None, lambda result, error: None)  # answered after this loop has closed

    asyncio.run(hand_over_and_leave())
    assert entered.wait(10)
    release.set()
    assert asyncio.run(store.writes.run(lambda: "next loop")) == "next loop"


def test_close_waits_for_the_jobs_handed_over_and_stops_the_threads(tmp_path) -> None:
    store = Store(tmp_path / "judge.db")
    done = threading.Event()

    async def main() -> None:
        await store.reads.run(lambda: None)
        store.writes.submit(lambda: (threading.Event().wait(0.05), done.set()), lambda result, error: None)

    asyncio.run(main())
    threads = [store.reads._thread, store.writes._thread]
    assert all(t is not None and t.is_alive() for t in threads)
    store.close()
    assert done.is_set()  # the queued write ran before the store closed
    assert not any(t.is_alive() for t in threads)


async def test_a_call_cancelled_while_its_write_waits_keeps_its_answers_in_memory_until_written(scripted, tmp_path) -> None:
    backend = scripted(UniversalJudge())
    app = make_app(app_env(backend, tmp_path / "judge.db"))
    entered, release, hold = _blocker(app.store)
    blocked = asyncio.get_running_loop().create_task(app.store.writes.run(hold))
    try:
        assert await anyio.to_thread.run_sync(entered.wait, 10)
        call = asyncio.get_running_loop().create_task(app.run("compare_pair", PAIR, lambda j: pairwise.compare_pair(j, **PAIR)))
        await until(lambda: len(app.cache._unwritten) == 2)  # both answers are in; the write waits in the lane
        await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert len(app.cache._unwritten) == 2  # not dropped while the write is still to come
        again = asyncio.get_running_loop().create_task(app.run("compare_pair", PAIR, lambda j: pairwise.compare_pair(j, **PAIR)))
        await asyncio.sleep(0.05)  # its write queues behind the others
    finally:
        release.set()
        await blocked
    result = await again
    assert (result.usage.calls, result.usage.cached_calls) == (0, 2) and len(backend.requests) == 2  # from memory
    await app.store.writes.run(lambda: None)
    assert app.cache._unwritten == {}
    assert app.store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 2
    assert [r["tool"] for r in VerdictLog(app.store).recent()] == ["compare_pair", "compare_pair"]  # the cancelled one's too
    await app.aclose()


def test_a_flight_cut_off_by_the_end_of_its_event_loop_is_forgotten_and_the_next_loop_calls_afresh(make_judge, store) -> None:
    from judge_mcp.backends.base import user
    from judge_mcp.calls.cache import CallCache

    judge, server = make_judge(lambda p: "an answer")
    cache = CallCache(None)  # no table: straight to the flight
    request = user("asked in two event loops")

    async def cut_off() -> None:
        asyncio.get_running_loop().create_task(cache.lookup(judge.backend, request))
        await asyncio.sleep(0)  # the flight's task exists; the loop ends before it ever runs

    asyncio.run(cut_off())
    assert cache._inflight == {}  # its last waiter, cancelled as the loop ended, let go of it
    completion, cached = asyncio.run(asyncio.wait_for(cache.complete(judge.backend, request), 10))
    assert completion.text == "an answer" and not cached and len(server.requests) == 1
