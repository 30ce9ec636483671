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
