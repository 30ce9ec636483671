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
from tests.helpers import delayed, http_backend
from tests.judge_script import UniversalJudge
from tests.scripted import Reply, chat_body


def backend_for(server):
    return http_backend(server, max_retries=0)


async def test_a_cancelled_caller_leaves_the_shared_call_to_the_others(scripted, store):
    server = scripted(lambda p: Reply(content="the shared answer", delay_s=0.5))
    backend, cache = backend_for(server), CallCache(store)
    request = user("judge this")
    first, second = Judge(backend, cache, store), Judge(backend, cache, store)
    got = {}

    async def wait_for_answer() -> None:
        got["second"] = await second.complete(request)

    async with anyio.create_task_group() as tg:
        with anyio.move_on_after(0.15) as scope:  # the first caller gives up while the call is in flight
            tg.start_soon(wait_for_answer)
            await first.complete(request)
    assert scope.cancelled_caught
    assert got["second"].text == "the shared answer"
    assert len(server.requests) == 1  # the second caller was not given a fresh call: it kept the shared one
    assert (second.calls, second.cached_calls, first.calls) == (1, 0, 0)  # the survivor accounts for the one call
    assert store.cache_get(request.cache_key(backend.identity()))["text"] == "the shared answer"
    await backend.aclose()


async def test_a_call_nobody_waits_for_is_cancelled_and_a_new_caller_starts_afresh(scripted, store):
    server = scripted(lambda p: Reply(content="late answer", delay_s=0.4))
    backend, cache = backend_for(server), CallCache(store)
    request = user("judge this")
    with anyio.move_on_after(0.1):
        await cache.complete(backend, request)
    assert cache._inflight == {}  # forgotten at once: a newcomer does not join the dying call
    completion, cached = await cache.complete(backend, request)
    assert (completion.text, cached) == ("late answer", False)
    assert len(server.requests) == 2
    await backend.aclose()


async def test_cancelling_one_compare_pair_never_breaks_an_identical_one(scripted, store):
    """The reported failure: "'NoneType' object has no attribute 'parse_ok'" in the surviving call."""
    slow = UniversalJudge()
    server = scripted(delayed(slow, 0.5))
    backend, cache = backend_for(server), CallCache(store)
    args = dict(prompt="What is the capital of Australia?", response_a="Sydney.", response_b="Canberra.")
    results = {}

    async def survivor() -> None:
        results["b"] = await pairwise.compare_pair(Judge(backend, cache, store), **args)

    async with anyio.create_task_group() as tg:
        tg.start_soon(survivor)
        with anyio.move_on_after(0.2):
            await pairwise.compare_pair(Judge(backend, cache, store), **args)
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
