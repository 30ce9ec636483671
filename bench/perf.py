"""Performance ratios against a scripted backend with fixed latency on 127.0.0.1 (not a test: prints figures).

    .venv/bin/python bench/perf.py [--latency 0.2] [--repeats 5]

Every figure is a ratio of two things measured side by side in this one run, so machine noise mostly cancels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge_mcp.backends.base import user  # noqa: E402
from judge_mcp.backends.cache import CallCache  # noqa: E402
from judge_mcp.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from judge_mcp.methods import pairwise  # noqa: E402
from judge_mcp.methods.judge import Judge  # noqa: E402
from judge_mcp.store import Store  # noqa: E402
from tests.scripted import Reply, ScriptedServer  # noqa: E402

VERDICT = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})


async def median_seconds(fn, repeats: int) -> float:
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        await fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def main(latency: float, repeats: int) -> None:
    with ScriptedServer(lambda p: Reply(content=VERDICT, delay_s=latency)) as server, tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        backend = OpenAICompatBackend("bench", "scripted", base_url=server.base_url, concurrency=8)
        cache = CallCache(store)

        async def one_call(i: int) -> None:
            await backend.complete(user(f"direct call {i} {time.time()}"))

        async def one_compare(i: int) -> None:
            judge = Judge(backend, cache, store)
            # a fresh prompt every time, so the cache never answers
            await pairwise.compare_pair(judge, prompt=f"q{i} {time.time()}", response_a="a", response_b="b")

        await one_call(-1)  # warm the connection pool
        call = await median_seconds(one_call, repeats)
        compare = await median_seconds(one_compare, repeats)
        print(f"scripted backend latency {latency * 1000:.0f} ms, median of {repeats}")
        print(f"one backend call:     {call * 1000:8.1f} ms")
        print(f"compare_pair (2 orders): {compare * 1000:8.1f} ms   ratio {compare / call:.2f} (limit 1.0: both orders concurrent)")
        await backend.aclose()
        store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.latency, args.repeats)
