"""Cold start over stdio: judge-mcp against the SDK's minimal one-tool server, each started in a fresh process,
alternately. Times, from process start: the first answered `tools/list`, and the first answered tool call
(judge-mcp's `compare_pair` against a scripted OpenAI-compatible backend in a process of its own answering at once;
the minimal server's one tool). Prints the medians and their ratios.

    .venv/bin/python -m bench.cold_start [--runs 9] [--base OLD_CHECKOUT]

`--base` adds a third server, judge-mcp from another checkout (its package first on PYTHONPATH, this venv's
dependencies, run from its directory), started in the same alternation, for a before/after measured side by side.

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
from typing import Any

from judge_mcp.bench.scripted import ExternalScripted

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
        proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--base", type=Path, help="another checkout of judge-mcp, measured in the same alternation")
    parser.add_argument("--think-ms", type=float, default=0.0, help="the client's pause before its first tool call (default 0: at once)")
    args = parser.parse_args()
    with ExternalScripted('{"verdict": "[[A>B]]"}', 0.0) as backend, tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
        judge_env = {**base, "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": backend.base_url, "JUDGE_MCP_API_KEY": "k",
                     "JUDGE_MCP_MODEL": "scripted", "JUDGE_MCP_DB": str(Path(tmp) / "judge.db")}
        judge = [sys.executable, "-m", "judge_mcp", "serve"]
        minimal = [sys.executable, "-c", MINIMAL]

        def pair(k: int) -> dict:
            return {"prompt": f"Question {k}: what is 2+2?", "response_a": "4", "response_b": "5"}

        servers: dict[str, tuple[list[str], dict[str, str], Path]] = {"judge": (judge, judge_env, ROOT)}
        if args.base is not None:
            old = args.base.resolve()
            servers["base"] = (judge, {**judge_env, "PYTHONPATH": str(old), "JUDGE_MCP_DB": str(Path(tmp) / "base.db")}, old)
        one_start(minimal, base, "echo", {"text": "hi"})  # warm-up: the databases, the page cache
        for argv, env, cwd in servers.values():
            one_start(argv, env, "compare_pair", pair(-1), cwd=cwd)
        think = args.think_ms / 1000.0
        times: dict[str, list[tuple[float, float, float]]] = {"minimal": [], **{name: [] for name in servers}}
        for k in range(args.runs):
            times["minimal"].append(one_start(minimal, base, "echo", {"text": f"hi {k}"}, think_s=think))
            for name, (argv, env, cwd) in servers.items():
                times[name].append(one_start(argv, env, "compare_pair", pair(k), cwd=cwd, think_s=think))
    med = {name: [statistics.median(t[i] for t in runs) for i in range(3)] for name, runs in times.items()}
    load = os.getloadavg()[0]
    print(f"## Cold start over stdio (median of {args.runs} fresh processes each, alternating; think time {args.think_ms:g} ms; load average {load:.2f})")
    print("| server | first tools/list | first tool call (less the think time) | the first call itself |")
    print("|---|---|---|---|")
    labels = {"minimal": "SDK minimal one-tool server (`echo`)", "judge": "judge-mcp (`compare_pair`, scripted backend)", "base": f"judge-mcp at {args.base}"}
    for name in med:
        print(f"| {labels[name]} | {med[name][0] * 1000:.0f} ms | {med[name][1] * 1000:.0f} ms | {med[name][2] * 1000:.1f} ms |")
        if name != "minimal":
            print(f"| its ratio to the minimal server | {med[name][0] / med['minimal'][0]:.2f}x | {med[name][1] / med['minimal'][1]:.2f}x | |")


if __name__ == "__main__":
    main()
