"""A verdict row is worth less than its answer (judge_mcp/runtime/verdict_writes.py): a cache hit answers while another
process holds the database's write lock, instead of waiting the lock out; a row that cannot be written is retried
in the background a bounded number of times, then counted as lost in judge_stats; and a database that takes no
writes at all is refused at start, before any backend call is spent."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from judge_mcp.runtime import verdict_writes
from judge_mcp.server.build import build_server
from judge_mcp.storage.sqlite import SqliteEngine, StoreError
from testkit.server_process import clean_env, free_port
from tests.helpers import ROOT, app_env, make_app, until
from testkit.scripted_judges import PAIR, UniversalJudge


def _verdicts(app) -> int:
    return app.store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"]


async def test_a_cache_hit_answers_while_another_process_holds_the_write_lock(scripted, tmp_path: Path) -> None:
    backend = scripted(UniversalJudge())
    db = tmp_path / "judge.db"
    app = make_app(app_env(backend, db, JUDGE_MCP_MAX_RETRIES="0"), store=SqliteEngine(db, busy_timeout_s=60))
    server = build_server(app)
    other_process = sqlite3.connect(str(db), isolation_level=None)
    try:
        async with Client(server) as client:
            first = await client.call_tool("compare_pair", PAIR)
            assert not first.is_error and _verdicts(app) == 1
            other_process.execute("BEGIN IMMEDIATE")  # held until the cache hit has answered
            with anyio.fail_after(30):  # waiting the lock out would take the 60 s busy timeout
                hit = await client.call_tool("compare_pair", PAIR)
            assert not hit.is_error and hit.structured_content["usage"]["cached_calls"] == 2
            assert hit.structured_content["winner"] == first.structured_content["winner"]
            assert any("not written yet" in w for w in hit.structured_content["warnings"])
            assert _verdicts(app) == 1  # answered while the lock was held: its row is still waiting
            stats = await client.call_tool("judge_stats", {})
            assert stats.structured_content["verdict_log"]["pending"] == 1
            other_process.execute("ROLLBACK")
            # the row commits, then the writer counts it written: wait for both (a read between them sees it pending)
            await until(lambda: _verdicts(app) == 2 and app.verdict_writes.health().pending == 0, timeout_s=60)
            stats = await client.call_tool("judge_stats", {})
            assert stats.structured_content["verdict_log"] == {"pending": 0, "written_late": 1, "lost": 0, "last_error": None}
        assert len(backend.requests) == 2  # the hit sent nothing
    finally:
        other_process.close()
        await app.aclose()


async def test_a_row_that_can_never_be_written_is_counted_lost(scripted, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(verdict_writes, "RETRY_DELAYS_S", (0.01, 0.01))
    backend = scripted(UniversalJudge())
    app = make_app(app_env(backend, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0"))
    server = build_server(app)
    try:
        async with Client(server) as client:
            app.store.conn.execute("PRAGMA query_only = ON")  # from now on every write fails
            answered = await client.call_tool("compare_pair", PAIR)
            assert not answered.is_error and answered.structured_content["winner"] == "B"
            await until(lambda: app.verdict_writes.health().lost == 1)
            app.store.conn.execute("PRAGMA query_only = OFF")
            health = (await client.call_tool("judge_stats", {})).structured_content["verdict_log"]
        assert health["lost"] == 1 and health["pending"] == 0 and "could not write the database" in health["last_error"]
        assert _verdicts(app) == 0 and app.store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 0  # nothing half-kept
        assert app.cache._unwritten == {}  # its answers left the cache's memory with it
    finally:
        await app.aclose()


@pytest.fixture
def immutable_db(tmp_path: Path):
    """A judge-mcp database file the file system refuses to write (chattr +i: read-only even for root)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available")
    db = tmp_path / "ro.db"
    SqliteEngine(db).close()
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable attribute")
    yield db
    subprocess.run(["chattr", "-i", str(db)], capture_output=True)


def test_a_database_that_takes_no_writes_is_refused_at_start(scripted, immutable_db: Path) -> None:
    backend = scripted(UniversalJudge())
    with pytest.raises(StoreError, match="takes no writes") as refused:
        make_app(app_env(backend, immutable_db))
    assert str(immutable_db) in str(refused.value) and "readonly" in str(refused.value)
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="m", JUDGE_MCP_DB=str(immutable_db))
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", str(free_port())],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "takes no writes" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert backend.requests == []  # refused before any backend call
