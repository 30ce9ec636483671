"""Ctrl-C (SIGINT) of `judge-mcp serve` and `judge-mcp demo`, sent to a real subprocess: no traceback, and over HTTP
the first Ctrl-C says how many calls are in flight and that a second one stops now."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from testkit.scripted_servers import Reply, ScriptedServer
from testkit.scripted_judges import PAIR
from testkit.server_process import HttpServer, clean_env
from tests.helpers import app_env, token_client

TOKEN = "test-token-0123456789abcdef"


def _wait_for(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)  # polling a subprocess's log; nothing is ordered by this
    return False


async def test_ctrl_c_on_http_serve_counts_the_calls_in_flight_and_a_second_stops_now(tmp_path: Path) -> None:
    log = tmp_path / "http.log"
    with ScriptedServer(lambda p: Reply(content="late", delay_s=20.0)) as backend:
        env = clean_env(**app_env(backend, tmp_path / "judge.db", JUDGE_MCP_HTTP_TOKEN=TOKEN, JUDGE_MCP_MAX_RETRIES="0"))
        with HttpServer(env, log=log) as server:
            http, client = token_client(server.url, TOKEN)

            async def call() -> None:
                try:
                    async with http, client:
                        await client.call_tool("compare_pair", PAIR)
                except Exception:  # the server stops under it: the client's error is expected
                    pass

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                assert await anyio.to_thread.run_sync(lambda: _wait_for(lambda: len(backend.requests) >= 1))
                server.proc.send_signal(signal.SIGINT)
                said = await anyio.to_thread.run_sync(lambda: _wait_for(lambda: "Ctrl-C" in log.read_text()))
                assert said, log.read_text()
                assert server.proc.poll() is None  # still waiting for the call
                server.proc.send_signal(signal.SIGINT)
                code = await anyio.to_thread.run_sync(lambda: server.proc.wait(30))
                tg.cancel_scope.cancel()
    text = log.read_text()
    assert "Ctrl-C: stopping (waiting for 1 call in flight to finish); press Ctrl-C again to stop now" in text, text
    assert "second Ctrl-C: stopping now" in text
    assert "Traceback" not in text and code in (130, -signal.SIGINT, 0)


def test_ctrl_c_on_stdio_serve_and_on_demo_prints_no_traceback(tmp_path: Path) -> None:
    with ScriptedServer(lambda p: Reply(content="late", delay_s=20.0)) as backend:
        env = clean_env(**app_env(backend, tmp_path / "judge.db"))
        for command in (["serve"], ["demo"]):
            proc = subprocess.Popen([sys.executable, "-m", "judge_mcp", *command], env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if command == ["demo"]:
                assert _wait_for(lambda: len(backend.requests) >= 1, 60), "the demo never called the backend"
            else:
                time.sleep(3)  # let it import and start reading stdin (a Ctrl-C during imports is covered too)
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                pytest.fail(f"{command} did not stop on Ctrl-C")
            assert "Traceback" not in err, (command, err)
            assert "stopped (Ctrl-C)" in err, (command, err)
            assert proc.returncode == 130, (command, proc.returncode, err)


def test_serve_on_a_terminal_says_what_it_waits_for_answers_a_line_and_stops_on_the_first_ctrl_c(tmp_path: Path) -> None:
    """A person who runs `judge-mcp serve` in a terminal: one line on stderr says it waits for an MCP client, a JSON-RPC
    line typed there is answered, and the first Ctrl-C stops it (a reader thread blocked in read() held it until Enter)."""
    import os
    import pty

    leader, follower = pty.openpty()
    env = clean_env(JUDGE_MCP_DB=str(tmp_path / "judge.db"), JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1")
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "judge_mcp", "serve"], stdin=follower, stdout=follower, stderr=err, env=env, cwd=tmp_path)
    os.close(follower)
    try:
        assert _wait_for(lambda: "waiting for an MCP client" in log.read_text()), log.read_text()
        os.write(leader, b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n')
        seen = b""
        deadline = time.monotonic() + 30
        while b'"result"' not in seen and b'"error"' not in seen and time.monotonic() < deadline:
            seen += os.read(leader, 4096)  # the terminal echoes the line first, then the server's answer follows
        assert b'"result"' in seen and b'"id":7' in seen.replace(b" ", b""), seen
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)  # one Ctrl-C, no Enter
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert code == 130 and "Traceback" not in log.read_text(), log.read_text()
