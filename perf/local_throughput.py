"""Throughput of the embedded model at 1, 2 and 4 concurrent requests, measured side by side in one run; with
`--pair`, what compare_pair's two orders cost at once against one order.

    .venv/bin/python -m perf.local_throughput [--requests 8] [--max-tokens 48] [--levels 1,2,4] [--model PATH]
                                                 [--distinct] [--threads N | --threads 1,2]
    .venv/bin/python -m perf.local_throughput --pair [--repeats 5] [--pair-tokens N] [--batch-threads 0,1]
                                                        [--answer-chars 2000]

One model is loaded with as many slots as the highest level (continuous batching), warmed up with one request,
then each level sends the same judging-style request `--requests` times with at most `level` in flight, through
`LocalBackend.complete` (the path the tools use). `--distinct` makes every prompt differ at its end, so llama.cpp's
per-slot prompt cache cannot skip the prompt. Prints requests/s, completion tokens/s and the ratio to level 1,
with the load average, since other processes on the machine change the figures a lot. `--threads 1,2` repeats
the whole measurement for each thread count (a fresh load each).

`--pair` sends compare_pair's own requests (default template, goal and answer budget; JSON schema and
log-probabilities as on the embedded backend; built by the method's functions and `LocalBackend.payload`) straight
to llama.cpp in worker threads, as the backend does: order AB alone, order BA alone, and both at once, each on its
own loaded model (same settings), so each model sees each text once and greedy decoding usually writes the same tokens
alone and together. Every repetition is a new pair of answers, and each model's slots keep the previous
repetition's prompts, as between real calls: the system prompt is reused from llama.cpp's slot cache, the rest of
the prompt is computed (`--answer-chars` lengthens both answers, for prompt-heavy calls). It prints the ratio of
the two-order wall time to the slower single order (1 would be both orders in the time of one) and to their mean,
and the medians over the repetitions. `--batch-threads` loads one set of models per value of `n_threads_batch` (0:
the shipped default; a `u` after it, as in `0u`, also turns on llama.cpp's unified KV cache) and alternates between
them in every repetition. Each row also splits the time as llama.cpp reports it (`timings` in its answer): one
order's prompt and generation milliseconds alone (the mean of AB and BA), and how many times that each took with
both orders at once (x2: the slower order's, since both run in the same steps).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from judge_mcp.backends import local, local_params, user
from judge_mcp.backends.local import LocalBackend
from judge_mcp.methods import pairwise

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
        f"slots {loaded.n_parallel}, n_ctx {loaded.n_ctx}, threads {loaded.n_threads} (batches {loaded.n_threads_batch}); "
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


PAIR_QUESTION = "(case {n}) How do I reverse a list in Python, and what does each way cost?"
PAIR_ANSWERS = (
    "Use my_list.reverse() to reverse it in place in O(n) time, or my_list[::-1] to get a reversed copy, which "
    "also takes O(n) time and O(n) extra memory; reversed(my_list) gives an iterator without copying.",
    "Python lists cannot be reversed; copy the items into a new list by hand, one at a time, from the end, "
    "which is the only way and always needs a second list.",
)


def long_answer(text: str, chars: int) -> str:
    """`text` repeated as numbered paragraphs up to about `chars` characters (0: as it is)."""
    parts, size = [text], len(text)
    while size < chars:
        parts.append(f"{len(parts) + 1}. {text}")
        size += len(parts[-1]) + 2
    return "\n\n".join(parts)


def pair_payloads(backend: LocalBackend, n: int, max_tokens: int | None, chars: int = 0) -> dict[str, dict[str, Any]]:
    """compare_pair's two order requests for case `n`, as the embedded backend sends them."""
    question = PAIR_QUESTION.format(n=n)
    answers = tuple(long_answer(a, chars) for a in PAIR_ANSWERS)
    out = {}
    for order, (first, second) in (("AB", answers), ("BA", answers[::-1])):
        request = user(
            pairwise.user_prompt(question, first, second),
            system=pairwise.system_prompt("worse", "sop", True),
            max_tokens=max_tokens or pairwise.MAX_TOKENS["sop"],
            json_schema=pairwise.verdict_schema("sop"),
            schema_name="pairwise_verdict",
            logprobs=True,
            top_logprobs=pairwise.TOP_LOGPROBS,
        )
        out[order] = backend.payload(request)
    return out


async def timed(server: Any, payloads: list[dict[str, Any]]) -> tuple[float, list[int], list[tuple[float, float]]]:
    """Send `payloads` at once, each in its own worker thread; wall seconds, the completion tokens of each, and each
    one's (prompt ms, generation ms) as llama.cpp timed them (its `timings`: from the slot's start to its first token,
    and from there to its last)."""
    tokens = [0] * len(payloads)
    split = [(0.0, 0.0)] * len(payloads)

    async def one(i: int) -> None:
        body = await anyio.to_thread.run_sync(server.handle_chat_completions, payloads[i])
        tokens[i] = body["usage"]["completion_tokens"]
        timings = body.get("timings") or {}
        split[i] = (float(timings.get("prompt_ms", 0.0)), float(timings.get("predicted_ms", 0.0)))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(len(payloads)):
            tg.start_soon(one, i)
    return time.perf_counter() - start, tokens, split


def load_pair_models(args: argparse.Namespace, backend: LocalBackend) -> dict[str, dict[str, Any]]:
    """Per `--batch-threads` value, three models with the backend's settings: AB alone, BA alone, both at once."""
    import xllamacpp

    configs: dict[str, dict[str, Any]] = {}
    for setting in args.batch_threads.split(","):
        unified = setting.endswith("u")  # e.g. 0u: llama.cpp's unified KV cache (one buffer for every slot)
        value = int(setting.rstrip("u"))
        batch = value or local_params.default_batch_threads()
        label = f"batch threads {batch}" + (" (default)" if not value else "") + (" kv unified" if unified else "")
        configs[label] = {}
        for role in ("AB", "BA", "both"):
            params = local_params.engine_params(
                xllamacpp, backend.resolved_path(), None, 2, 2 * local_params.MIN_SLOT_CTX, backend.n_threads, batch
            )
            params.kv_unified = unified
            configs[label][role] = xllamacpp.Server(params)
    return configs


async def pair_round(models: dict[str, Any], payloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ab, (ab_tokens,), (ab_split,) = await timed(models["AB"], [payloads["AB"]])
    ba, (ba_tokens,), (ba_split,) = await timed(models["BA"], [payloads["BA"]])
    both, together, both_split = await timed(models["both"], [payloads["AB"], payloads["BA"]])
    # where the time goes: prompt and generation of both orders at once against one order alone (the mean of two)
    prompt_alone, gen_alone = (ab_split[0] + ba_split[0]) / 2, (ab_split[1] + ba_split[1]) / 2
    prompt_both, gen_both = max(p for p, _ in both_split), max(g for _, g in both_split)
    return {"ab": ab, "ba": ba, "both": both, "slower": both / max(ab, ba), "mean": both / ((ab + ba) / 2),
            "tokens": (ab_tokens, ba_tokens), "together": tuple(together),
            "prompt": prompt_both / prompt_alone if prompt_alone else float("nan"),
            "generation": gen_both / gen_alone if gen_alone else float("nan"),
            "prompt_ms": prompt_alone, "generation_ms": gen_alone}


async def measure_pair(args: argparse.Namespace) -> None:
    backend = LocalBackend("bench", args.model, concurrency=2, n_threads=args.pair_threads)
    configs = load_pair_models(args, backend)
    for models in configs.values():  # both slots of every model hold a compare_pair prompt, as after real calls
        for n in (-2, -1):
            await pair_round(models, pair_payloads(backend, n, 8))
    print(
        f"\ncompare_pair's two orders at once against one: {backend.model_id}, 2 slots, threads {backend.n_threads}, "
        f"template sop, max_tokens {args.pair_tokens or pairwise.MAX_TOKENS['sop']}, answers of "
        f"{len(long_answer(PAIR_ANSWERS[0], args.answer_chars))} characters, {args.repeats} repetitions; "
        f"load average {load_average()}",
        flush=True,
    )
    print(f"{'configuration':>26} {'rep':>3} {'AB s':>6} {'BA s':>6} {'both s':>6} {'/slower':>7} {'/mean':>6} {'tokens':>8} "
          f"{'prompt ms':>9} {'x2':>5} {'gen ms':>7} {'x2':>5} {'load':>5}")
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in configs}
    for rep in range(args.repeats):
        labels = list(configs) if rep % 2 == 0 else list(configs)[::-1]  # alternate which configuration goes first
        for label in labels:
            r = await pair_round(configs[label], pair_payloads(backend, rep, args.pair_tokens, args.answer_chars))
            rows[label].append(r)
            same = "" if r["together"] == r["tokens"] else f" (together {r['together'][0]},{r['together'][1]})"
            print(
                f"{label:>26} {rep:>3} {r['ab']:>6.2f} {r['ba']:>6.2f} {r['both']:>6.2f} {r['slower']:>7.2f} "
                f"{r['mean']:>6.2f} {'%d,%d' % r['tokens']:>8} {r['prompt_ms']:>9.0f} {r['prompt']:>5.2f} "
                f"{r['generation_ms']:>7.0f} {r['generation']:>5.2f} {load_average():>5}{same}",
                flush=True,
            )
    print("medians:")
    for label, runs in rows.items():
        keys = ("ab", "ba", "both", "slower", "mean", "prompt", "generation", "prompt_ms", "generation_ms")
        med = {key: statistics.median(r[key] for r in runs) for key in keys}
        print(
            f"{label:>26}  AB {med['ab']:.2f}s  BA {med['ba']:.2f}s  both {med['both']:.2f}s  "
            f"both/slower {med['slower']:.2f}  both/mean {med['mean']:.2f}  "
            f"prompt {med['prompt_ms']:.0f} ms alone, x{med['prompt']:.2f} both  "
            f"generation {med['generation_ms']:.0f} ms alone, x{med['generation']:.2f} both",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--model", default=None, help="GGUF path (default: bundled SmolLM2-135M-Instruct)")
    parser.add_argument("--threads", default=None, help="llama.cpp threads, or a list to compare (e.g. 1,2)")
    parser.add_argument("--distinct", action="store_true", help="make every prompt differ (no prompt-cache reuse)")
    parser.add_argument("--pair", action="store_true", help="compare_pair's two orders at once against one order")
    parser.add_argument("--repeats", type=int, default=5, help="--pair: repetitions (medians are printed)")
    parser.add_argument("--pair-tokens", type=int, default=None, help="--pair: answer budget (default: compare_pair's)")
    parser.add_argument("--answer-chars", type=int, default=0, help="--pair: lengthen each answer to about this")
    parser.add_argument("--pair-threads", type=int, default=None, help="--pair: n_threads (default: the backend's)")
    parser.add_argument("--batch-threads", default="0", help="--pair: n_threads_batch values to alternate (0: default; 0u: with a unified KV cache)")
    args = parser.parse_args()
    if args.pair:
        await measure_pair(args)
        return
    levels = [int(x) for x in args.levels.split(",")]
    thread_settings = [int(x) for x in args.threads.split(",")] if args.threads else [None]
    for threads in thread_settings:
        await measure(args, levels, threads)


if __name__ == "__main__":
    anyio.run(main)
