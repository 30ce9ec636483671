"""Server CPU per tool call: judge-mcp's compare_pair against the naive judge (perf/naive_judge.py: the same SDK, one
tool, one chat completion), over streamable HTTP and over stdio, and what the new shapes cost against one backend call.

    .venv/bin/python -m perf.call_cpu [--calls 200] [--rounds 3] [--base OLD_CHECKOUT] [--shapes-latency 0.1] [--shape-calls 10]

(from the checkout's root). Not a test: it prints figures, each a ratio of things measured side by side in this run.

1. Per call, zero-latency scripted backend (testkit/scripted_servers.py, a process of its own): each server runs in a
   process of its own, its CPU (utime + stime of all its threads, from /proc) read around `--calls` sequential calls
   after a warm-up, so the client's and the backend's CPU are not counted. judge-mcp answers a default compare_pair
   (both orders, sop, a verdict row written per call, a new prompt each call: no cache hits), and again with `swap`
   false (one order: one backend request, as the naive judge sends); the naive judge its one tool. Over HTTP the official MCP client drives the server (perf/profile_call.measure, bearer token for judge-mcp);
   over stdio this process writes newline-delimited JSON-RPC to the server's stdin (as an MCP client does) and reads
   its stdout. Rounds alternate the servers (naive, this checkout, `--base`), each in a fresh process, so a drift in the
   machine's load hits all alike; medians over the rounds, and the ratio of each round's pair.
2. The new shapes, against a backend answering after `--shapes-latency` seconds, over HTTP: a compare_pair of two
   100-message trajectories (perf/transcript_cost.trajectory: tool calls and their results), a score_response of 10
   criteria x 3 samples, and a default compare_pair, beside the naive judge (one backend call through the SDK) and one
   backend call sent directly from this process: wall time per call and server CPU per call.
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
import uuid
from pathlib import Path

import anyio

from perf.cold_start import _answer, _send, stop
from perf.profile_call import ROOT, cpu_s, measure, server_env
from perf.transcript_cost import trajectory
from testkit.scripted_judges import UNIVERSAL_ANSWER
from testkit.scripted_servers import ExternalScripted

NAIVE = str(ROOT / "perf" / "naive_judge.py")
PAIR = {"response_a": "a", "response_b": "b"}


def stdio_measure(argv: list[str], env: dict[str, str], cwd: Path, tool: str, args: dict, calls: int, warm_up: int = 30) -> dict:
    """Server CPU and round-trip wall time per call over stdio, for `calls` sequential calls after `warm_up`."""
    from mcp.types import LATEST_PROTOCOL_VERSION

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "call-cpu", "version": "1"}}})
        _answer(proc, 0)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})

        def run(n: int, first_id: int) -> float:
            start = time.perf_counter()
            for k in range(first_id, first_id + n):
                _send(proc, {"jsonrpc": "2.0", "id": k, "method": "tools/call",
                             "params": {"name": tool, "arguments": {**args, "prompt": f"q {uuid.uuid4().hex}"}}})
                result = _answer(proc, k)
                if result.get("isError"):
                    raise RuntimeError(f"{tool} failed: {result['content'][0]['text']}")
            return (time.perf_counter() - start) / n

        run(warm_up, 1)
        c0 = cpu_s(proc.pid)
        wall = run(calls, 1 + warm_up)
        return {"cpu": (cpu_s(proc.pid) - c0) / calls, "wall": wall}
    finally:
        stop(proc)


def servers(base_url: str, tmp: Path, base: Path | None) -> dict[str, tuple[list[str], list[str], dict[str, str], Path, str, dict]]:
    """name -> (HTTP argv for measure, stdio argv, env, root, tool, arguments)."""
    env = {**server_env(base_url, tmp / "naive.db"), "NAIVE_BASE_URL": base_url}
    serve = ["judge-mcp", "serve", "--transport", "http", "--port", "PORT"]
    stdio = [sys.executable, "-m", "judge_mcp", "serve"]
    out = {
        "naive": ([NAIVE, "http", "PORT"], [sys.executable, NAIVE, "stdio"], env, ROOT, "judge", PAIR),
        "ours": (serve, stdio, server_env(base_url, tmp / "ours.db"), ROOT, "compare_pair", PAIR),
        # one order (swap false): one backend request, as the naive judge sends, with the verdict log and call cache
        "one": (serve, stdio, server_env(base_url, tmp / "one.db"), ROOT, "compare_pair", {**PAIR, "swap": False}),
    }
    if base is not None:
        out["base"] = (serve, stdio, {**server_env(base_url, tmp / "base.db"), "PYTHONPATH": str(base)}, base, "compare_pair", PAIR)
    return out


async def per_call(calls: int, rounds: int, base: Path | None, tmp: Path) -> None:
    with ExternalScripted(UNIVERSAL_ANSWER, 0.0) as zero:
        table = servers(zero.base_url, tmp, base)
        runs: dict[tuple[str, str], list[dict]] = {}
        for r in range(rounds):
            names = list(table) if r % 2 == 0 else list(reversed(table))  # alternate the order too
            for name in names:
                http_argv, stdio_argv, env, root, tool, args = table[name]
                runs.setdefault(("http", name), []).append(await measure(http_argv, env, tool, args, calls, root=root))
                stdio_env = {**env, "PYTHONPATH": str(root)}
                runs.setdefault(("stdio", name), []).append(stdio_measure(stdio_argv, stdio_env, root, tool, args, calls))
            print(f"  round {r + 1}/{rounds} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    labels = {"naive": "naive judge (one chat completion, httpx)", "ours": "judge-mcp compare_pair (this checkout)",
              "one": "judge-mcp compare_pair, swap false (one backend request)",
              "base": f"judge-mcp compare_pair ({base})"}
    print(f"\n## Server CPU per call, zero-latency backend: medians of {rounds} alternating rounds of {calls} sequential calls, each server in a fresh process")
    print("| transport | server | server CPU per call | round trip | CPU ratio to the naive judge (per round) |")
    print("|---|---|---|---|---|")
    for transport in ("http", "stdio"):
        naive = runs[(transport, "naive")]
        for name in table:
            got = runs[(transport, name)]
            cpu, wall = (statistics.median(run[k] for run in got) * 1000 for k in ("cpu", "wall"))
            per_round = [g["cpu"] / n["cpu"] for g, n in zip(got, naive)]
            print(f"| {transport} | {labels[name]} | {cpu:.3f} ms | {wall:.3f} ms | "
                  f"{statistics.median(per_round):.2f} ({' '.join(f'{x:.2f}' for x in per_round)}) |")
        if "base" in table:
            ratio = [o["cpu"] / b["cpu"] for o, b in zip(runs[(transport, "ours")], runs[(transport, "base")])]
            print(f"| {transport} | this checkout / base | | | {statistics.median(ratio):.2f} ({' '.join(f'{x:.2f}' for x in ratio)}) |")


def shapes() -> dict[str, tuple[str, dict, str]]:
    """name -> (tool, arguments, the argument made new each call)."""
    criteria = [{"name": f"criterion {k}", "description": f"how well the response meets point {k}"} for k in range(10)]
    return {
        "naive": ("judge", PAIR, "prompt"),
        "pair": ("compare_pair", PAIR, "prompt"),
        "trajectories": ("compare_pair", {"response_a": trajectory(100, 1), "response_b": trajectory(100, 2)}, "prompt"),
        "rubric": ("score_response", {"response": "The sea is calm tonight.", "criteria": criteria, "samples": 3}, "instruction"),
    }


async def one_backend_call(base_url: str, calls: int) -> float:
    import httpx  # lazy: only this section sends requests itself

    async with httpx.AsyncClient(timeout=60) as client:
        times = []
        for _ in range(calls + 1):
            start = time.perf_counter()
            reply = await client.post(base_url + "/chat/completions",
                                      json={"model": "scripted", "messages": [{"role": "user", "content": uuid.uuid4().hex}]})
            reply.raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


async def new_shapes(latency: float, calls: int, rounds: int, tmp: Path) -> None:
    with ExternalScripted(UNIVERSAL_ANSWER, latency) as backend:
        env = {**server_env(backend.base_url, tmp / "shapes.db"), "NAIVE_BASE_URL": backend.base_url}
        serve = ["judge-mcp", "serve", "--transport", "http", "--port", "PORT"]
        table = shapes()
        runs: dict[str, list[dict]] = {name: [] for name in table}
        direct: list[float] = []
        for _ in range(rounds):
            direct.append(await one_backend_call(backend.base_url, calls))
            for name, (tool, args, key) in table.items():
                argv = [NAIVE, "http", "PORT"] if name == "naive" else serve
                runs[name].append(await measure(argv, env, tool, args, calls, fresh_key=key, warm_up=3))
    one = statistics.median(direct) * 1000
    naive_cpu = statistics.median(run["cpu"] for run in runs["naive"]) * 1000
    labels = {"naive": "naive judge: one chat completion through the SDK", "pair": "compare_pair, default (2 backend calls)",
              "trajectories": "compare_pair, two 100-message trajectories (2 calls)", "rubric": "score_response, 10 criteria x 3 samples"}
    print(f"\n## New shapes over streamable HTTP, backend latency {latency * 1000:.0f} ms: medians of {rounds} rounds of {calls} sequential calls "
          f"(load average {os.getloadavg()[0]:.2f})")
    print(f"one backend call sent directly (httpx): {one:.1f} ms")
    print("| call | wall per call | ratio to one backend call | server CPU per call | ratio to the naive judge's CPU |")
    print("|---|---|---|---|---|")
    for name, got in runs.items():
        wall, cpu = (statistics.median(run[k] for run in got) * 1000 for k in ("wall", "cpu"))
        print(f"| {labels[name]} | {wall:.1f} ms | {wall / one:.2f} | {cpu:.2f} ms | {cpu / naive_cpu:.2f} |")


async def main(calls: int, rounds: int, base: Path | None, latency: float, shape_calls: int, skip_shapes: bool) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        await per_call(calls, rounds, base, tmp)
        if not skip_shapes:
            await new_shapes(latency, shape_calls, rounds, tmp)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per server run (per-call section)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--base", type=Path, help="another checkout of judge-mcp (e.g. `git archive` of main) measured in the same rounds")
    parser.add_argument("--shapes-latency", type=float, default=0.1, help="backend latency in seconds for the new shapes")
    parser.add_argument("--shape-calls", type=int, default=10, help="sequential calls per server run (new shapes)")
    parser.add_argument("--no-shapes", action="store_true", help="skip the new shapes")
    args = parser.parse_args()
    anyio.run(main, args.calls, args.rounds, args.base.resolve() if args.base else None, args.shapes_latency, args.shape_calls, args.no_shapes)
