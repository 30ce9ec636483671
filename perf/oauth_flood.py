"""Anonymous JWT-shaped tokens against authenticated calls (issue 46, break 1): how much a flood of made-up OAuth
tokens delays a static-token client's judge_stats, and how many times it makes the server fetch the issuer's keys.

    .venv/bin/python -m perf.oauth_flood [--flood 200] [--calls 20] [--peers 4]

`judge-mcp serve --transport http` runs as a process of its own with JUDGE_MCP_HTTP_TOKEN and an OAuth issuer; the
issuer (testkit/jwks_issuer.py) is, in turn: slow (answers after 4 s), unreachable (accepts connections and never
answers: the fetch times out after 5 s) and failing (HTTP 500). For each, the static-token client's judge_stats is
timed alone, then during a flood: `--flood` requests at once, each with a fresh token with a random `kid` (from
`--peers` loopback addresses); with `--sustained` each is sent again as soon as answered, for as long as the timed
calls last. `control` is the same flood of wrong static tokens against a server without OAuth: what any 401 costs.
Printed: the median and the worst of each, the added delay (flood median - alone median), and the key fetches the
issuer received. On 254e9ed the client waited 3.9-4.1 s (slow issuer, 200 tokens), 29.2 s (unreachable,
45 tokens), and 100 tokens made 138 fetches of a failing issuer; the goals are <= 50 ms added and <= 1 fetch per 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
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


async def flood(url: str, signer: JwksIssuer | None, width: int, peers: int, stop: asyncio.Event, once: bool) -> dict[int, int]:
    """`width` requests in flight at once, each with a fresh made-up token (a wrong static one without `signer`), until
    `stop` (`once`: each sent once): their answers' statuses."""
    statuses: dict[int, int] = {}
    clients = [httpx.AsyncClient(timeout=60, transport=httpx.AsyncHTTPTransport(local_address=f"127.0.0.{2 + i}", limits=httpx.Limits(
        max_connections=1000))) for i in range(peers)]
    tokens = [signer.bogus() if signer else f"wrong-static-token-{i:012d}" for i in range(width * 4)]

    async def worker(i: int) -> None:
        n = 0
        while not stop.is_set() or (once and n == 0):
            token = tokens[(i + n * width) % len(tokens)]
            n += 1
            try:
                answer = await clients[i % peers].post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}"})
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
            except httpx.HTTPError:
                statuses[0] = statuses.get(0, 0) + 1
            if once:
                return

    try:
        await asyncio.gather(*(worker(i) for i in range(width)))
    finally:
        for client in clients:
            await client.aclose()
    return statuses


async def scenario(url: str, signer: JwksIssuer | None, args: argparse.Namespace) -> tuple[list[float], list[float], dict[int, int]]:
    async with httpx.AsyncClient(timeout=60) as client:
        headers = await session(client, url)
        await timed_calls(client, url, headers, 3)  # warm
        alone = await timed_calls(client, url, headers, args.calls)
        stop = asyncio.Event()
        flooding = asyncio.ensure_future(flood(url, signer, args.flood, args.peers, stop, args.burst))
        await asyncio.sleep(0.05)  # the flood's first requests are in
        during = await timed_calls(client, url, headers, args.calls)
        stop.set()
        statuses = await flooding
    return alone, during, statuses


def run(kind: str, args: argparse.Namespace, signer: JwksIssuer) -> None:
    issuer: JwksIssuer | Blackhole
    issuer = Blackhole() if kind == "unreachable" else JwksIssuer(mode="slow" if kind == "slow" else "error", delay_s=4.0)
    with issuer, tempfile.TemporaryDirectory() as tmp:
        oauth = {"JUDGE_MCP_OAUTH_ISSUER": issuer.url, "JUDGE_MCP_OAUTH_AUDIENCE": "judge-perf", "JUDGE_MCP_OAUTH_JWKS_URL": issuer.jwks_url}
        env = server_env("http://127.0.0.1:9/v1", Path(tmp) / "judge.db", JUDGE_MCP_HTTP_TOKEN=STATIC, **(oauth if kind != "control" else {}))
        server = HttpServer(env, log=Path(tmp) / "http.log")
        try:
            alone, during, statuses = asyncio.run(scenario(server.url, signer if kind != "control" else None, args))
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
                        help="each flood request sent again as soon as answered (default: the flood is one burst)")
    args = parser.parse_args()
    with JwksIssuer() as signer:  # signs the made-up tokens (their kids are random: no issuer published them)
        for kind in KINDS:
            if args.only in (None, kind):
                run(kind, args, signer)


if __name__ == "__main__":
    main()
