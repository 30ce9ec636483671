"""A database that cannot be opened or written: a clear error naming the file, never a traceback, nothing half-written.

A full disk is simulated with SQLite's own `PRAGMA max_page_count` (the connection gets SQLITE_FULL, "database or
disk is full", exactly as on a full file system), on the server's real store file.
"""

from __future__ import annotations

import random
import sqlite3
import string
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import until
from testkit.scripted_judges import BAD, GOOD, UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.calls.cache import CacheRow, CacheTable
from judge_mcp.methods import lwe
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.storage.sqlite import SqliteEngine, StoreError
from judge_mcp.storage.verdict_log import VerdictLog
from tests.helpers import integrity_ok

# more than a few pages even compressed (long texts are stored zlib-compressed), so a write must grow the file
BIG = "".join(random.Random(0).choices(string.ascii_letters + string.digits, k=20_000))


def fill_up(store: SqliteEngine) -> None:
    """From now on the file may not grow: every write that needs a new page fails with SQLITE_FULL."""
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")


def free_up(store: SqliteEngine) -> None:
    store.conn.execute("PRAGMA max_page_count = 1073741823")


@pytest.mark.parametrize("kind", ["directory", "under_a_file", "not_sqlite"])
def test_a_database_that_cannot_be_opened_is_named(tmp_path: Path, kind: str) -> None:
    if kind == "directory":
        path = tmp_path / "judge.db"
        path.mkdir()
    elif kind == "under_a_file":
        (tmp_path / "plain").write_text("a file, not a folder")
        path = tmp_path / "plain" / "judge.db"
    else:
        path = tmp_path / "judge.db"
        path.write_bytes(b"this is not an SQLite database\n" * 200)
    with pytest.raises(StoreError, match="cannot open the database") as caught:
        SqliteEngine(path)
    assert str(path) in str(caught.value)
    if kind == "not_sqlite":
        assert "not a database" in str(caught.value)
        assert path.read_bytes().startswith(b"this is not")  # the file was not touched


def test_cli_reports_an_unopenable_database_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "judge.db"
    path.mkdir()
    env = clean_env(JUDGE_MCP_DB=str(path))
    for argv in (["sessions", "list"], ["serve"]):
        done = subprocess.run([sys.executable, "-m", "judge_mcp", *argv], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 2, done.stderr
        assert "cannot open the database" in done.stderr and str(path) in done.stderr
        assert "Traceback" not in done.stderr


def test_a_full_disk_fails_the_write_whole_and_names_the_reason(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        VerdictLog(store).log("compare_pair", "b", "m", {"prompt": "small"}, {"winner": "A"}, {}, [])
        fill_up(store)
        with pytest.raises(StoreError, match="database or disk is full") as caught:
            VerdictLog(store).log("compare_pair", "b", "m", {"prompt": BIG}, {"winner": "A"}, {}, [{"request": BIG}])
        assert "rolled back" in str(caught.value) and str(tmp_path / "judge.db") in str(caught.value)
        assert [v["inputs"]["prompt"] for v in VerdictLog(store).recent()] == ["small"]
        assert not store.conn.in_transaction
        free_up(store)
        VerdictLog(store).log("compare_pair", "b", "m", {"prompt": BIG}, {"winner": "B"}, {}, [])
        assert len(VerdictLog(store).recent()) == 2 and integrity_ok(store)
    finally:
        store.close()


def test_a_full_disk_never_leaves_a_half_written_lwe_version(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        LweRepository(store).ensure_session("s", 2, lwe.initial_meta_prompt())
        ids = [
            LweRepository(store).add_feedback("s", {"meta_version": 1, "prompt": "q", "response_a": "a", "response_b": "b", "eval_prompt": "e",
                                         "judgment": "[[A]]", "winner": "A", "feedback": f"fb {i}", "feedback_parse_ok": True})[0]
            for i in range(2)
        ]
        fill_up(store)
        with pytest.raises(StoreError, match="database or disk is full"):
            LweRepository(store).commit_version("s", expected_version=1, text="LEARNED " + BIG, reason="refine", use_feedback=ids)
        assert LweRepository(store).session_row("s")["current_version"] == 1
        assert [v["version"] for v in LweRepository(store).versions("s")] == [1]
        assert [row["id"] for row in LweRepository(store).pending("s")] == ids  # the feedback is still buffered
        free_up(store)
        assert LweRepository(store).commit_version("s", expected_version=1, text="LEARNED " + BIG, reason="refine", use_feedback=ids) == 2
        assert LweRepository(store).pending("s") == [] and integrity_ok(store)
    finally:
        store.close()


def test_tool_call_on_a_full_disk_answers_names_the_reason_and_its_row_follows_once_there_is_room(mcp_app) -> None:
    """The verdict is worth more than its log row (judge_mcp/runtime/verdict_writes.py): the answer goes out with a warning
    naming the write's failure, and the row, retried in the background, is written whole once space is back."""
    server, backend = mcp_app(UniversalJudge())
    store = server.app.store
    args = {"prompt": "What is the capital of Australia? " + BIG, "response_a": GOOD, "response_b": BAD}

    async def main() -> None:
        async with Client(server) as client:
            fill_up(store)
            answered = await client.call_tool("compare_pair", args)
            assert not answered.is_error and answered.structured_content["winner"] == "A"
            warning = " ".join(answered.structured_content["warnings"])
            assert "not written yet" in warning and "could not write the database" in warning and "database or disk is full" in warning
            assert VerdictLog(store).recent() == []
            free_up(store)
            await until(lambda: len(VerdictLog(store).recent()) == 1, timeout_s=30)
            ok = await client.call_tool("compare_pair", args)
            assert not ok.is_error and ok.structured_content["winner"] == "A" and ok.structured_content["warnings"] == []

    anyio.run(main)
    assert len(VerdictLog(store).recent()) == 2 and integrity_ok(store)  # the late row, and the second call's (a cache hit)
    assert len(store.query("SELECT key FROM call_cache")) == 2  # the late row came with its two cache rows, whole
    assert server.app.verdict_writes.health().written_late == 1


def test_cache_hits_are_pure_reads_and_answer_when_every_write_fails(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        CacheTable(store).put_many([CacheRow("k", "b", "m", {"r": 1}, {"text": "cached"})])
        store.conn.execute("PRAGMA query_only = ON")  # every write now fails, reads still work
        assert CacheTable(store).get_many(["k"]).get("k") == {"text": "cached"}
        with pytest.raises(StoreError, match="could not write"):
            CacheTable(store).put_many([CacheRow("k2", "b", "m", {"r": 2}, {"text": "other"})])
    finally:
        store.conn.execute("PRAGMA query_only = OFF")
        store.close()


def test_the_store_error_is_not_raised_for_other_failures_inside_a_transaction(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        with pytest.raises(KeyError):
            with store.transaction() as db:
                db.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'i', 'o', 0)")
                raise KeyError("not a database problem")
        assert store.query("SELECT COUNT(*) AS n FROM option_pool")[0]["n"] == 0  # rolled back
    finally:
        store.close()


def test_sqlite_errors_do_not_escape_as_raw_sqlite_errors(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        with pytest.raises(StoreError, match="could not read") as read:
            store.query("SELECT * FROM no_such_table")
        with pytest.raises(StoreError, match="could not write") as write:
            with store.transaction() as db:
                db.execute("INSERT INTO no_such_table VALUES (1)")
        for raised in (read.value, write.value):
            # what was raised is not an sqlite3 error (an `except sqlite3.Error` caller never sees it), but it keeps
            # the original as its cause and names the file and the problem
            assert not isinstance(raised, sqlite3.Error) and isinstance(raised.__cause__, sqlite3.Error)
            assert str(tmp_path / "judge.db") in str(raised) and "no_such_table" in str(raised)
    finally:
        store.close()
