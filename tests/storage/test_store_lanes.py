"""The store's lanes (one persistent thread each for reads and for writes, storage/sqlite.py Lane), which carry the
two trips of every tool call: a job runs off the event loop, in the same thread each time; its error reaches its
caller; a caller cancelled while its write waits stops waiting, and the write still commits whole; a read never
queues behind a write; a loop that ends before its job is answered breaks nothing; closing the store waits for the
jobs handed over and stops the threads."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from judge_mcp.storage.sqlite import SqliteEngine, StoreError
from judge_mcp.storage.verdict_log import VerdictLog
from tests.helpers import WriteHold, settled
from tests.engines import on_both_engines


@on_both_engines
async def test_jobs_run_off_the_loop_in_one_persistent_thread_each(store: SqliteEngine) -> None:
    loop_thread = threading.get_ident()
    reads = {await store.reads.run(threading.get_ident) for _ in range(3)}
    writes = {await store.writes.run(threading.get_ident) for _ in range(3)}
    assert len(reads) == 1 and len(writes) == 1 and reads != writes and loop_thread not in reads | writes
    assert await store.writes.run(lambda a, b=0: a + b, 2, b=3) == 5


@on_both_engines
async def test_a_jobs_error_is_raised_to_its_caller_and_the_lane_goes_on(store: SqliteEngine) -> None:
    with pytest.raises(StoreError, match="could not read the database"):
        await store.reads.run(store.query, "SELECT nothing FROM no_such_table")
    assert await store.reads.run(store.query, "SELECT 1 AS one") == [{"one": 1}]


@on_both_engines
async def test_a_cancelled_caller_stops_waiting_and_its_write_still_commits_whole(store: SqliteEngine) -> None:
    writes = WriteHold(store)
    blocked = asyncio.get_running_loop().create_task(store.writes.run(writes.job))
    assert await anyio.to_thread.run_sync(writes.entered.wait, 10)
    log = VerdictLog(store)
    writer = asyncio.get_running_loop().create_task(store.writes.run(log.log, "t", "b", "m", {"x": 1}, {"y": 2}, {}, []))
    await settled()  # the writer has handed its job over and waits for it
    writer.cancel()  # while its write is queued behind the held transaction
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"] == 0
    writes.release()
    await blocked
    assert await store.writes.run(lambda: None) is None  # every job handed over before this one has run
    rows = log.recent()
    assert [(r["tool"], r["inputs"], r["output"]) for r in rows] == [("t", {"x": 1}, {"y": 2})]


@on_both_engines
async def test_a_read_never_queues_behind_a_write(store: SqliteEngine) -> None:
    writes = WriteHold(store)
    blocked = asyncio.get_running_loop().create_task(store.writes.run(writes.job))
    try:
        assert await anyio.to_thread.run_sync(writes.entered.wait, 10)
        with anyio.fail_after(5):  # the write lane is held; the read lane answers all the same
            assert await store.reads.run(store.query, "SELECT COUNT(*) AS n FROM verdicts") == [{"n": 0}]
    finally:
        writes.release()
        await blocked


def test_a_loop_that_ends_before_its_answer_breaks_nothing(store: SqliteEngine) -> None:
    writes = WriteHold(store)

    async def hand_over_and_leave() -> None:
        store.writes.submit(writes.job, lambda result, error: None)
        store.writes.submit(lambda: None, lambda result, error: None)  # answered after this loop has closed

    asyncio.run(hand_over_and_leave())
    assert writes.entered.wait(10)
    writes.release()
    assert asyncio.run(store.writes.run(lambda: "next loop")) == "next loop"


def test_close_waits_for_the_jobs_handed_over_and_stops_the_threads(tmp_path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    started, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_write() -> None:
        started.set()
        assert release.wait(10)
        done.set()

    async def main() -> set[int]:
        lanes = {await store.reads.run(threading.get_ident), await store.writes.run(threading.get_ident)}
        store.writes.submit(slow_write, lambda result, error: None)
        return lanes

    lanes = asyncio.run(main())
    assert started.wait(10) and lanes <= {t.ident for t in threading.enumerate()}  # both lanes' threads run
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and not done.is_set()  # close() waits while a job handed over before it still runs
    release.set()
    closer.join(10)
    assert not closer.is_alive() and done.is_set()  # the queued write ran before the store closed
    assert not lanes & {t.ident for t in threading.enumerate()}  # and both lanes' threads have stopped
