"""A locked database never blocks the server. Another process holds the database's write lock; a tool call
that must write waits for it in a worker thread while another client's read-only call is answered at once; a
call whose row cannot be written answers all the same (with a warning), and its row follows whole once the lock is
gone."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

import anyio
from mcp import Client

from judge_mcp.server.build import build_server
from judge_mcp.storage.sqlite import SqliteEngine
from tests.helpers import app_env, make_app, until
from testkit.scripted_judges import PAIR, UniversalJudge



def _server(scripted, db: Path, busy_timeout_s: float):
    backend = scripted(UniversalJudge())
    app = make_app(app_env(backend, db, JUDGE_MCP_MAX_RETRIES="0"), store=SqliteEngine(db, busy_timeout_s=busy_timeout_s))
    return app, build_server(app), backend


def _note_writes(store: SqliteEngine) -> threading.Event:
    """An event set when a write transaction starts (in whatever thread runs it), just before it asks for the lock."""
    writing = threading.Event()
    original = store.transaction

    @contextmanager
    def noted():
        writing.set()
        with original() as db:
            yield db

    store.transaction = noted
    return writing


async def test_a_read_is_answered_while_another_call_waits_for_a_foreign_write_lock(scripted, tmp_path: Path) -> None:
    db = tmp_path / "judge.db"
    app, server, backend = _server(scripted, db, busy_timeout_s=30)
    other_process = sqlite3.connect(str(db), isolation_level=None)
    try:
        async with Client(server) as client:
            assert not (await client.call_tool("lwe_judge", {**PAIR, "session": "s"})).is_error
            writing = _note_writes(app.store)
            other_process.execute("BEGIN IMMEDIATE")  # another process takes the write lock and keeps it
            results: dict = {}

            async def judging() -> None:
                results["pair"] = await client.call_tool("compare_pair", {**PAIR, "prompt": "Which city is the capital of Australia?"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(judging)
                # the judgment is in and its first write is waiting for the lock (no sleep: the write says so)
                assert await anyio.to_thread.run_sync(writing.wait, 20)
                with anyio.fail_after(10):  # on the event loop this read would wait out the whole 30 s lock
                    shown = await client.call_tool("lwe_session", {"action": "show", "session": "s"})
                assert "pair" not in results  # the writing call is still waiting: the read did not wait for it
                other_process.execute("ROLLBACK")
        assert not shown.is_error and shown.structured_content["session"] == "s"
        assert not results["pair"].is_error and results["pair"].structured_content["winner"] == "B"
    finally:
        other_process.close()
        await app.aclose()


async def test_a_lock_held_past_the_busy_timeout_answers_and_the_row_follows_whole(scripted, tmp_path: Path) -> None:
    db = tmp_path / "judge.db"
    app, server, backend = _server(scripted, db, busy_timeout_s=0.5)
    other_process = sqlite3.connect(str(db), isolation_level=None)
    try:
        other_process.execute("BEGIN IMMEDIATE")
        async with Client(server) as client:
            result = await client.call_tool("compare_pair", PAIR)
        # answered while the lock is still held: the verdict, and a warning that names the lock
        assert not result.is_error and result.structured_content["winner"] == "B"
        text = " ".join(result.structured_content["warnings"])
        assert "not written yet" in text
        assert app.store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"] == 0  # nothing written while locked
        other_process.execute("ROLLBACK")
        await until(lambda: app.store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"] == 1, timeout_s=30)
        for row in app.store.query("SELECT response FROM call_cache"):  # its cache rows came with it, whole
            assert json.loads(row["response"])["text"]
        assert len(app.store.query("SELECT key FROM call_cache")) == 2
    finally:
        other_process.close()
        await app.aclose()
