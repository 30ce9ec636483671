"""PostgreSQL gone or frozen (issue 34, break 5), on a real server (testkit/postgres_server.py): a frozen
server (SIGSTOP on every process of it, as a network partition behaves) fails every statement within the store's
cut bound, a queue of them in a few seconds in all (not one bound each), judge_stats' and record_label's reads
fail fast with a clear error meanwhile (through the tools too: a cache hit, judge_stats, record_label), and
statements succeed again within seconds of the end of the freeze and of a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from judge_mcp.storage.engine import StoreError
from judge_mcp.storage.postgres import PostgresEngine

CUT_S = 2.0  # the store's bound on a connection held before it proves the server (pg_guard.SUSPECT_AFTER_S)


def _processes(server) -> list[int]:
    """The postmaster and every process it started (one per connection, the background workers)."""
    postmaster = int((Path(server.root) / "data" / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _recovers_within(store: PostgresEngine, limit_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            store.query("SELECT 1 AS one")
            return time.monotonic() - started
        except StoreError:
            time.sleep(0.1)
    raise AssertionError(f"the store did not recover within {limit_s} s")


async def _queued_reads(store: PostgresEngine, n: int) -> list[BaseException | list]:
    async def one() -> BaseException | list:
        try:
            return await store.reads.run(store.query, "SELECT 1 AS one")
        except StoreError as exc:
            return exc

    return await asyncio.gather(*(one() for _ in range(n)))


def test_a_frozen_server_fails_statements_within_the_bound_then_recovers(postgres_server, postgres_url) -> None:
    from judge_mcp.stats import report as stats

    store = PostgresEngine(postgres_url, connect_timeout_s=2, suspect_after_s=CUT_S)
    pids = _processes(postgres_server)
    try:
        assert store.query("SELECT 1 AS one") == [{"one": 1}]
        _signal(pids, signal.SIGSTOP)
        started = time.monotonic()
        outcomes = asyncio.run(asyncio.wait_for(_queued_reads(store, 20), 30))  # 20 reads queued in the read lane
        took = time.monotonic() - started
        assert all(isinstance(o, StoreError) for o in outcomes), outcomes
        assert took < CUT_S + 4, took  # the first waits out the bound and the proof (2 s); the rest fail at once
        assert any("did not answer within 2 s, nor a new connection" in str(o) for o in outcomes)
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"could not (reach|use) the database 'postgresql://judge@127\.0\.0\.1"):
            stats.from_store(store, 100)  # judge_stats' read
        with pytest.raises(StoreError):
            store.run("UPDATE verdicts SET created_at = created_at WHERE id = -1")  # a write (record_label's kind)
        assert time.monotonic() - started < CUT_S + 4
    finally:
        _signal(pids, signal.SIGCONT)
    try:
        assert _recovers_within(store, 10) < 3  # after the freeze: within a second or two
    finally:
        store.close()


def test_statements_succeed_again_within_seconds_of_a_restart(postgres_server, postgres_url) -> None:
    store = PostgresEngine(postgres_url, connect_timeout_s=2, suspect_after_s=CUT_S)
    try:
        assert store.query("SELECT 1 AS one") == [{"one": 1}]
        postgres_server.stop("immediate")
        down = time.monotonic()
        while time.monotonic() - down < 8:  # stopped: each fails at once (refused), naming the database; the pool backs off
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"could not (read|reach) the database"):
                store.query("SELECT 1 AS one")
            assert time.monotonic() - started < 3
            time.sleep(0.2)
        postgres_server._start()
        assert _recovers_within(store, 30) < 1.5  # a connection of its own proves the server back, not the pool's backoff
    finally:
        store.close()


def test_a_slow_statement_on_a_live_server_is_not_cut(postgres_url) -> None:
    store = PostgresEngine(postgres_url, connect_timeout_s=2, suspect_after_s=0.5)  # the server is proved, and answers
    try:
        assert store.query("SELECT 2 AS two FROM pg_sleep(1.5)") == [{"two": 2}]
        assert store.query("SELECT 1 AS one") == [{"one": 1}]  # no outage was declared
    finally:
        store.close()


async def test_tools_fail_fast_with_a_clear_error_while_the_server_is_frozen(postgres_server, postgres_url, scripted) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from judge_mcp.server import tools
    from judge_mcp.contract.args import JudgeStatsArgs, RecordLabelArgs
    from testkit.scripted_judges import PAIR, UniversalJudge
    from judge_mcp.methods import pairwise
    from testkit.runs import run_once
    from tests.helpers import app_env, make_app

    server = scripted(UniversalJudge())
    app = make_app(app_env(server, postgres_url, JUDGE_MCP_MAX_RETRIES="0"), store=PostgresEngine(postgres_url, connect_timeout_s=2, suspect_after_s=CUT_S))
    args = {**PAIR, "swap": False}

    async def compare() -> object:
        return await run_once(app, "compare_pair", args, lambda judge: pairwise.compare_pair(judge, **args))

    pids = _processes(postgres_server)
    try:
        first = await compare()  # its answer is in the call cache: the same call again is a cache hit
        _signal(pids, signal.SIGSTOP)
        try:
            for call in (
                compare,
                lambda: tools.judge_stats(app, JudgeStatsArgs()),
                lambda: tools.record_label(app, RecordLabelArgs(verdict_id=first.verdict_id, label="A")),
            ):
                started = time.monotonic()
                with pytest.raises((StoreError, ToolError), match=r"could not (reach|use|read) the database 'postgresql://judge@"):
                    await asyncio.wait_for(call(), 30)
                assert time.monotonic() - started < CUT_S + 4
        finally:
            _signal(pids, signal.SIGCONT)
        assert _recovers_within(app.store, 10) < 3
        assert (await compare()).winner == first.winner
    finally:
        _signal(pids, signal.SIGCONT)
        await app.aclose()


async def test_a_leased_answer_is_returned_when_its_write_cannot_be_made_in_time(scripted, postgres_url, monkeypatch) -> None:
    """calls/leased.complete_once: the answer is back from the backend, but the store's write lane is stuck (a frozen
    server, a lock): the caller gets the answer after STORE_WAIT_S, not after the write."""
    import threading

    from judge_mcp.backends.base import user
    from testkit.scripted_servers import Reply
    from judge_mcp.calls import leased
    from judge_mcp.calls.cache import CallCache
    from tests.helpers import Hold, http_backend

    monkeypatch.setattr(leased, "STORE_WAIT_S", 0.5)
    hold = Hold(lambda p: Reply(content="the answer"))
    server = scripted(hold)
    store = PostgresEngine(postgres_url)
    backend = http_backend(server, max_retries=0)
    stuck = threading.Event()
    try:
        rows: list = []  # as App.run does: the answer's row is written with the verdict (verdict_writes bounds that wait)
        call = asyncio.ensure_future(CallCache(store).lookup(backend, user("judge this"), defer=rows))
        assert await asyncio.to_thread(hold.arrived.wait, 10)  # claimed, and at the backend
        store.writes.submit(lambda: stuck.wait(20), lambda result, error: None)  # the write lane is stuck from now
        hold.release()
        started = time.monotonic()
        completion, cached, _ = await asyncio.wait_for(call, 30)
        assert completion.text == "the answer" and not cached and len(rows) == 1
        assert time.monotonic() - started < 3  # not the 20 s of the stuck write
    finally:
        stuck.set()
        await backend.aclose()
        store.close()


def test_only_a_silent_or_stopping_server_starts_an_outage() -> None:
    from judge_mcp.storage.pg_guard import Outage
    from judge_mcp.storage.postgres import _server_answered

    assert _server_answered('connection failed: ... failed: FATAL:  sorry, too many clients already')
    assert _server_answered('connection failed: ... failed: FATAL:  password authentication failed for user "judge"')
    assert not _server_answered('connection failed: ... failed: Connection refused Is the server running on that host?')
    assert not _server_answered("connection failed: ... failed: timeout expired")
    assert not _server_answered("connection failed: ... failed: FATAL:  the database system is shutting down")
    outage = Outage()
    assert outage.enter() == (None, False)
    outage.failed("the server cannot be reached: refused")
    down, probe = outage.enter()
    assert "refused" in down and not probe  # at once, for RETRY_AFTER_S
    outage._until = 0.0  # the second is over: one statement proves the server, the others still fail at once
    assert outage.enter() == (None, True)
    assert outage.enter()[0] is not None
    outage.recovered()
    assert outage.enter() == (None, False)


def test_a_refused_connection_lets_the_next_statement_prove_the_server_at_once() -> None:
    """A refusal (nothing listens: the server restarts) costs nothing to try again, so the next statement proves the
    server at once; a slow failure (frozen, partitioned) holds statements off for RETRY_AFTER_S. Without this the
    first calls after a restart failed with the outage's reason (tests/server/transports/test_replicas.py)."""
    from judge_mcp.storage.pg_guard import Outage

    outage = Outage()
    outage.failed("refused", quick=True)
    assert outage.enter() == (None, True)  # this statement proves it
    down, probe = outage.enter()  # another one meanwhile fails at once, while the first proves it
    assert probe is False and down is not None and "refused" in down
    outage.recovered()
    assert outage.enter() == (None, False)
    outage.failed("timed out")
    down, probe = outage.enter()
    assert probe is False and down is not None and "timed out" in down
