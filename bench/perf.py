"""Performance and cost ratios against a scripted OpenAI-compatible backend with fixed latency on 127.0.0.1.

    .venv/bin/python bench/perf.py [--latency 0.2] [--repeats 5] [--quick]

Not a test: it prints figures. Every figure is a ratio of things measured side by side in this one run, so machine
noise mostly cancels. The scripted backend answers every request after `--latency` seconds, so the ideal wall
time of a method whose calls are independent is one backend call.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judge_mcp.app import App  # noqa: E402
from judge_mcp.backends.base import user  # noqa: E402
from judge_mcp.methods.call_cache import CallCache  # noqa: E402
from judge_mcp.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from judge_mcp.config import DEFAULT_CONCURRENCY, load_settings  # noqa: E402
from judge_mcp.methods import flip, grade_score, lwe, pairwise  # noqa: E402
from judge_mcp.methods.judge import Judge  # noqa: E402
from judge_mcp.server import build_server  # noqa: E402
from judge_mcp.store import Store  # noqa: E402
from tests.lwe_script import LweScript  # noqa: E402
from tests.scripted import Reply, ScriptedServer, prompt_text, server_env  # noqa: E402


def universal_answer(payload: dict) -> str:
    """One JSON object every method's parser accepts (compare_pair, FLIP, Grade Score)."""
    return json.dumps(
        {
            "own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]",
            "REASONING": "r", "INFERRED INSTRUCTION": "Write a haiku about the sea.",
            "explanation": "e", "selection": 1, "Selection": "Option 1",
        }
    )


def fresh() -> str:
    return uuid.uuid4().hex[:8]


async def median_s(fn, repeats: int) -> float:
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        await fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def fan_out(server: "ExternalScripted", tmp: Path, repeats: int) -> float:
    store = Store(tmp / "fanout.db")
    backend = OpenAICompatBackend("bench", "scripted", base_url=server.base_url, concurrency=DEFAULT_CONCURRENCY["openai"])
    cache = CallCache(store)

    def judge() -> Judge:
        return Judge(backend, cache, store)

    async def call(i: int) -> None:
        await backend.complete(user(f"direct call {fresh()}"))

    async def compare(i: int) -> None:
        await pairwise.compare_pair(judge(), prompt=f"q {fresh()}", response_a="a", response_b="b")

    async def grade(i: int) -> None:
        await grade_score.grade_score_options(judge(), instruction=f"q {fresh()}", options=[f"{c} {fresh()}" for c in "wxyz"])

    async def flip4(i: int) -> None:
        await flip.infer_instruction_reward(judge(), instruction="Write a haiku", responses=[f"{c} {fresh()}" for c in "wxyz"])

    async def grade10(i: int) -> None:
        await grade_score.grade_score_options(judge(), instruction=f"q {fresh()}", options=[f"option {c} {fresh()}" for c in range(10)])

    async def flip16(i: int) -> None:
        await flip.infer_instruction_reward(judge(), instruction="Write a haiku", responses=[f"response {c} {fresh()}" for c in range(16)])

    async def cached(i: int) -> None:
        await pairwise.compare_pair(judge(), prompt="the same prompt", response_a="a", response_b="b")

    await call(-1)  # warm the connection pool
    await cached(-1)  # fill the cache
    one = await median_s(call, repeats)
    print(f"\n## Fan-out at the default concurrency ({backend.concurrency}; median of {repeats}; limit 1.0 = all calls of one judgment concurrent)")
    print(f"one backend call                     {one * 1000:8.1f} ms")
    for name, fn, calls in (("compare_pair (2 orders)", compare, 2), ("grade_score_options (n = 4)", grade, 4), ("infer_instruction_reward (n = 4)", flip4, 4),
                             ("grade_score_options (n = 10, largest)", grade10, 10), ("infer_instruction_reward (n = 16, largest)", flip16, 16)):
        t = await median_s(fn, repeats)
        print(f"{name:<36} {t * 1000:8.1f} ms   ratio {t / one:5.2f}   (sequential would be {calls:.1f})")
    hit = await median_s(cached, repeats)
    print(f"compare_pair answered from the cache {hit * 1000:8.1f} ms   ratio {hit / one:5.3f} of one backend call")
    await backend.aclose()
    store.close()
    return one


async def _round_trips(client, tool: str, args: dict, repeats: int) -> float:
    await client.call_tool(tool, {**args, "prompt": fresh()})

    async def once(i: int) -> None:
        r = await client.call_tool(tool, {**args, "prompt": fresh()})
        assert not r.is_error, r.content

    return await median_s(once, repeats)


async def _wait_port(port: int) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            await anyio.sleep(0.1)


async def sdk_floor(repeats: int) -> tuple[float, float]:
    """A do-nothing tool's round trip over stdio and over HTTP (bench/noop_server.py): what the SDK costs."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    noop = str(ROOT / "bench" / "noop_server.py")
    async with Client(StdioServerParameters(command=sys.executable, args=[noop, "stdio"]), read_timeout_seconds=60) as client:
        stdio = await _round_trips(client, "noop", {}, repeats)
    port = free_port()
    proc = subprocess.Popen([sys.executable, noop, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await _wait_port(port)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(timeout=60) as http:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                http_t = await _round_trips(client, "noop", {}, repeats)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return stdio, http_t


async def server_overhead(server: "ExternalScripted", tmp: Path, repeats: int, one: float) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    args = {"prompt": "q", "response_a": "a", "response_b": "b", "swap": False, "template": "direct"}
    print(f"\n## Server overhead per tool call (compare_pair, one order; median of {repeats})")
    print(f"direct backend call                  {one * 1000:8.1f} ms")
    floor_stdio, floor_http = await sdk_floor(repeats)
    print(f"SDK floor, do-nothing tool, stdio    {floor_stdio * 1000:8.1f} ms")
    print(f"SDK floor, do-nothing tool, HTTP     {floor_http * 1000:8.1f} ms")

    env = server_env(server.base_url, tmp / "stdio.db")
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env, cwd=str(ROOT))
    async with Client(params, read_timeout_seconds=120) as client:
        await client.call_tool("compare_pair", {**args, "prompt": fresh()})

        async def over_stdio(i: int) -> None:
            r = await client.call_tool("compare_pair", {**args, "prompt": fresh()})
            assert not r.is_error, r.content

        t = await median_s(over_stdio, repeats)
    print(f"tool call over stdio                 {t * 1000:8.1f} ms   overhead {(t - one) * 1000:6.1f} ms   ratio {t / one:5.2f}")
    print(f"  ours beyond the SDK floor (stdio)  {(t - one - floor_stdio) * 1000:8.1f} ms")

    port = free_port()
    token = "bench-" + fresh()
    proc = subprocess.Popen(
        [sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", str(port)],
        env=server_env(server.base_url, tmp / "http.db", JUDGE_MCP_HTTP_TOKEN=token), cwd=str(ROOT),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_port(port)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120) as http:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                await client.call_tool("compare_pair", {**args, "prompt": fresh()})

                async def over_http(i: int) -> None:
                    r = await client.call_tool("compare_pair", {**args, "prompt": fresh()})
                    assert not r.is_error, r.content

                t = await median_s(over_http, repeats)
        print(f"tool call over streamable HTTP       {t * 1000:8.1f} ms   overhead {(t - one) * 1000:6.1f} ms   ratio {t / one:5.2f}")
        print(f"  ours beyond the SDK floor (HTTP)   {(t - one - floor_http) * 1000:8.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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

            async def one(i: int) -> None:
                t0 = time.perf_counter()
                r = await client.call_tool("compare_pair", {"prompt": f"q{i} {fresh()}", "response_a": "a", "response_b": "b"})
                assert not r.is_error, r.content
                durations.append(time.perf_counter() - t0)

            async with anyio.create_task_group() as tg:
                for i in range(n_calls):
                    tg.start_soon(one, i)
            wall = time.perf_counter() - start
        ideal = math.ceil(2 * n_calls / concurrency) * call_s  # rounds of `concurrency` calls, each one backend call long
        print(
            f"backend concurrency {concurrency:>2}: {wall:6.2f} s  ideal {ideal:5.2f} s  ratio {wall / ideal:5.2f}   "
            f"{n_calls / wall:6.1f} calls/s   per-call latency median {statistics.median(durations):5.2f} s, max {max(durations):5.2f} s"
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
            store = Store(tmp / f"lwe{share}.db")
            cache = CallCache(None)  # no cache: count every call
            n_biased = round(share * cases)

            def case(i: int) -> dict:
                tag = "BIASED" if i < n_biased else "plain"
                return {"prompt": f"Question {i} ({tag})?", "response_a": f"GOOD answer {i}", "response_b": f"weak answer {i}"}

            def chars(requests: list[dict], first: int) -> int:
                return sum(len(prompt_text(p)) for p in requests[first:])

            start = len(server.requests)
            for i in range(cases):
                await lwe.vanilla_pair(Judge(backend, cache, store), **case(i))
            v_calls = len(server.requests) - start
            v_chars = chars(server.requests, start)
            start = len(server.requests)
            for i in range(cases):
                await lwe.lwe_judge(Judge(backend, cache, store), session="bench", **case(i))
            l_calls = len(server.requests) - start
            l_chars = chars(server.requests, start)
            await backend.aclose()
            store.close()
        print(
            f"{share:>18.0%} | {v_calls / cases:18.2f} {v_chars / cases:11.0f} | {l_calls / cases:24.2f} {l_chars / cases:11.0f} | "
            f"{l_calls / v_calls:11.2f} {l_chars / v_chars:6.2f}"
        )
    print("(prompt characters sent; the paper reports Selective LWE at 3.9x vanilla's cost on its data)")


class ExternalScripted:
    """tests/scripted.py run in its own process, so the backend does not share this process's GIL."""

    def __init__(self, answer: str, latency: float):
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "scripted.py"), "--answer", answer, "--delay", str(latency)],
            stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
        )
        self.base_url = self.proc.stdout.readline().strip()

    def __enter__(self) -> "ExternalScripted":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def main(latency: float, repeats: int, n_calls: int, lwe_cases: int) -> None:
    load = os.getloadavg()[0]
    print(f"scripted backend (own process): fixed latency {latency * 1000:.0f} ms on 127.0.0.1; python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load:.2f}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with ExternalScripted(universal_answer({}), latency) as server:
            one = await fan_out(server, tmp, repeats)
            await server_overhead(server, tmp, repeats, one)
            await throughput(server, tmp, one, n_calls)
        await lwe_cost(tmp, lwe_cases)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="scripted backend latency in seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100, help="concurrent compare_pair calls in the throughput test")
    parser.add_argument("--lwe-cases", type=int, default=16)
    args = parser.parse_args()
    anyio.run(main, args.latency, args.repeats, args.calls, args.lwe_cases)
