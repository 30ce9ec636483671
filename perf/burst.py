"""A burst of concurrent compare_pair calls at the default backend concurrency (the adaptive limit) and at a fixed 16
(the old default), side by side in one run:

1. against a scripted backend (a process of its own) that takes every request and answers after `--latency`:
   the burst's wall time as a ratio to one backend latency (1.0 = every call in flight at once);
   The adaptive limit is measured with its slow start and without it (starting at its ceiling, as before issue 38).
2. against a scripted backend that takes 16 requests at once and answers 429 past that: the 429s it answered,
   calls that failed, and where the limit settled, over two bursts; then the same for a second process (App) on the
   same database, which starts at the limit the first one learned.

    .venv/bin/python -m perf.burst [--calls 100] [--latency 0.5]

Calls go through the in-memory MCP client (`mcp.Client` on the server object), so the figures are judge-mcp's and
the SDK's, not a transport's; but the client runs on the server's event loop and core (its validation of each
result against the tool's output schema included), where a real client has a process of its own. The client lists
the tools before a burst is timed, and the heap is frozen after start-up as `judge-mcp serve` freezes it. The first
burst comes after the server's warm-up (the judging methods' and the HTTP client's imports, which `serve` runs once a
client has finished its handshake) has finished, so it measures a burst that opens the backend connections, not the
process's first imports (those are perf/cold_start.py's).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from judge_mcp.backends import limiter
from judge_mcp.backends.limiter import SLOW_START
from judge_mcp.runtime.app import App
from judge_mcp.runtime.startup import settle_heap, warm_up
from testkit.scripted_servers import ExternalScripted, Reply, ScriptedServer
from judge_mcp.config.settings import load_settings
from judge_mcp.server.build import build_server

ANSWER = '{"verdict": "[[A>B]]"}'


def env(base_url: str, db: Path, concurrency: int | None) -> dict[str, str]:
    out = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted", "JUDGE_MCP_DB": str(db)}
    return out | ({"JUDGE_MCP_CONCURRENCY": str(concurrency)} if concurrency else {})


async def burst(app: App, calls: int) -> tuple[float, int]:
    """(wall seconds, failed calls) for `calls` concurrent compare_pair tool calls."""
    from mcp import Client

    failed = 0
    async with Client(build_server(app)) as client:
        await client.list_tools()  # as a client does before it calls (else the first calls of the burst list them)

        async def one(i: int) -> None:
            nonlocal failed
            result = await client.call_tool("compare_pair", {"prompt": f"q{i} {uuid.uuid4().hex}", "response_a": "a", "response_b": "b"})
            failed += bool(result.is_error)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(one, i)
        return time.perf_counter() - start, failed


class Capacity:
    """Takes `capacity` requests at once (each answered after `delay_s`); 429 past that. Counts the 429s."""

    def __init__(self, capacity: int, delay_s: float):
        self.capacity, self.delay_s, self.refused = capacity, delay_s, 0
        self.server = ScriptedServer(self.respond)

    def respond(self, payload: dict) -> Reply:
        if self.server.in_flight > self.capacity:
            self.refused += 1
            return Reply(status=429)
        return Reply(content=ANSWER, delay_s=self.delay_s)


async def main(calls: int, latency: float) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp, ExternalScripted(ANSWER, latency) as backend:
        print(f"\n## A burst of {calls} concurrent compare_pair calls ({2 * calls} backend requests), backend latency {latency * 1000:.0f} ms")
        print("| backend concurrency | first burst | ratio to one latency | second burst | ratio | failed calls |")
        print("|---|---|---|---|---|---|")
        for label, concurrency, slow in (("default (adaptive, ceiling 256, slow start)", None, True),
                                         ("default without slow start (starting at the ceiling, as before)", None, False),
                                         ("fixed 16 (the old default)", 16, True)):
            limiter.SLOW_START = SLOW_START if slow else 10**9  # read when a backend's limit is made (at its first call)
            app = App(load_settings(env(backend.base_url, Path(tmp) / f"b{concurrency}{slow}.db", concurrency)))
            settle_heap()  # as `judge-mcp serve` does once it has started (else each full collection scans every module)
            for thread in warm_up(app.settings):  # the imports `serve` starts once a client has finished its handshake
                thread.join()  # done during the client's think time (cold start's subject, perf/cold_start.py)
            cold, failed = await burst(app, calls)  # opens the connections
            wall, failed_again = await burst(app, calls)  # on kept-alive connections
            print(f"| {label} | {cold:.2f} s | {cold / latency:.2f}x | {wall:.2f} s | {wall / latency:.2f}x | {failed + failed_again} |")
            await app.aclose()

        print(f"\n## Against a backend that takes 16 at once and answers 429 past that (latency 200 ms), two bursts of {calls}")
        print("| backend concurrency | 429s, first burst | 429s, second burst | failed calls | limit after |")
        print("|---|---|---|---|---|")
        default, before, fixed = Capacity(16, 0.2), Capacity(16, 0.2), Capacity(16, 0.2)
        with default.server, before.server, fixed.server:  # one server for both default rows: its URL is the backend's identity
            rows = (("default (adaptive, ceiling 256, slow start), first process", default, None, True),
                    ("default, the next process on that database", default, None, True),
                    ("default without slow start (as before), first process", before, None, False),
                    ("fixed 16 (the old default)", fixed, 16, True))
            for label, capped, concurrency, slow in rows:
                limiter.SLOW_START = SLOW_START if slow else 10**9
                app = App(load_settings(env(capped.server.base_url, Path(tmp) / f"c{concurrency}{slow}.db", concurrency)))
                before = capped.refused
                _, failed_first = await burst(app, calls)
                first = capped.refused - before
                _, failed_second = await burst(app, calls)
                limit = app.backend(None).limit.limit
                await app.aclose()  # keeps what the limit learned for the next process on this database
                print(f"| {label} | {first} | {capped.refused - before - first} | {failed_first + failed_second} | {limit} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.5)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.latency)
