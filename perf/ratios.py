"""Performance and cost ratios against a scripted OpenAI-compatible backend with fixed latency on 127.0.0.1.

    .venv/bin/python -m perf.ratios [--latency 0.2] [--repeats 5] [--calls 100] [--rounds 3] [--base OLD_CHECKOUT]

(from the checkout's root). The scripted backend is testkit/scripted_servers.py in a process of its own.

Not a test: it prints figures. Every figure is a ratio of things measured side by side in this one run, so machine
noise mostly cancels. The scripted backend answers every request after `--latency` seconds, so the ideal wall
time of a method whose calls are independent is one backend call.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import anyio
import httpx

from perf.profile_call import ROOT, cpu_s, measure, ours_of, server_env
from judge_mcp.runtime.app import App
from judge_mcp.backends.base import user
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from testkit.scripted_servers import ExternalScripted, Reply, ScriptedServer, prompt_text
from testkit.scripted_judges import UNIVERSAL_ANSWER, LweScript
from judge_mcp.calls.cache import CallCache
from judge_mcp.calls.context import CallContext
from judge_mcp.config.settings import DEFAULT_CONCURRENCY, load_settings
from judge_mcp.methods import lwe, pairwise
from judge_mcp.runtime.run import run_method
from judge_mcp.server.build import build_server
from judge_mcp.storage.sqlite import SqliteEngine


def fresh() -> str:
    return uuid.uuid4().hex[:8]


async def median_s(fn, repeats: int) -> float:
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        await fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def fan_out(server: "ExternalScripted", tmp: Path, repeats: int) -> float:
    """Each judgment as a tool call runs it (runtime/run.py: the call cache, new answers' rows
    written with the verdict in one transaction), at the default concurrency, against one backend call."""
    app = App(load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "scripted",
                             "JUDGE_MCP_DB": str(tmp / "fanout.db")}))
    backend = app.backend(None)

    async def call(i: int) -> None:
        await backend.complete(user(f"direct call {fresh()}"))

    async def compare(i: int) -> None:
        await run_method(app, "compare_pair", dict(prompt=f"q {fresh()}", response_a="a", response_b="b"))

    async def grade(i: int) -> None:
        await run_method(app, "grade_score_options", dict(instruction=f"q {fresh()}", options=[f"{c} {fresh()}" for c in "wxyz"]))

    async def flip4(i: int) -> None:
        await run_method(app, "infer_instruction_reward", dict(instruction="Write a haiku", responses=[f"{c} {fresh()}" for c in "wxyz"]))

    async def grade10(i: int) -> None:
        await run_method(app, "grade_score_options", dict(instruction=f"q {fresh()}", options=[f"option {c} {fresh()}" for c in range(10)]))

    async def flip16(i: int) -> None:
        await run_method(app, "infer_instruction_reward", dict(instruction="Write a haiku", responses=[f"response {c} {fresh()}" for c in range(16)]))

    def mib_png() -> str:  # a fresh 1 MiB image each time (PNG magic, random bytes: the server never decodes it)
        return "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + os.urandom(2**20 - 8)).decode()

    async def compare_images(i: int) -> None:
        await run_method(app, "compare_pair", dict(prompt=f"q {fresh()}", response_a="UI A", response_b="UI B",
                                                      response_a_images=[mib_png()], response_b_images=[mib_png()]))

    async def cached(i: int) -> None:
        await run_method(app, "compare_pair", dict(prompt="the same prompt", response_a="a", response_b="b"))

    # The floor beside ours: 16 concurrent requests of the same size sent by bare clients (httpx with one pool of 16
    # connections and response.json(), as the backends once sent them; aiohttp, the client the backends use now), and the
    # same 16 sent through the backend alone (no method, no cache).
    bare = httpx.AsyncClient(limits=httpx.Limits(max_connections=16, max_keepalive_connections=16))
    bare_aio = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16), cookie_jar=aiohttp.DummyCookieJar())
    body = {"model": "scripted", "temperature": 0, "max_tokens": 1024}

    async def bare_one() -> None:
        (await bare.post(f"{server.base_url}/chat/completions", json={**body, "messages": [{"role": "user", "content": f"bare {fresh()}"}]})).json()

    async def bare_aio_one() -> None:
        payload = json.dumps({**body, "messages": [{"role": "user", "content": f"bare {fresh()}"}]}).encode()
        async with bare_aio.post(f"{server.base_url}/chat/completions", data=payload, headers={"content-type": "application/json"}) as reply:
            json.loads(await reply.read())

    def sixteen(one_request):
        async def batch(i: int) -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(16):
                    tg.start_soon(one_request)
        return batch

    bare16, bare_aio16 = sixteen(bare_one), sixteen(bare_aio_one)

    async def direct16(i: int) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(call, i)

    await call(-1)  # warm the connection pool
    await bare16(-1)
    await bare_aio16(-1)
    await direct16(-1)
    await cached(-1)  # fill the cache
    one = await median_s(call, repeats)
    print(f"\n## Fan-out at the default concurrency ({backend.concurrency}; median of {repeats}; limit 1.0 = all calls of one judgment concurrent)")
    print(f"one backend call                     {one * 1000:8.1f} ms")
    for name, fn, calls in (("compare_pair (2 orders)", compare, 2), ("compare_pair, two 1 MiB images", compare_images, 2), ("grade_score_options (n = 4)", grade, 4), ("infer_instruction_reward (n = 4)", flip4, 4),
                             ("grade_score_options (n = 10, largest)", grade10, 10), ("infer_instruction_reward (n = 16, largest)", flip16, 16)):
        start_cpu = time.process_time()
        t = await median_s(fn, repeats)
        print(f"{name:<36} {t * 1000:8.1f} ms   ratio {t / one:5.2f}   (sequential would be {calls:.1f}; "
              f"client CPU {(time.process_time() - start_cpu) / repeats * 1000:.1f} ms per call)")
    for name, fn in (("16 requests, bare httpx client", bare16), ("16 requests, bare aiohttp client", bare_aio16),
                     ("16 requests, backend only (no method)", direct16)):
        start_cpu = time.process_time()
        t = await median_s(fn, repeats)
        print(f"{name:<36} {t * 1000:8.1f} ms   ratio {t / one:5.2f}   (client CPU {(time.process_time() - start_cpu) / repeats * 1000:.1f} ms per batch)")
    await bare.aclose()
    await bare_aio.close()
    hit = await median_s(cached, repeats)
    print(f"compare_pair answered from the cache {hit * 1000:8.1f} ms   ratio {hit / one:5.3f} of one backend call")
    await app.aclose()
    return one


async def _round_trips(client, tool: str, args: dict, repeats: int) -> float:
    await client.call_tool(tool, {**args, "prompt": fresh()})

    async def once(i: int) -> None:
        r = await client.call_tool(tool, {**args, "prompt": fresh()})
        assert not r.is_error, r.content

    return await median_s(once, repeats)


async def stdio_round_trip(params, tool: str, args: dict, repeats: int) -> float:
    from mcp import Client

    async with Client(params, read_timeout_seconds=120) as client:
        for _ in range(10):  # warm up
            await client.call_tool(tool, {**args, "prompt": fresh()})
        return await _round_trips(client, tool, args, repeats)


async def server_overhead(tmp: Path, repeats: int, rounds: int, base: Path | None) -> None:
    """A default compare_pair (both orders, sop) against a zero-latency backend, side by side with the SDK floor:
    round trips over stdio and HTTP (median of `repeats`), and the HTTP server's own CPU per call (/proc, medians
    of `rounds` interleaved runs); with `base`, the same server from an older checkout in the same rounds."""
    from mcp.client.stdio import StdioServerParameters

    args = {"response_a": "a", "response_b": "b"}
    noop = str(ROOT / "perf" / "noop_server.py")
    with ExternalScripted(UNIVERSAL_ANSWER, 0.0) as zero:
        backend = OpenAICompatBackend("bench", "scripted", base_url=zero.base_url, concurrency=DEFAULT_CONCURRENCY["openai"])
        await backend.complete(user("warm"))

        async def call(i: int) -> None:
            await backend.complete(user(f"direct call {fresh()}"))

        one = await median_s(call, repeats)
        await backend.aclose()
        print(f"\n## Per tool call: default compare_pair (both orders, sop) against a zero-latency backend (median of {repeats})")
        print(f"one direct backend call              {one * 1000:8.2f} ms")
        floor_stdio = await stdio_round_trip(StdioServerParameters(command=sys.executable, args=[noop, "stdio"]), "noop", {}, repeats)
        env = server_env(zero.base_url, tmp / "stdio.db")
        ours_stdio = await stdio_round_trip(
            StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env, cwd=str(ROOT)), "compare_pair", args, repeats
        )
        print(f"SDK floor, do-nothing tool, stdio    {floor_stdio * 1000:8.2f} ms")
        print(f"compare_pair over stdio              {ours_stdio * 1000:8.2f} ms")
        print(f"  ours beyond the SDK floor (stdio)  {(ours_stdio - one - floor_stdio) * 1000:8.2f} ms   (round trip - one backend call - floor)")

        pair_cpu = await backend_pair_cpu(zero.base_url, repeats, rounds)
        in_process: dict[str, list[dict]] = {"ours": [], "base": []}
        for _ in range(rounds):  # judge-mcp's own CPU per tool call, in process (profile_call.ours_in_process)
            in_process["ours"].append(ours_of(ROOT, zero.base_url, repeats, 1))
            if base is not None:
                in_process["base"].append(ours_of(base, zero.base_url, repeats, 1))
        runs: dict[str, list[dict]] = {"floor": [], "shaped": [], "ours": [], "base": []}
        env = server_env(zero.base_url, tmp / "http.db")
        serve = ["judge-mcp", "serve", "--transport", "http", "--port", "PORT"]
        for r in range(rounds):  # interleaved, so machine load drifts hit every server alike
            runs["floor"].append(await measure([noop, "http", "PORT"], env, "noop", {}, repeats))
            runs["shaped"].append(await measure([noop, "http", "PORT"], env, "shaped", args, repeats))
            runs["ours"].append(await measure(serve, env, "compare_pair", args, repeats))
            if base is not None:
                runs["base"].append(await measure(serve, server_env(zero.base_url, tmp / f"base{r}.db"), "compare_pair", args, repeats, root=base))

    def med(name: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[name]) * 1000

    print(f"over streamable HTTP (bearer auth): medians of {rounds} interleaved server runs of {repeats} calls; server CPU from /proc")
    print("                                                   round trip   server CPU per call")
    print(f"SDK floor, do-nothing tool (noop)                  {med('floor', 'wall'):8.2f} ms   {med('floor', 'cpu'):6.2f} ms")
    print(f"SDK, compare_pair's shape, fixed result (shaped)   {med('shaped', 'wall'):8.2f} ms   {med('shaped', 'cpu'):6.2f} ms")
    print(f"two concurrent backend calls, direct (client CPU)               {pair_cpu:6.2f} ms")
    for name, label in (("ours", "compare_pair"), ("base", f"compare_pair, {base.name if base else ''}")):
        if not runs[name]:
            continue
        print(f"{label:<50} {med(name, 'wall'):8.2f} ms   {med(name, 'cpu'):6.2f} ms")
        print(f"  beyond the SDK floor                             {med(name, 'wall') - one * 1000 - med('floor', 'wall'):8.2f} ms   "
              f"{med(name, 'cpu') - med('floor', 'cpu'):6.2f} ms   (round trip: minus one backend call too)")
        print(f"  ours: beyond the shaped tool and the two calls                {med(name, 'cpu') - med('shaped', 'cpu') - pair_cpu:6.2f} ms")
    print("per-run server CPU (ms): " + "; ".join(f"{k} " + " ".join(f"{run['cpu'] * 1000:.2f}" for run in v) for k, v in runs.items() if v))
    print(f"in process (App.run of a default compare_pair vs its two requests sent directly; CPU of all threads, medians of {rounds} runs of {repeats}):")
    for name, label in (("ours", "this checkout"), ("base", base.name if base else "")):
        if in_process[name]:
            tool, direct = (statistics.median(run[k] for run in in_process[name]) for k in ("tool", "direct"))
            ours = statistics.median(run["ours"] for run in in_process[name])
            print(f"  {label:<20} App.run {tool:6.2f} ms   two direct calls {direct:6.2f} ms   ours {ours:6.2f} ms   "
                  "(runs: " + " ".join(f"{run['ours']:.2f}" for run in in_process[name]) + ")")


async def backend_pair_cpu(base_url: str, repeats: int, rounds: int) -> float:
    """CPU (this process) of compare_pair's two requests sent concurrently straight to the backend, in ms."""
    backend = OpenAICompatBackend("bench", "scripted", base_url=base_url, concurrency=DEFAULT_CONCURRENCY["openai"])
    system, schema = pairwise.system_prompt("worse", "sop", True), pairwise.verdict_schema("sop")

    def request():
        return user(pairwise.user_prompt(f"q {fresh()}", "a", "b"), system=system, json_schema=schema, max_tokens=pairwise.MAX_TOKENS["sop"])

    async def pair() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(backend.complete, request())
            tg.start_soon(backend.complete, request())

    for _ in range(10):
        await pair()
    cpus = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(repeats):
            await pair()
        cpus.append((time.process_time() - start) / repeats)
    await backend.aclose()
    return statistics.median(cpus) * 1000


async def throughput(server: "ExternalScripted", tmp: Path, call_s: float, n_calls: int) -> None:
    from mcp import Client

    print(f"\n## Throughput: {n_calls} concurrent compare_pair tool calls (in-memory MCP client, {2 * n_calls} backend calls)")
    for concurrency in (1, 8, 32, 64):
        settings = load_settings(
            {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "scripted",
             "JUDGE_MCP_DB": str(tmp / f"tp{concurrency}.db"), "JUDGE_MCP_CONCURRENCY": str(concurrency)}
        )
        app = App(settings)
        mcp_server = build_server(app)
        durations: list[float] = []
        async with Client(mcp_server) as client:
            start = time.perf_counter()
            backend_cpu, my_cpu = cpu_s(server.proc.pid), time.process_time()

            async def one(i: int) -> None:
                t0 = time.perf_counter()
                r = await client.call_tool("compare_pair", {"prompt": f"q{i} {fresh()}", "response_a": "a", "response_b": "b"})
                assert not r.is_error, r.content
                durations.append(time.perf_counter() - t0)

            async with anyio.create_task_group() as tg:
                for i in range(n_calls):
                    tg.start_soon(one, i)
            wall = time.perf_counter() - start
            backend_cpu, my_cpu = cpu_s(server.proc.pid) - backend_cpu, time.process_time() - my_cpu
        ideal = math.ceil(2 * n_calls / concurrency) * call_s  # rounds of `concurrency` calls, each one backend call long
        print(
            f"backend concurrency {concurrency:>2}: {wall:6.2f} s  ideal {ideal:5.2f} s  ratio {wall / ideal:5.2f}   "
            f"{n_calls / wall:6.1f} calls/s   per-call latency median {statistics.median(durations):5.2f} s, max {max(durations):5.2f} s   "
            f"CPU per tool call: this process {my_cpu / n_calls * 1000:5.2f} ms, scripted backend {backend_cpu / n_calls * 1000:5.2f} ms"
        )
        await app.aclose()


async def lwe_cost(tmp: Path, cases: int) -> None:
    print(f"\n## Selective LWE cost relative to vanilla ({cases} cases; vanilla = the plain prompt in both orders)")
    print("inconsistent share | vanilla calls/case  chars/case | selective-LWE calls/case  chars/case | ratio calls  chars")
    for share in (0.0, 0.25, 0.5, 1.0):
        biased, consistent = LweScript("first"), LweScript("consistent")

        def responder(payload: dict) -> Reply | str:
            return biased(payload) if "BIASED" in prompt_text(payload) else consistent(payload)

        with ScriptedServer(responder) as server:
            backend = OpenAICompatBackend("bench", "scripted", base_url=server.base_url, concurrency=DEFAULT_CONCURRENCY["openai"])
            store = SqliteEngine(tmp / f"lwe{share}.db")
            cache = CallCache(None)  # no cache: count every call
            n_biased = round(share * cases)

            def case(i: int) -> dict:
                tag = "BIASED" if i < n_biased else "plain"
                return {"prompt": f"Question {i} ({tag})?", "response_a": f"GOOD answer {i}", "response_b": f"weak answer {i}"}

            def chars(requests: list[dict], first: int) -> int:
                return sum(len(prompt_text(p)) for p in requests[first:])

            start = len(server.requests)
            for i in range(cases):
                await lwe.vanilla_pair(CallContext(backend, cache, store), **case(i))
            v_calls = len(server.requests) - start
            v_chars = chars(server.requests, start)
            start = len(server.requests)
            for i in range(cases):
                await lwe.lwe_judge(CallContext(backend, cache, store), session="bench", **case(i))
            l_calls = len(server.requests) - start
            l_chars = chars(server.requests, start)
            await backend.aclose()
            store.close()
        print(
            f"{share:>18.0%} | {v_calls / cases:18.2f} {v_chars / cases:11.0f} | {l_calls / cases:24.2f} {l_chars / cases:11.0f} | "
            f"{l_calls / v_calls:11.2f} {l_chars / v_chars:6.2f}"
        )
    print("(prompt characters sent; the paper reports Selective LWE at 3.9x vanilla's cost on its data)")


async def main(latency: float, repeats: int, n_calls: int, lwe_cases: int, overhead_calls: int, rounds: int, base: Path | None) -> None:
    load = os.getloadavg()
    kind = "threaded" if ExternalScripted.threaded else "asyncio"
    print(f"scripted backend (own process, {kind}): fixed latency {latency * 1000:.0f} ms on 127.0.0.1; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    gc.collect()  # as `judge-mcp serve` does once it has started (runtime/startup.py's settle_heap)
    gc.freeze()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with ExternalScripted(UNIVERSAL_ANSWER, latency) as server:
            one = await fan_out(server, tmp, repeats)
            await throughput(server, tmp, one, n_calls)
        await server_overhead(tmp, overhead_calls, rounds, base)
        if lwe_cases:
            await lwe_cost(tmp, lwe_cases)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="scripted backend latency in seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100, help="concurrent compare_pair calls in the throughput test")
    parser.add_argument("--lwe-cases", type=int, default=16, help="0 skips the LWE cost section")
    parser.add_argument("--overhead-calls", type=int, default=200, help="sequential calls per measurement of the per-call section")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved server runs per row of the per-call section")
    parser.add_argument("--base", type=Path, help="an older checkout (e.g. `git archive` of a commit) measured side by side in the per-call section")
    parser.add_argument("--threaded-backend", action="store_true", help="use the thread-per-connection scripted server the tests use")
    args = parser.parse_args()
    ExternalScripted.threaded = args.threaded_backend
    anyio.run(main, args.latency, args.repeats, args.calls, args.lwe_cases, args.overhead_calls, args.rounds, args.base)
