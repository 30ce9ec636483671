"""Crash safety of LWE state with a real server process: `judge-mcp serve --transport http` against the scripted
backend, killed with SIGKILL (a) while its refine call is in flight and (b) at random moments of a stream of
refining calls. After every kill the database must pass `PRAGMA integrity_check`, hold no half-written version and
no lost or twice-used feedback item, and a restarted server must carry on from the stored state."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from testkit.scripted_judges import REFINED_MARK, LweScript, role_of
from testkit.server_process import HttpServer, clean_env, server_env
from tests.helpers import ROOT, Hold, delayed


def case(i: int) -> dict[str, Any]:
    return {"prompt": f"Crash question {i}?", "response_a": f"answer one to {i}", "response_b": f"answer two to {i}"}


def db_state(db: Path, session: str) -> dict[str, Any]:
    """Read the database with plain sqlite3 (no migrations, no writes) and check every LWE invariant."""
    conn = sqlite3.connect(str(db))
    conn.row_factory = sqlite3.Row
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        sessions = {r["name"]: dict(r) for r in conn.execute("SELECT * FROM lwe_sessions")}
        versions = [dict(r) for r in conn.execute("SELECT * FROM lwe_versions WHERE session = ? ORDER BY version", [session])]
        feedback = [dict(r) for r in conn.execute("SELECT * FROM lwe_feedback WHERE session = ? ORDER BY id", [session])]
    finally:
        conn.close()
    if session not in sessions:
        assert versions == [] and feedback == []
        return {"session": None, "versions": [], "feedback": []}
    row = sessions[session]
    # versions: 1..n without gaps, a chain of parents, the current one exists, every text complete
    assert [v["version"] for v in versions] == list(range(1, len(versions) + 1))
    assert [v["parent"] for v in versions] == [None] + [v["version"] for v in versions[:-1]]
    assert row["current_version"] == versions[-1]["version"]
    for v in versions[1:]:
        assert v["reason"] == "refine" and v["text"].startswith(REFINED_MARK) and v["text"].rstrip().endswith("'[[B]]'.")
    # feedback: every used item belongs to exactly the refine version that lists it, every refine lists a full batch
    listed: dict[int, int] = {}
    for v in versions:
        for fid in json.loads(v["feedback_ids"]):
            assert fid not in listed, f"feedback {fid} used twice"
            listed[fid] = v["version"]
    for v in versions[1:]:
        assert len(json.loads(v["feedback_ids"])) == row["batch_size"]
    for f in feedback:
        if f["status"] == "used":
            assert listed.get(f["id"]) == f["used_in_version"]
        else:
            assert f["status"] == "pending" and f["used_in_version"] is None and f["id"] not in listed
    assert set(listed) <= {f["id"] for f in feedback}
    return {"session": row, "versions": versions, "feedback": feedback}


async def call_lwe(url: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with Client(url) as client:
        result = await client.call_tool("lwe_judge", arguments)
        assert not result.is_error, result
        return result.structured_content


def test_kill_during_refinement_then_restart_completes_it(scripted, tmp_path):
    script = LweScript("first")
    hold = Hold(script, when=lambda payload: role_of(payload) == "refine", timeout_s=60)  # the first refine call hangs
    backend = scripted(hold)
    db = tmp_path / "crash.db"
    log = tmp_path / "server.log"

    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_MAX_RETRIES="0"), log=log)
    try:

        async def first_life() -> None:
            async with Client(server.url) as client:
                for i in range(3):
                    result = await client.call_tool("lwe_judge", {**case(i), "session": "crash", "batch_size": 4})
                    assert not result.is_error and result.structured_content["pending_feedback"] == i + 1
            # the fourth case fills the batch; kill the server while its refine call is in flight
            with anyio.move_on_after(30):
                async with anyio.create_task_group() as tg:

                    async def fourth() -> None:
                        try:
                            await call_lwe(server.url, {**case(3), "session": "crash", "batch_size": 4})
                        except BaseException:  # the server dies under it
                            pass

                    tg.start_soon(fourth)
                    started = await anyio.to_thread.run_sync(hold.arrived.wait, 20)
                    assert started, "the refine call never reached the backend"
                    await anyio.to_thread.run_sync(server.kill)
                    tg.cancel_scope.cancel()

        anyio.run(first_life)
    finally:
        server.kill()
    assert server.proc.returncode == -signal.SIGKILL
    assert [role_of(p) for p in backend.requests].count("refine") == 1 and hold.held == 1  # the one refine, never answered

    state = db_state(db, "crash")
    assert [v["reason"] for v in state["versions"]] == ["initial"]  # no half-written version
    assert state["session"]["current_version"] == 1
    assert [(f["status"], f["used_in_version"]) for f in state["feedback"]] == [("pending", None)] * 4  # none lost or used
    first_refine = next(p for p in backend.requests if p["messages"][0]["content"].startswith("Optimize your current meta prompt"))

    # a restarted server refines the stored batch before judging the next case with the new meta-prompt
    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_MAX_RETRIES="0"), log=log)
    seen: dict[str, Any] = {}

    async def second_life() -> None:
        async with Client(server.url) as client:
            called = await client.call_tool("lwe_judge", {**case(4), "session": "crash"})
            assert not called.is_error, called
            seen["result"] = called.structured_content
            history = await client.read_resource("lwe://sessions/crash/history")
            seen["history"] = json.loads(history.contents[0].text)
            meta = await client.read_resource("lwe://sessions/crash/meta-prompt")
            seen["meta"] = meta.contents[0].text
            shown = await client.call_tool("lwe_session", {"session": "crash", "action": "show"})
            seen["show"] = shown.structured_content

    try:
        anyio.run(second_life)
    finally:
        server.kill()
    result = seen["result"]
    assert [(h["version"], h["parent"], h["reason"]) for h in seen["history"]] == [(1, None, "initial"), (2, 1, "refine")]
    assert seen["meta"].startswith(REFINED_MARK) and seen["show"]["current_version"] == 2 and seen["show"]["pending_feedback"] == 1
    assert result["refined"] is True and result["new_meta_prompt_version"] == 2
    assert result["meta_prompt_version"] == 2 and result["pending_feedback"] == 1
    refines = [p for p in backend.requests if p["messages"][0]["content"].startswith("Optimize your current meta prompt")]
    assert len(refines) == 2 and refines[1]["messages"] == first_refine["messages"]  # exactly the stored batch, from v1

    state = db_state(db, "crash")
    assert [(v["version"], v["parent"], v["reason"]) for v in state["versions"]] == [(1, None, "initial"), (2, 1, "refine")]
    assert json.loads(state["versions"][1]["feedback_ids"]) == [f["id"] for f in state["feedback"][:4]]
    assert [f["status"] for f in state["feedback"]] == ["used"] * 4 + ["pending"]

    # the CLI reads the same state
    env = clean_env(JUDGE_MCP_DB=str(db))
    out = subprocess.run([sys.executable, "-m", "judge_mcp", "sessions", "export", "crash"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    exported = json.loads(out.stdout)
    assert [v["reason"] for v in exported["versions"]] == ["initial", "refine"] and len(exported["feedback"]) == 5


def test_kill_at_random_moments_never_breaks_the_state(scripted, tmp_path):
    """batch_size 1: every case ends in a refinement, so the database is written many times per second; the server
    is killed at random moments and restarted, and every invariant is checked after each kill."""
    backend = scripted(delayed(LweScript("first"), lambda: random.uniform(0.0, 0.03)))
    db = tmp_path / "random.db"
    log = tmp_path / "server.log"
    rng = random.Random(1234)
    next_case = 0
    completed = 0
    for _ in range(4):
        server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_MAX_RETRIES="0"), log=log)
        killer = threading.Timer(rng.uniform(0.3, 1.5), server.kill)

        async def life() -> None:
            nonlocal next_case, completed
            with anyio.fail_after(60):
                while server.proc.poll() is None:
                    i = next_case
                    next_case += 1
                    await call_lwe(server.url, {**case(100 + i), "session": "rnd", "batch_size": 1})
                    completed += 1

        killer.start()
        try:
            anyio.run(life)
        except BaseException:  # noqa: BLE001 - the kill interrupts a call; anything before the kill is a failure
            if not server.killed.is_set():
                raise
        finally:
            killer.join()
            server.kill()
        assert server.proc.returncode == -signal.SIGKILL
        state = db_state(db, "rnd")
        if state["session"] is not None:
            # at most one item can be pending: the one whose refinement the kill interrupted
            assert sum(f["status"] == "pending" for f in state["feedback"]) <= 1
    assert completed >= 2
    # a last, clean life finishes whatever the kills left buffered
    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_MAX_RETRIES="0"), log=log)
    try:
        result = anyio.run(call_lwe, server.url, {**case(999), "session": "rnd", "batch_size": 1})
    finally:
        server.kill()
    assert result["refined"] is True
    state = db_state(db, "rnd")
    assert all(f["status"] == "used" for f in state["feedback"])
    assert len(state["versions"]) == 1 + len(state["feedback"])

