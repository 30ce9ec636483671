"""Anonymous JWT-shaped tokens against authenticated calls (issue 46, break 1): how much a flood of made-up OAuth
tokens delays a static-token client's judge_stats, and how many times it makes the server fetch the issuer's keys.

    .venv/bin/python -m perf.oauth_flood [--flood 200] [--calls 20] [--peers 4]

`judge-mcp serve --transport http` runs as a process of its own with JUDGE_MCP_HTTP_TOKEN and an OAuth issuer; the
issuer (testkit/jwks_issuer.py) is, in turn: slow (answers after 4 s), unreachable (accepts connections and never
answers: the fetch times out after 5 s) and failing (HTTP 500). For each, the static-token client's judge_stats is
timed alone, then during a flood from a process of its own: `--flood` requests at once, each with a fresh token with
a random `kid` (from `--peers` loopback addresses); with `--sustained` each is sent again as soon as answered, for
`--seconds`. `control` is the same flood of wrong static tokens against a server without OAuth: what any 401 costs.
Printed: the median and the worst of each, the added delay (flood median - alone median), and the key fetches the
issuer received. On 254e9ed the client waited 3.9-4.1 s (slow issuer, 200 tokens), 29.2 s (unreachable,
45 tokens), and 100 tokens made 138 fetches of a failing issuer; the goals are <= 50 ms added and <= 1 fetch per 30 s.
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

from testkit.jwks_issuer import Blackhole, JwksIssuer
from testkit.server_process import HttpServer, server_env

STATIC = "static-token-0123456789abcdef"
KINDS = ("slow", "unreachable", "failing", "control")  # control: no OAuth, the same flood with wrong static tokens
ACCEPT = {"accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "perf", "version": "0"}}}
STATS = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "judge_stats", "arguments": {}}}


async def session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    opened = await client.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {STATIC}"})
    opened.raise_for_status()
    headers = {**ACCEPT, "authorization": f"Bearer {STATIC}", "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
    await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def timed_calls(client: httpx.AsyncClient, url: str, headers: dict[str, str], calls: int) -> list[float]:
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        answer = await client.post(url, json=STATS, headers=headers)
        assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text[:300]
        seconds.append(time.perf_counter() - started)
    return seconds


FLOODER = r"""
import asyncio, json, sys, time
port, tokens_file, width, peers, seconds, burst = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6] == "1"
tokens = open(tokens_file).read().split()
body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"0"}}}'
statuses = {}

async def one(i, token):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(f"127.0.0.{2 + i % peers}", 0))
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
                 b"Content-Type: application/json\r\nAuthorization: Bearer " + token.encode() + b"\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    line = await reader.readline()
    status = line.split()[1].decode() if line.count(b" ") >= 2 else "0"
    statuses[status] = statuses.get(status, 0) + 1
    writer.close()

async def worker(i, end):
    n = 0
    while True:
        try:
            await one(i, tokens[(i + n * width) % len(tokens)])
        except OSError:
            statuses["0"] = statuses.get("0", 0) + 1
        n += 1
        if burst or time.monotonic() > end:
            return

async def main():
    end = time.monotonic() + seconds
    await asyncio.gather(*(worker(i, end) for i in range(width)))

asyncio.run(main())
print(json.dumps(statuses))
"""


def start_flood(port: int, signer: JwksIssuer | None, args: argparse.Namespace, tmp: Path) -> subprocess.Popen[str]:
    """The flood, in a process of its own (so that the timed client's event loop does not serve it): `--flood`
    requests at once, each with a fresh made-up token (a wrong static one without `signer`)."""
    tokens = [signer.bogus() if signer else f"wrong-static-token-{i:012d}" for i in range(args.flood * 4)]
    (tmp / "tokens").write_text("\n".join(tokens))
    return subprocess.Popen([sys.executable, "-c", FLOODER, str(port), str(tmp / "tokens"), str(args.flood), str(args.peers),
                             str(args.seconds), "1" if args.burst else "0"], stdout=subprocess.PIPE, text=True)


async def scenario(server: HttpServer, signer: JwksIssuer | None, args: argparse.Namespace, tmp: Path) -> tuple[list[float], list[float], dict]:
    url = server.url
    async with httpx.AsyncClient(timeout=60) as client:
        headers = await session(client, url)
        await timed_calls(client, url, headers, 3)  # warm
        alone = await timed_calls(client, url, headers, args.calls)
        flooding = start_flood(server.port, signer, args, tmp)
        await asyncio.sleep(0.3)  # the flooder has started and its first requests are in
        during = await timed_calls(client, url, headers, args.calls)
        statuses = json.loads(flooding.communicate()[0] or "{}")
    return alone, during, statuses


def run(kind: str, args: argparse.Namespace, signer: JwksIssuer) -> None:
    issuer: JwksIssuer | Blackhole
    issuer = Blackhole() if kind == "unreachable" else JwksIssuer(mode="slow" if kind == "slow" else "error", delay_s=4.0)
    with issuer, tempfile.TemporaryDirectory() as tmp:
        oauth = {"JUDGE_MCP_OAUTH_ISSUER": issuer.url, "JUDGE_MCP_OAUTH_AUDIENCE": "judge-perf", "JUDGE_MCP_OAUTH_JWKS_URL": issuer.jwks_url}
        env = server_env("http://127.0.0.1:9/v1", Path(tmp) / "judge.db", JUDGE_MCP_HTTP_TOKEN=STATIC, **(oauth if kind != "control" else {}))
        server = HttpServer(env, log=Path(tmp) / "http.log")
        try:
            alone, during, statuses = asyncio.run(scenario(server, signer if kind != "control" else None, args, Path(tmp)))
        finally:
            server.stop()
        fetches = issuer.fetches if isinstance(issuer, JwksIssuer) else "n/a"
        log = (Path(tmp) / "http.log").read_text(errors="replace")
    a50, d50 = statistics.median(alone) * 1000, statistics.median(during) * 1000
    print(f"{kind:12s} alone p50 {a50:6.1f} ms max {max(alone) * 1000:6.1f} | flood p50 {d50:6.1f} ms max {max(during) * 1000:6.1f} "
          f"| added p50 {d50 - a50:+6.1f} ms max {(max(during) - max(alone)) * 1000:+6.1f} ms | fetches {fetches} "
          f"(failed, logged: {log.count('fetching the issuer')}) | flood answers {dict(sorted(statuses.items()))}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--peers", type=int, default=4, help="loopback addresses the flood comes from")
    parser.add_argument("--only", choices=KINDS)
    parser.add_argument("--sustained", dest="burst", action="store_false",
                        help="each flood request sent again as soon as answered, for --seconds (default: the flood is one burst)")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with JwksIssuer() as signer:  # signs the made-up tokens (their kids are random: no issuer published them)
        for kind in KINDS:
            if args.only in (None, kind):
                run(kind, args, signer)


if __name__ == "__main__":
    main()
