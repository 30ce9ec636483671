"""What OpenTelemetry tracing costs a tool call, off (the default) and on.

    .venv/bin/python -m perf.otel_overhead [--calls 200] [--rounds 5] [--hooks 200000]

(from the checkout's root, with the otel extra installed). Not a test: it prints figures, each a ratio of things
measured side by side in this run.

1. Off: the hooks a compare_pair tool call passes through (one tool_call, one tool_result, two model_call) timed
   in a tight loop, in nanoseconds, and as a share of the CPU time of a whole compare_pair tool call with tracing off.
2. On against off: the CPU time of this process per compare_pair tool call (the official MCP client in memory, the
   server, the call cache and the SQLite verdict log), tracing off and on (the spans to a BatchSpanProcessor with an
   in-memory exporter, so what is measured is the instrumentation and the SDK, not a network), in interleaved
   rounds; the backend is testkit/scripted_servers.py in a process of its own at zero latency, every prompt distinct
   (no cache hits).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from judge_mcp.telemetry import hooks as telemetry, otel as telemetry_otel
from judge_mcp.runtime.app import App
from judge_mcp.backends.base import Backend, Completion, Usage, user
from testkit.scripted_servers import ExternalScripted
from testkit.scripted_judges import UNIVERSAL_ANSWER
from judge_mcp.config.settings import load_settings
from judge_mcp.server.build import build_server


def hooks_ns(n: int) -> tuple[float, float]:
    """(ns per tool call's worth of hooks while off, ns per iteration of the same loop without them)."""
    backend, request = Backend("bench", "m"), user("x")
    completion = Completion("y", "m", Usage())

    def with_hooks() -> None:
        for _ in range(n):
            with telemetry.tool_call("compare_pair"):
                for _ in range(2):
                    with telemetry.model_call(backend, request) as traced:
                        traced.answered(completion, False)
                telemetry.tool_result(None, None)

    def without() -> None:
        for _ in range(n):
            for _ in range(2):
                pass

    out = []
    for fn in (with_hooks, without):
        best = min(_timed(fn) for _ in range(5))
        out.append(best / n * 1e9)
    return out[0], out[1]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def cpu_per_call(base_url: str, db: Path, calls: int, traced: bool, round_no: int) -> float:
    env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_MODEL": "scripted-model", "JUDGE_MCP_DB": str(db)}
    if traced:
        env["JUDGE_MCP_OTEL"] = "1"
    app = App(load_settings(env))
    assert telemetry.enabled() is traced
    try:
        async with Client(build_server(app)) as client:
            for i in range(5):  # warm-up: connections, prepared statements
                await client.call_tool("compare_pair", {"prompt": f"warm {traced} {round_no} {i}", "response_a": "a", "response_b": "b"})
            start = time.process_time()
            for i in range(calls):
                await client.call_tool("compare_pair", {"prompt": f"q {traced} {round_no} {i}", "response_a": "a", "response_b": "b"})
            return (time.process_time() - start) / calls
    finally:
        await app.aclose()


async def main(calls: int, rounds: int, hooks: int) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    telemetry_otel.current_provider = lambda: provider  # type: ignore[assignment] # ours, not the process's global one

    with_hooks, bare = hooks_ns(hooks)
    off: list[float] = []
    on: list[float] = []
    with ExternalScripted(UNIVERSAL_ANSWER, 0.0) as server, tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            off.append(await cpu_per_call(server.base_url, Path(tmp) / f"off{r}.db", calls, False, r))
            on.append(await cpu_per_call(server.base_url, Path(tmp) / f"on{r}.db", calls, True, r))
            exporter.clear()
    off_ms, on_ms = statistics.median(off) * 1e3, statistics.median(on) * 1e3
    hook_ns = with_hooks - bare
    print(f"tracing off: the hooks of one compare_pair tool call cost {hook_ns:.0f} ns "
          f"(loop {with_hooks:.0f} ns, bare loop {bare:.0f} ns), {hook_ns / (off_ms * 1e6):.4%} of the call's CPU time")
    print(f"CPU per compare_pair tool call (median of {rounds} rounds of {calls}): off {off_ms:.2f} ms, on {on_ms:.2f} ms; "
          f"on/off = {on_ms / off_ms:.3f}")
    print(f"rounds off: {', '.join(f'{x * 1e3:.2f}' for x in off)} ms; on: {', '.join(f'{x * 1e3:.2f}' for x in on)} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hooks", type=int, default=200_000)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.rounds, args.hooks)
