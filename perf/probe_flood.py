"""A health-probe flood against another client's calls (issue 46, item 6): a client's cache-hit compare_pair alone,
and while other processes ask `/healthz` (or `/readyz`) as fast as the server answers.

    .venv/bin/python -m perf.probe_flood [--calls 40] [--flooders 2] [--connections 8] [--rate 1800] [--path /healthz]

`judge-mcp serve --transport http` runs as a process of its own against a scripted backend (a process of its own);
the flood comes from `--flooders` processes, each keeping `--connections` kept-alive connections busy with one probe
after another (raw HTTP/1.1, so the flooder's own cost stays small), `--rate` probes per second in all (0: as many as
the server answers). Printed: the calls' median and 90th percentile
alone and during the flood, their ratio, and the probes answered per second. On 254e9ed a flood of ~1,800 /healthz
per second moved a cache-hit call's median from 10 ms to 106 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from testkit.scripted_servers import ExternalScripted
from testkit.server_process import HttpServer, server_env

TOKEN = "probe-flood-token-0123456789"
ACCEPT = {"accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "perf", "version": "0"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "compare_pair", "arguments": {
    "prompt": "What is the capital of Australia?", "response_a": "Sydney.", "response_b": "Canberra.", "template": "direct"}}}

FLOODER = r"""
import socket, sys, time
port, path, connections, seconds, rate = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
answered, start = 0, time.monotonic()
end = start + seconds
while time.monotonic() < end:
    if rate and answered > rate * (time.monotonic() - start):
        time.sleep(answered / rate - (time.monotonic() - start))
    for s in socks:
        s.sendall(request)
    for i, s in enumerate(socks):
        data = b""
        while b"}" not in data:
            chunk = s.recv(4096)
            if not chunk:
                s = socks[i] = socket.create_connection(("127.0.0.1", port))
                break
            data += chunk
        answered += 1
print(answered)
"""


async def timed_calls(client: httpx.AsyncClient, url: str, headers: dict[str, str], calls: int) -> list[float]:
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        answer = await client.post(url, json=CALL, headers=headers)
        text = answer.text
        assert answer.status_code == 200 and '"cached_calls":' in text.replace(" ", ""), text[:300]
        seconds.append(time.perf_counter() - started)
    return seconds


async def measure(url: str, port: int, args: argparse.Namespace) -> tuple[list[float], list[float], float]:
    async with httpx.AsyncClient(timeout=60) as client:
        opened = await client.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {TOKEN}"})
        headers = {**ACCEPT, "authorization": f"Bearer {TOKEN}", "mcp-session-id": opened.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-06-18"}
        await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        first = await client.post(url, json=CALL, headers=headers)  # the backend's calls: cached from now on
        assert '"isError":false' in first.text.replace(" ", ""), first.text[:300]
        await timed_calls(client, url, headers, 5)  # warm
        alone = await timed_calls(client, url, headers, args.calls)
        seconds = args.flood_seconds
        flooders = [subprocess.Popen([sys.executable, "-c", FLOODER, str(port), args.path, str(args.connections), str(seconds),
                                      str(args.rate / args.flooders)],
                                     stdout=subprocess.PIPE, text=True) for _ in range(args.flooders)]
        await asyncio.sleep(0.5)  # the flood is on
        during = await timed_calls(client, url, headers, args.calls)
        answered = sum(int(p.communicate()[0].strip() or 0) for p in flooders)
    return alone, during, answered / seconds


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--flooders", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--path", default="/healthz", choices=["/healthz", "/readyz"])
    parser.add_argument("--flood-seconds", type=float, default=6.0)
    parser.add_argument("--rate", type=float, default=1800.0, help="probes per second in all (0: as fast as answered)")
    args = parser.parse_args()
    with ExternalScripted(json.dumps({"verdict": "[[B>A]]"}), 0.0) as backend, tempfile.TemporaryDirectory() as tmp:
        server = HttpServer(server_env(backend.base_url, Path(tmp) / "judge.db", JUDGE_MCP_HTTP_TOKEN=TOKEN), log=Path(tmp) / "http.log")
        try:
            alone, during, rate = asyncio.run(measure(server.url, server.port, args))
        finally:
            server.stop()
    a50, d50 = statistics.median(alone) * 1000, statistics.median(during) * 1000
    print(f"{args.path}: alone p50 {a50:.1f} ms p90 {pct(alone, 0.9):.1f} ms | flood p50 {d50:.1f} ms p90 {pct(during, 0.9):.1f} ms "
          f"| ratio p50 {d50 / a50:.2f} | probes answered {rate:,.0f}/s")


if __name__ == "__main__":
    main()
