"""Cold start over stdio: judge-mcp against the SDK's minimal one-tool server, each started in a fresh process,
alternately. Times, from process start: the first answered `tools/list`, and the first answered tool call
(judge-mcp's `compare_pair` against a scripted OpenAI-compatible backend in a process of its own answering at once;
the minimal server's one tool). Prints the medians and their ratios.

    .venv/bin/python -m perf.cold_start [--runs 9] [--base OLD_CHECKOUT]

`--base` adds a third server, judge-mcp from another checkout (its package first on PYTHONPATH, this venv's
dependencies, run from its directory), started in the same alternation, for a before/after measured side by side.

A third server is the naive judge, perf/naive_judge.py (written with the same SDK: one tool that sends the judged pair
to the same scripted backend in one chat completion, with httpx, the SDK's own HTTP client, and returns the reply): what any judging
server built on the SDK pays for its first call, an HTTP client's import and a request, which the echo server does
not.

Every server runs with bytecode, as an installed package does (pip compiles it at install; a checkout run with
PYTHONDONTWRITEBYTECODE=1 would compile judge-mcp's modules from source at every start while the SDK's come compiled
from site-packages): the children write and read it under a PYTHONPYCACHEPREFIX in a temporary folder, filled by
each server's warm-up start.

The client speaks newline-delimited JSON-RPC on the server's stdin/stdout (what an MCP client does), so the
client's own import time is not counted. judge-mcp runs on one database (made by a warm-up start) with a new prompt
each run, so no answer comes from the call cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from testkit.scripted_servers import ExternalScripted

MINIMAL = """
import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="minimal")


@server.tool()
async def echo(text: str) -> str:
    \"\"\"Return the text.\"\"\"
    return text


anyio.run(server.run_stdio_async)
"""

ROOT = Path(__file__).resolve().parents[1]


def _send(proc: subprocess.Popen, message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _answer(proc: subprocess.Popen, request_id: int) -> dict:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server exited before answering request {request_id}")
        message = json.loads(line)
        if message.get("id") == request_id:
            if "error" in message:
                raise RuntimeError(f"request {request_id}: {message['error']}")
            return message["result"]


def stop(proc: subprocess.Popen) -> None:
    """End a server started here: its stdin closed (a stdio server's end of input), killed if it lingers."""
    proc.stdin.close()  # type: ignore[union-attr]
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_start(
    argv: list[str], env: dict[str, str], tool: str, arguments: dict, stderr: Any = subprocess.DEVNULL, cwd: Path = ROOT, think_s: float = 0.0
) -> tuple[float, float, float]:
    """(seconds to the first tools/list answer, seconds to the first tool answer, seconds the tool call itself took:
    from sending it to its answer) for one fresh process. `think_s`: the client's pause between the tools/list answer
    and the tool call (a model deciding to call a tool), left out of the second figure."""
    from mcp.types import LATEST_PROTOCOL_VERSION

    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd)
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "cold-start", "version": "1"}}})
        _answer(proc, 1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = _answer(proc, 2)
        listed = time.perf_counter() - start
        assert any(t["name"] == tool for t in tools["tools"]), tool
        if think_s:
            time.sleep(think_s)
        sent = time.perf_counter()
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        result = _answer(proc, 3)
        answered = time.perf_counter()
        called = answered - start - think_s
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result['content'][0]['text']}")
        return listed, called, answered - sent
    finally:
        stop(proc)


Server = tuple[list[str], dict[str, str], Path, str, Callable[[int], dict[str, str]]]  # argv, env, cwd, tool, arguments


def servers_to_start(backend_url: str, tmp: Path, base: Path | None) -> dict[str, Server]:
    """The servers measured, by name: the minimal echo server, the naive judge, judge-mcp (and judge-mcp at `base`).
    Every child gets bytecode under one prefix in `tmp` (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    judge_env = {**env, "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": backend_url, "JUDGE_MCP_API_KEY": "k",
                 "JUDGE_MCP_MODEL": "scripted", "JUDGE_MCP_DB": str(tmp / "judge.db")}
    judge = [sys.executable, "-m", "judge_mcp", "serve"]

    def pair(k: int) -> dict[str, str]:
        return {"prompt": f"Question {k}: what is 2+2?", "response_a": "4", "response_b": "5"}

    servers: dict[str, Server] = {
        "minimal": ([sys.executable, "-c", MINIMAL], env, ROOT, "echo", lambda k: {"text": f"hi {k}"}),
        "naive": ([sys.executable, str(ROOT / "perf" / "naive_judge.py"), "stdio"], {**env, "NAIVE_BASE_URL": backend_url}, ROOT, "judge", pair),
        "judge": (judge, judge_env, ROOT, "compare_pair", pair),
    }
    if base is not None:
        old = base.resolve()
        servers["base"] = (judge, {**judge_env, "PYTHONPATH": str(old), "JUDGE_MCP_DB": str(tmp / "base.db")}, old, "compare_pair", pair)
    return servers


def measure(servers: dict[str, Server], runs: int, think_s: float) -> dict[str, list[tuple[float, float, float]]]:
    """Each server's `one_start` figures over `runs` rounds, the servers alternating within a round, after one
    warm-up start each (databases, page cache, bytecode)."""
    for argv, env, cwd, tool, arguments in servers.values():
        one_start(argv, env, tool, arguments(-1), cwd=cwd)
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in servers}
    for k in range(runs):
        for name, (argv, env, cwd, tool, arguments) in servers.items():
            times[name].append(one_start(argv, env, tool, arguments(k), cwd=cwd, think_s=think_s))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--base", type=Path, help="another checkout of judge-mcp, measured in the same alternation")
    parser.add_argument("--think-ms", type=float, default=0.0, help="the client's pause before its first tool call (default 0: at once)")
    args = parser.parse_args()
    with ExternalScripted('{"verdict": "[[A>B]]"}', 0.0) as backend, tempfile.TemporaryDirectory() as tmp:
        times = measure(servers_to_start(backend.base_url, Path(tmp), args.base), args.runs, args.think_ms / 1000.0)
    med = {name: [statistics.median(t[i] for t in runs) for i in range(3)] for name, runs in times.items()}
    load = os.getloadavg()[0]
    print(f"## Cold start over stdio (median of {args.runs} fresh processes each, alternating; think time {args.think_ms:g} ms; load average {load:.2f})")
    print("| server | first tools/list | first tool call (less the think time) | the first call itself |")
    print("|---|---|---|---|")
    labels = {"minimal": "SDK minimal one-tool server (`echo`)", "naive": "naive SDK judge (`judge`: httpx, one request)",
              "judge": "judge-mcp (`compare_pair`, scripted backend)", "base": f"judge-mcp at {args.base}"}
    for name in med:
        print(f"| {labels[name]} | {med[name][0] * 1000:.0f} ms | {med[name][1] * 1000:.0f} ms | {med[name][2] * 1000:.1f} ms |")
        if name != "minimal":
            print(f"| its ratio to the minimal server | {med[name][0] / med['minimal'][0]:.2f}x | {med[name][1] / med['minimal'][1]:.2f}x | |")
    if "naive" in med:
        for name in ("judge", "base"):
            if name in med:
                print(f"| {labels[name]}: ratio to the naive judge | {med[name][0] / med['naive'][0]:.2f}x | {med[name][1] / med['naive'][1]:.2f}x | |")
    # the same ratios per round (each server against the minimal one started just before it), their median: the load
    # other processes put on the machine drifts between rounds more than within one
    for name in (n for n in times if n != "minimal"):
        paired = [statistics.median(t[i] / m[i] for t, m in zip(times[name], times["minimal"])) for i in range(2)]
        print(f"| {labels[name]}: median of the per-round ratios to the minimal server | {paired[0]:.2f}x | {paired[1]:.2f}x | |")


if __name__ == "__main__":
    main()
