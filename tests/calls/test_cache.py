"""The call cache over real HTTP (calls/cache.py): repeats are answered from SQLite (also after reopening the store),
per backend identity; samples (temperature > 0) are never cached; no API key ever lands in the database file; a lone
surrogate is stored and returned. A tool call's new answers are written with its verdict and answered from memory
until then (also when the call was cancelled while its write waited), and a read that began before that write
committed still finds them; the requests of one judgment share one read of the table; a lookup cut off by the end of
its event loop breaks nothing. (Identical calls in flight: test_inflight.py.)"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from judge_mcp.contract.results import UsageOut
from judge_mcp.backends.base import user
from testkit.scripted_servers import Reply, chat_body
from testkit.scripted_judges import GOOD, PAIR, UniversalJudge
from judge_mcp.calls.cache import CallCache
from judge_mcp.storage.call_cache import CacheTable
from judge_mcp.calls.context import CallContext
from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods import pairwise
from testkit.runs import run_once
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.storage.verdict_log import VerdictLog
from tests.helpers import Hold, Rendezvous, WriteHold, app_env, gather, http_backend, make_app, settled, until
from tests.engines import on_both_engines


def cache_rows(store: SqliteEngine) -> int:
    return store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"]


async def test_repeat_is_answered_from_sqlite_also_after_reopening(http, tmp_path):
    backend, server = http(lambda p: Reply(content="stored answer", finish_reason="length", prompt_tokens=30, completion_tokens=7))
    db = tmp_path / "cache.db"
    store = SqliteEngine(db)
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

    reopened = SqliteEngine(db)
    try:
        third, cached = await CallCache(reopened).complete(backend, request)
        assert cached and third.text == "stored answer" and len(server.requests) == 1
        assert reopened.query("SELECT * FROM call_cache") == stored  # a hit is a pure read: nothing written
    finally:
        reopened.close()


@on_both_engines
async def test_cache_is_per_backend_identity(http, store):
    backend_a, server_a = http(lambda p: "from a", model="model-a")
    backend_b, server_b = http(lambda p: "from b", model="model-b")
    cache = CallCache(store)
    request = user("q")
    (ra, _), (rb, _) = await cache.complete(backend_a, request), await cache.complete(backend_b, request)
    assert (ra.text, rb.text) == ("from a", "from b")
    assert len(server_a.requests) == 1 and len(server_b.requests) == 1


@on_both_engines
async def test_samples_are_never_cached(http, store):
    counter = iter(range(100))
    together = Rendezvous(3, lambda p: f"sample {next(counter)}", rounds=1)  # the three concurrent samples all go out
    backend, server = http(together)
    judge = CallContext(backend, CallCache(store), store)
    request = user("q", temperature=0.8)

    concurrent = await gather(3, lambda: judge.complete(request))
    again = await judge.complete(request)

    assert (together.met, together.broken) == (3, 0) and len(server.requests) == 4
    assert len({c.text for c in concurrent} | {again.text}) == 4  # every sample is its own answer
    assert (judge.calls, judge.cached_calls) == (4, 0)
    assert cache_rows(store) == 0


def db_bytes(path: Path) -> bytes:
    """The database file and its -wal / -shm companions, as they are on disk."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_api_key_never_reaches_the_database_file(http, api_key, tmp_path, kind):
    def respond(payload: dict[str, Any]) -> Reply | str:
        text = json.dumps(payload)
        if "retry me" in text and len(respond.seen) == 0:
            respond.seen.append(1)  # first time: a 429 whose body echoes the key, as some proxies do
            return Reply(status=429, raw_body=json.dumps({"error": {"message": f"slow down, {api_key}"}}).encode())
        return Reply(content=f"verdict-text-{kind}")

    respond.seen = []  # type: ignore[attr-defined]
    backend, server = http(respond, kind=kind)
    db = tmp_path / "keys.db"
    store = SqliteEngine(db)
    try:
        judge = CallContext(backend, CallCache(store), store)
        await judge.complete(user("retry me", system="sys", json_schema={"type": "object", "properties": {}}))
        await judge.complete(user("retry me", system="sys", json_schema={"type": "object", "properties": {}}))  # cached
        await judge.complete(user("sample", temperature=0.5))
        VerdictLog(store).log("compare_pair", backend.name, backend.model_id, {"prompt": "p"}, {"winner": "A"},
                          UsageOut.model_validate(judge.usage()).model_dump(), judge.records)

        sent = server.headers[0].get("authorization", "") + server.headers[0].get("x-api-key", "")
        assert api_key in sent  # the key was configured and used on the wire
        assert any("retried_errors" in r for r in judge.records)  # the echoed error was recorded (redacted)
        on_disk = db_bytes(db)
        assert f"verdict-text-{kind}".encode() in on_disk  # the calls did reach the file...
        assert api_key.encode() not in on_disk  # ...the key did not
    finally:
        store.close()
    assert api_key.encode() not in db_bytes(db)


async def test_a_lone_surrogate_in_the_answer_is_replaced_and_stored(scripted, store):
    body = json.dumps(chat_body("[[A>B]] fine")).replace("fine", "fine \\ud800 end").encode()
    server = scripted(lambda p: Reply(raw_body=body))
    backend = http_backend(server, max_retries=0)
    completion, cached = await CallCache(store).complete(backend, user("x"))
    assert completion.text == "[[A>B]] fine \ufffd end" and not cached
    again, cached = await CallCache(store).complete(backend, user("x"))
    assert cached and again.text == completion.text
    await backend.aclose()


async def test_a_read_that_began_before_a_write_committed_does_not_send_the_request_again(scripted, tmp_path, monkeypatch):
    """The race a bench test hit under load: tool call B's cache read takes its snapshot while tool call A's identical
    request is at the backend; A's answer is then written with A's verdict, and only then does B's read come back,
    empty. B must find the answer among the recently written ones, not call the backend again."""
    hold = Hold(UniversalJudge())
    server = scripted(hold)
    app = make_app(app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0"))
    args = {**PAIR, "swap": False}  # one request per call
    snapshot_taken, let_it_return = threading.Event(), threading.Event()
    real_get_many = CacheTable.get_many

    def stale_get_many(self, keys):
        found = real_get_many(self, keys)  # read before A's write commits
        if not snapshot_taken.is_set():
            snapshot_taken.set()
            let_it_return.wait(10)
        return found

    got = {}

    async def tool_call(name: str) -> None:
        got[name] = await run_once(app, "compare_pair", args, lambda judge: pairwise.compare_pair(judge, **args))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tool_call, "A")
            assert await anyio.to_thread.run_sync(hold.arrived.wait, 10)  # A's request is at the backend
            monkeypatch.setattr(CacheTable, "get_many", stale_get_many)
            tg.start_soon(tool_call, "B")
            assert await anyio.to_thread.run_sync(snapshot_taken.wait, 10)  # B's read has its (empty) snapshot
            hold.release()
            await until(lambda: "A" in got)  # A's verdict and answer are written (the run returns after its write)
            let_it_return.set()
    finally:
        await app.aclose()
    assert got["A"].winner == got["B"].winner == "B"
    assert (got["B"].usage.calls, got["B"].usage.cached_calls) == (0, 1) and len(server.requests) == 1


async def test_recently_written_answers_are_bounded_and_dropped_rows_are_not_kept(scripted, store, monkeypatch):
    """A lookup whose table read missed an answer (its snapshot predates the write) finds it among the last
    RECENTLY_WRITTEN answers written; older ones, and the answers of a write that failed, are not kept in memory:
    those requests go to the backend again."""
    from judge_mcp.calls import cache as call_cache

    monkeypatch.setattr(call_cache, "RECENTLY_WRITTEN", 2)
    server = scripted(lambda p: "from the backend")
    backend = http_backend(server, max_retries=0)
    cache = CallCache(store)  # its table stays empty: every read misses, as one that began before the write would
    requests = [user(f"question {i}") for i in range(4)]
    rows: list = []
    for request in requests:
        await cache.lookup(backend, request, defer=rows)
    cache.written(rows[:3], stored=True)  # as the write lane reports a committed write...
    cache.written(rows[3:])  # ...and a failed one
    found = [(await cache.lookup(backend, request))[1] for request in requests]
    assert found == [False, True, True, False]  # the two last written; the oldest pushed out, the failed write's dropped
    assert len(server.requests) == 4 + 2
    await backend.aclose()


async def test_deferred_rows_answer_from_memory_until_written(make_judge, store) -> None:
    judge, server = make_judge(lambda p: "an answer")
    cache = CallCache(store)
    rows: list = []
    request = user("the same question")
    first, cached, key = await cache.lookup(judge.backend, request, defer=rows)
    assert not cached and [r.key for r in rows] == [key]
    assert store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 0  # deferred: not written yet
    second, cached, _ = await cache.lookup(judge.backend, request)
    assert cached and second.text == "an answer" and len(server.requests) == 1  # answered from memory
    VerdictLog(store).log("t", "b", "m", {}, {}, {}, [], rows)
    cache.written(rows, stored=True)
    assert (await CallCache(store).lookup(judge.backend, request))[1]  # a fresh cache finds it in the table
    assert len(server.requests) == 1


async def test_the_requests_of_one_judgment_share_one_read_of_the_cache(make_judge, store, monkeypatch) -> None:
    judge, server = make_judge(UniversalJudge())
    reads: list[list[str]] = []
    real = CacheTable.get_many

    def counting(self, keys: list[str]):
        reads.append(list(keys))
        return real(self, keys)

    monkeypatch.setattr(CacheTable, "get_many", counting)
    await pairwise.compare_pair(judge, **PAIR)
    assert [len(keys) for keys in reads] == [2]
    reads.clear()
    responses = [f"{GOOD} ({k})" for k in range(16)]
    result = await flip.infer_instruction_reward(CallContext(judge.backend, judge.cache, store), instruction="Name the capital city of Australia.", responses=responses)
    assert len(result.results) == 16 and result.usage.calls == 16
    assert [len(keys) for keys in reads] == [16]  # 16 requests, one read


def test_a_lookup_cut_off_by_the_end_of_its_event_loop_does_not_break_the_next_loop(make_judge, store) -> None:
    import asyncio

    judge, server = make_judge(lambda p: "an answer")
    cache = CallCache(store)
    request = user("asked in two event loops")

    async def cut_off() -> None:
        asyncio.get_running_loop().create_task(cache.lookup(judge.backend, request))
        await asyncio.sleep(0)  # the lookup has asked for its read; the loop ends before the read runs

    asyncio.run(cut_off())
    completion, cached = asyncio.run(cache.complete(judge.backend, request))
    assert completion.text == "an answer" and not cached and len(server.requests) == 1


async def test_a_call_cancelled_while_its_write_waits_keeps_its_answers_in_memory_until_written(scripted, tmp_path) -> None:
    backend = scripted(UniversalJudge())
    app = make_app(app_env(backend, tmp_path / "judge.db"))
    writes = WriteHold(app.store)
    blocked = asyncio.get_running_loop().create_task(app.store.writes.run(writes.job))
    judged = asyncio.Event()

    async def compare(judge: CallContext):
        result = await pairwise.compare_pair(judge, **PAIR)
        judged.set()  # both answers are in; the run goes straight on to its write
        return result

    try:
        assert await anyio.to_thread.run_sync(writes.entered.wait, 10)
        call = asyncio.get_running_loop().create_task(run_once(app, "compare_pair", PAIR, compare))
        await asyncio.wait_for(judged.wait(), 10)
        await settled()  # the call waits for its write, queued behind the held one
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # While that write still waits, the same judgment is answered from memory: nothing is in the table yet.
        again = await pairwise.compare_pair(CallContext(app.backend(None), app.cache, app.store), **PAIR)
        assert (again.usage.calls, again.usage.cached_calls) == (0, 2) and len(backend.requests) == 2
    finally:
        writes.release()
        await blocked
    await app.store.writes.run(lambda: None)  # every write handed over before this one has run
    assert [r["tool"] for r in VerdictLog(app.store).recent()] == ["compare_pair"]  # the cancelled call's, written whole
    fresh = await pairwise.compare_pair(CallContext(app.backend(None), CallCache(app.store), app.store), **PAIR)
    assert fresh.usage.cached_calls == 2 and len(backend.requests) == 2  # its answers are in the table
    await app.aclose()
