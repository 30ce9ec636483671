"""Replicas on one PostgreSQL database, measured: judge-mcp's server CPU per compare_pair on PostgreSQL vs SQLite;
calls/s with 1, 2 and 4 stateless replicas behind nginx (round-robin) against a scripted backend of fixed latency,
as a ratio to the ideal; backend calls per unique request across replicas (single-flight: must be 1.00).

    .venv/bin/python -m perf.replicas [--latency 0.1] [--calls 200] [--rounds 3] [--per-replica 4]

Not a test: it prints figures (docs/deployment.md keeps them). It starts its own PostgreSQL (the machine's server
binaries, as the tests do: testkit/postgres_server.py), nginx (testkit/replica_set.py), the replicas (`judge-mcp serve
--transport http --stateless`) and a counting scripted backend in a process of its own, all on loopback. The load
is sent as plain JSON-RPC POSTs from one aiohttp session (stateless mode needs no initialize), so the client's own
CPU stays small next to the servers'. Server CPU comes from /proc (user + system time of each process).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from testkit.scripted_servers import read_request

from testkit.postgres_server import PostgresServer
from testkit.replica_set import Replicas
from testkit.server_process import HttpServer, server_env

CHECKOUT = Path(__file__).resolve().parent.parent  # the backend process runs `python -m perf.replicas` from here

ANSWER = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})


# ---- the counting backend (its own process) ----------------------------------------------------------------------
async def serve_counting(delay_s: float) -> None:
    """OpenAI-compatible: every POST answered with ANSWER after `delay_s`; GET /stats -> requests and distinct bodies."""
    seen: dict[str, int] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, raw = await read_request(reader)
                if head.startswith(b"GET /stats"):
                    body = json.dumps({"requests": sum(seen.values()), "unique": len(seen)}).encode()
                else:
                    payload = json.loads(raw or b"{}")
                    digest = hashlib.sha256(raw).hexdigest()
                    seen[digest] = seen.get(digest, 0) + 1
                    if delay_s:
                        await asyncio.sleep(delay_s)
                    body = json.dumps({
                        "id": "x", "object": "chat.completion", "created": int(time.time()), "model": payload.get("model", "m"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


class Backend:
    def __init__(self, delay_s: float):
        self.proc = subprocess.Popen([sys.executable, "-m", "perf.replicas", "--backend", str(delay_s)], cwd=CHECKOUT,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    async def stats(self, session) -> dict[str, int]:
        async with session.get(self.base_url.rsplit("/v1", 1)[0] + "/stats") as r:
            return json.loads(await r.text())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


# ---- load ------------------------------------------------------------------------------------------------------------
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def tool_call(session, url: str, args: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "compare_pair", "arguments": args}}
    async with session.post(url, data=json.dumps(body), headers=HEADERS) as r:
        text = await r.text()
    for line in text.splitlines():
        if line.startswith("data:"):
            message = json.loads(line[5:])
            if message.get("id") == 1:
                result = message.get("result") or {}
                if "error" in message or result.get("isError"):
                    raise RuntimeError(str(message)[:300])
                return result["structuredContent"]
    raise RuntimeError(f"no answer: {text[:300]}")


async def run_load(url: str, calls: list[dict], concurrency: int) -> float:
    """Send `calls` with at most `concurrency` in flight; the wall time in seconds."""
    import aiohttp

    queue = list(reversed(calls))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency * 2)) as session:
        async def worker() -> None:
            while queue:
                await tool_call(session, url, queue.pop())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started


def fresh_pairs(n: int) -> list[dict]:
    tag = uuid.uuid4().hex[:8]
    return [{"prompt": f"question {tag}-{k}", "response_a": f"answer a {k}", "response_b": f"answer b {k}"} for k in range(n)]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root_pid: int) -> dict[int, float]:
    """CPU of `root_pid` and its children (a PostgreSQL cluster: the postmaster and its backends), by pid."""
    out: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == root_pid or ppid == root_pid:
            out[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


# ---- the three measurements ----------------------------------------------------------------------------------------
async def cpu_per_call(pg, backend: Backend, tmp: Path, calls: int, rounds: int) -> None:
    postmaster = int((pg.root / "data" / "postmaster.pid").read_text().split()[0])
    runs: dict[str, list[tuple[float, float]]] = {"sqlite": [], "postgresql": []}
    for r in range(rounds):  # interleaved, so drifts of the machine's load hit both engines alike
        for engine in ("sqlite", "postgresql"):
            db = str(tmp / f"cpu{r}.db") if engine == "sqlite" else pg.create_database(f"cpu_{r}_{uuid.uuid4().hex[:6]}")
            server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_HTTP_STATELESS="1", JUDGE_MCP_MAX_RETRIES="0"), log=tmp / f"cpu-{engine}-{r}.log")
            url = f"http://127.0.0.1:{server.port}/mcp"
            try:
                await run_load(url, fresh_pairs(20), 8)  # warm: imports, first connections
                server_cpu, db_cpu = cpu_s(server.proc.pid), tree_cpu_s(postmaster)
                await run_load(url, fresh_pairs(calls), 8)
                server_cpu = cpu_s(server.proc.pid) - server_cpu
                db_after = tree_cpu_s(postmaster)
                db_used = sum(v - db_cpu.get(pid, 0.0) for pid, v in db_after.items()) if engine == "postgresql" else 0.0
                runs[engine].append((server_cpu / calls * 1000, db_used / calls * 1000))
            finally:
                server.stop()
    print(f"\n## Server CPU per compare_pair ({calls} calls at 8 in flight, zero-latency backend; medians of {rounds} interleaved runs)")
    for engine, values in runs.items():
        ours = statistics.median(v[0] for v in values)
        dbs = statistics.median(v[1] for v in values)
        extra = f"   PostgreSQL server processes {dbs:5.2f} ms" if engine == "postgresql" else ""
        print(f"{engine:<11} judge-mcp {ours:5.2f} ms{extra}   (runs: " + " ".join(f"{v[0]:.2f}" for v in values) + ")")
    ratio = statistics.median(v[0] for v in runs["postgresql"]) / statistics.median(v[0] for v in runs["sqlite"])
    print(f"judge-mcp's CPU per call, PostgreSQL / SQLite: {ratio:.2f}")


async def scaling(pg, backend: Backend, tmp: Path, latency: float, per_replica: int, calls_per_replica: int) -> None:
    print(f"\n## Calls/s through nginx, backend latency {latency * 1000:.0f} ms, JUDGE_MCP_CONCURRENCY={per_replica} per replica")
    print("ideal = replicas x concurrency / (2 requests per compare_pair x latency); clients keep 2x that in flight")
    for n in (1, 2, 4):
        db = pg.create_database(f"scale_{n}_{uuid.uuid4().hex[:6]}")
        folder = tmp / f"scale{n}"
        folder.mkdir()
        replicas = Replicas(n, db, backend.base_url, folder, JUDGE_MCP_CONCURRENCY=str(per_replica))
        try:
            await run_load(replicas.url, fresh_pairs(10 * n), n * per_replica)  # warm
            calls = calls_per_replica * n
            wall = await run_load(replicas.url, fresh_pairs(calls), n * per_replica)
        finally:
            replicas.stop()
        ideal = n * per_replica / (2 * latency)
        print(f"{n} replica{'s' if n > 1 else ' '}: {calls / wall:7.1f} calls/s   ideal {ideal:6.1f}   ratio {calls / wall / ideal:5.2f}   ({calls} calls in {wall:5.2f} s)")


async def single_flight(pg, latency: float, tmp: Path, replicas_n: int, unique: int, askers: int) -> None:
    import aiohttp

    backend = Backend(latency)
    db = pg.create_database(f"flight_{uuid.uuid4().hex[:6]}")
    folder = tmp / "flight"
    folder.mkdir()
    replicas = Replicas(replicas_n, db, backend.base_url, folder, JUDGE_MCP_CONCURRENCY="64")
    try:
        pairs = fresh_pairs(unique)
        calls = [p for p in pairs for _ in range(askers)]  # each unique pair asked by `askers` clients at once
        wall = await run_load(replicas.url, calls, unique * askers)
        async with aiohttp.ClientSession() as session:
            stats = await backend.stats(session)
        served = replicas.nginx.served_by()
    finally:
        replicas.stop()
        backend.stop()
    print(f"\n## Single-flight across {replicas_n} replicas: {unique} unique compare_pair calls, each sent by {askers} clients at once ({len(calls)} calls, {wall:.2f} s)")
    print(f"replicas that served calls: {len(served)} ({', '.join(str(v) for v in served.values())} POSTs)")
    print(f"backend requests {stats['requests']}, distinct request bodies {stats['unique']}: "
          f"backend calls per unique request {stats['requests'] / stats['unique']:.2f}")


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {os.cpu_count()} cores, load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pg = PostgresServer.start()
    tmp = Path(tempfile.mkdtemp(prefix="judge-mcp-replicas-"))
    zero, timed = Backend(0.0), Backend(args.latency)
    try:
        await cpu_per_call(pg, zero, tmp, args.calls, args.rounds)
        await scaling(pg, timed, tmp, args.latency, args.per_replica, args.calls_per_replica)
        await single_flight(pg, args.latency, tmp, 4, 20, 4)
    finally:
        zero.stop()
        timed.stop()
        pg.close()
    print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--backend":
        asyncio.run(serve_counting(float(sys.argv[2])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.1, help="the scripted backend's fixed latency in seconds (scaling, single-flight)")
    parser.add_argument("--calls", type=int, default=200, help="compare_pair calls per CPU measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the CPU measurement")
    parser.add_argument("--per-replica", type=int, default=4, help="JUDGE_MCP_CONCURRENCY of each replica in the scaling runs")
    parser.add_argument("--calls-per-replica", type=int, default=60, help="calls per replica in each scaling run")
    asyncio.run(main(parser.parse_args()))
