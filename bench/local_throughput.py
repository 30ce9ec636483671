"""Throughput of the embedded model at 1, 2 and 4 concurrent requests, measured side by side in one run.

    .venv/bin/python -m bench.local_throughput [--requests 8] [--max-tokens 48] [--levels 1,2,4] [--model PATH]
                                                 [--distinct] [--threads N | --threads 1,2]

One model is loaded with as many slots as the highest level (continuous batching), warmed up with one request,
then each level sends the same judging-style request `--requests` times with at most `level` in flight, through
`LocalBackend.complete` (the path the tools use). `--distinct` makes every prompt differ at its end, so llama.cpp's
per-slot prompt cache cannot skip the prompt. Prints requests/s, completion tokens/s and the ratio to level 1,
with the load average, since other processes on the machine change the figures a lot. `--threads 1,2` repeats
the whole measurement for each thread count (a fresh load each).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import anyio

from judge_mcp.backends import user
from judge_mcp.backends import local
from judge_mcp.backends.local import LocalBackend

PROMPT = """You are judging two answers to a user's question.

Question: How do I reverse a list in Python?

Answer A: Use my_list.reverse() to reverse it in place, or my_list[::-1] to get a reversed copy.

Answer B: Python lists cannot be reversed; copy the items into a new list by hand.

Which answer is worse? Give a one-sentence reason, then the verdict as [[A]] or [[B]]."""


async def run_level(backend: LocalBackend, level: int, requests: int, max_tokens: int, distinct: bool) -> dict:
    limiter = anyio.CapacityLimiter(level)
    completion_tokens = 0
    prompt_tokens = 0

    async def one(i: int) -> None:
        nonlocal completion_tokens, prompt_tokens
        text = PROMPT + (f"\n(case {level}-{i})" if distinct else "")
        async with limiter:
            c = await backend.complete(user(text, max_tokens=max_tokens, temperature=0.0))
        completion_tokens += c.usage.completion_tokens
        prompt_tokens += c.usage.prompt_tokens

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(requests):
            tg.start_soon(one, i)
    wall = time.perf_counter() - start
    return {
        "level": level,
        "wall_s": wall,
        "req_s": requests / wall,
        "tok_s": completion_tokens / wall,
        "completion_tokens": completion_tokens / requests,
        "prompt_tokens": prompt_tokens / requests,
    }


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


async def measure(args: argparse.Namespace, levels: list[int], threads: int | None) -> None:
    backend = LocalBackend("bench", args.model, concurrency=max(levels), n_threads=threads, timeout_s=3600)
    local.unload_model(backend.resolved_path())  # each thread setting gets its own load
    start = time.perf_counter()
    await backend.complete(user("Say OK.", max_tokens=4))  # load + warm up
    loaded = local.loaded_models()[str(backend.resolved_path())]
    print(
        f"\nmodel {backend.model_id}: first call (load + warm-up) {time.perf_counter() - start:.2f}s, "
        f"slots {loaded.n_parallel}, n_ctx {loaded.n_ctx}, threads {loaded.n_threads}; "
        f"{args.requests} requests per level, max_tokens {args.max_tokens}, "
        f"prompts {'distinct' if args.distinct else 'identical'}; load average {load_average()}",
        flush=True,
    )
    rows = []
    for level in levels:
        rows.append(await run_level(backend, level, args.requests, args.max_tokens, args.distinct))
        rows[-1]["load"] = load_average()
    base = rows[0]
    print(f"{'conc':>4} {'wall s':>7} {'req/s':>7} {'tok/s':>7} {'x req/s':>8} {'tok/req':>8} {'prompt tok':>10} {'loadavg':>8}")
    for r in rows:
        print(
            f"{r['level']:>4} {r['wall_s']:>7.2f} {r['req_s']:>7.2f} {r['tok_s']:>7.1f} "
            f"{r['req_s'] / base['req_s']:>8.2f} {r['completion_tokens']:>8.1f} {r['prompt_tokens']:>10.1f} {r['load']:>8}",
            flush=True,
        )
    local.unload_model(backend.resolved_path())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--model", default=None, help="GGUF path (default: bundled SmolLM2-135M-Instruct)")
    parser.add_argument("--threads", default=None, help="llama.cpp threads, or a list to compare (e.g. 1,2)")
    parser.add_argument("--distinct", action="store_true", help="make every prompt differ (no prompt-cache reuse)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    thread_settings = [int(x) for x in args.threads.split(",")] if args.threads else [None]
    for threads in thread_settings:
        await measure(args, levels, threads)


if __name__ == "__main__":
    anyio.run(main)
