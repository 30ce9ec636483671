"""Throughput of the embedded model at 1, 2 and 4 concurrent requests, measured side by side in one run; with
`--pair`, what compare_pair's two orders cost at once against one order.

    .venv/bin/python -m perf.local_throughput [--requests 8] [--max-tokens 48] [--levels 1,2,4] [--model PATH]
                                                 [--distinct] [--threads N | --threads 1,2]
    .venv/bin/python -m perf.local_throughput --pair [--repeats 5] [--pair-tokens N] [--batch-threads 0,1]
                                                        [--answer-chars 2000] [--shape reverse|capital|runs]
    .venv/bin/python -m perf.local_throughput --tool [--repeats 5] [--shape reverse|capital|runs]

One model is loaded with as many slots as the highest level (continuous batching), warmed up with one request,
then each level sends the same judging-style request `--requests` times with at most `level` in flight, through
`LocalBackend.complete` (the path the tools use). `--distinct` makes every prompt differ at its end, so llama.cpp's
per-slot prompt cache cannot skip the prompt. Prints requests/s, completion tokens/s and the ratio to level 1,
with the load average, since other processes on the machine change the figures a lot. `--threads 1,2` repeats
the whole measurement for each thread count (a fresh load each).

`--pair` sends compare_pair's own requests (default template, goal and answer budget; JSON schema and
log-probabilities as on the embedded backend; built by the method's functions and `LocalBackend.payload`) straight
to llama.cpp in worker threads, as the backend does: order AB alone, order BA alone, both at once (two slots, as
compare_pair sends them), and both one after the other pinned to one slot (`id_slot` 0, so BA reuses the prefix it
shares with AB from the slot's cache: column `seq`), each on its own loaded model (same settings), so each model
sees each text once and greedy decoding usually writes the same tokens alone and together. `--shape` picks the pair:
this file's (`reverse`), or the demo's two compare_pair calls (`capital`: one-word answers; `runs`: two
trajectories). Every repetition is a new question, and each model's slots keep the previous repetition's prompts, as
between real calls: the system prompt is reused from llama.cpp's slot cache, the rest of the prompt is computed
(`--answer-chars` lengthens both answers, for prompt-heavy calls). It prints the ratio of the two-order wall time to
the slower single order (1 would be both orders in the time of one) and to their mean, and the medians over the
repetitions. `--batch-threads` loads one set of models per value of `n_threads_batch` (0: the shipped default; a `u`
after it, as in `0u`, also turns on llama.cpp's unified KV cache) and alternates between them in every repetition.
Each row also splits the time as llama.cpp reports it (`timings` in its answer): one order's prompt and generation
milliseconds alone (the mean of AB and BA), and how many times that each took with both orders at once (x2: the
slower order's, since both run in the same steps). `computed` is the prompt tokens llama.cpp computed: AB alone /
both orders at once / BA after AB on one slot; `cached` the tokens it took from the slot's cache: AB alone (the
system prompt) / BA after AB (everything before the answers). `floor` is what no scheduling on this engine can beat:
one order's time plus BA's unshared prompt tokens at AB's cost per prompt token, with the second order's generation
taken as free (the answers change places, so every token from the first answer on has a different KV in the two
orders and is computed twice).
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
SHAPES = ("reverse", "capital", "runs")  # this file's pair; the demo's first compare_pair; its trajectories


def long_answer(text: str, chars: int) -> str:
    """`text` repeated as numbered paragraphs up to about `chars` characters (0: as it is)."""
    parts, size = [text], len(text)
    while size < chars:
        parts.append(f"{len(parts) + 1}. {text}")
        size += len(parts[-1]) + 2
    return "\n\n".join(parts)


def pair_inputs(shape: str, n: int, chars: int) -> tuple[Any, Any, Any]:
    """(question, answer A, answer B) of case `n`: every case asks a new question, as between real calls."""
    if shape == "reverse":
        return PAIR_QUESTION.format(n=n), long_answer(PAIR_ANSWERS[0], chars), long_answer(PAIR_ANSWERS[1], chars)
    # lazy: the demo's texts, only for the shapes that use them
    from judge_mcp.cli.demo import QUESTION, RUN_A, RUN_B
    from judge_mcp.contract.args import ComparePairArgs

    if shape == "capital":
        return f"(case {n}) {QUESTION}", "Sydney.", "Canberra."
    task = [{"role": "user", "content": f"(case {n}) {QUESTION} Use the search tool."}]
    args = ComparePairArgs.model_validate({"prompt": task, "response_a": RUN_A, "response_b": RUN_B})
    return args.prompt, args.response_a, args.response_b


def pair_payloads(
    backend: LocalBackend, n: int, max_tokens: int | None, chars: int = 0, shape: str = "reverse"
) -> dict[str, dict[str, Any]]:
    """compare_pair's two order requests for case `n`, as the embedded backend sends them."""
    question, *answers = pair_inputs(shape, n, chars)
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


async def timed(
    server: Any, payloads: list[dict[str, Any]], one_slot: bool = False
) -> tuple[float, list[int], list[dict[str, float]]]:
    """Send `payloads` at once, each in its own worker thread (`one_slot`: one after the other, all on slot 0, so a
    later one reuses the prefix it shares with the one before); wall seconds, the completion tokens of each, and each
    one's `timings` as llama.cpp reports them (prompt_n: prompt tokens computed, cache_n: taken from the slot's
    cache, prompt_ms: from the slot's start to its first token, predicted_ms: from there to its last)."""
    tokens = [0] * len(payloads)
    split: list[dict[str, float]] = [{}] * len(payloads)

    def one(i: int) -> None:
        payload = {**payloads[i], "id_slot": 0} if one_slot else payloads[i]
        body = server.handle_chat_completions(payload)
        tokens[i] = body["usage"]["completion_tokens"]
        split[i] = {key: float(value) for key, value in (body.get("timings") or {}).items() if isinstance(value, (int, float))}

    start = time.perf_counter()
    if one_slot:
        for i in range(len(payloads)):
            await anyio.to_thread.run_sync(one, i)
    else:
        async with anyio.create_task_group() as tg:
            for i in range(len(payloads)):
                tg.start_soon(anyio.to_thread.run_sync, one, i)
    return time.perf_counter() - start, tokens, split


ROLES = ("AB", "BA", "both", "seq")  # AB alone, BA alone, both at once on two slots, both one after the other on one


def load_pair_models(args: argparse.Namespace, backend: LocalBackend) -> dict[str, dict[str, Any]]:
    """Per `--batch-threads` value, one model per role with the backend's settings."""
    import xllamacpp  # lazy: perf only, and only for --pair

    configs: dict[str, dict[str, Any]] = {}
    for setting in args.batch_threads.split(","):
        unified = setting.endswith("u")  # e.g. 0u: llama.cpp's unified KV cache (one buffer for every slot)
        value = int(setting.rstrip("u"))
        batch = value or local_params.default_batch_threads()
        label = f"batch threads {batch}" + (" (default)" if not value else "") + (" kv unified" if unified else "")
        configs[label] = {}
        for role in ROLES:
            params = local_params.engine_params(
                xllamacpp, backend.resolved_path(), None, 2, 2 * local_params.MIN_SLOT_CTX, backend.n_threads, batch
            )
            params.kv_unified = unified
            configs[label][role] = xllamacpp.Server(params)
    return configs


async def pair_round(models: dict[str, Any], payloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ab, (ab_tokens,), (ab_t,) = await timed(models["AB"], [payloads["AB"]])
    ba, (ba_tokens,), (ba_t,) = await timed(models["BA"], [payloads["BA"]])
    both, together, both_t = await timed(models["both"], [payloads["AB"], payloads["BA"]])
    seq, _, seq_t = await timed(models["seq"], [payloads["AB"], payloads["BA"]], one_slot=True)
    # where the time goes: prompt and generation of both orders at once against one order alone (the mean of two)
    prompt_alone = (ab_t.get("prompt_ms", 0) + ba_t.get("prompt_ms", 0)) / 2
    gen_alone = (ab_t.get("predicted_ms", 0) + ba_t.get("predicted_ms", 0)) / 2
    prompt_both = max(t.get("prompt_ms", 0) for t in both_t)
    gen_both = max(t.get("predicted_ms", 0) for t in both_t)
    slower = max(ab, ba)
    # The floor on this engine: AB's prompt, then only what BA does not share with it (its prompt_n after AB on
    # the same slot) at AB's cost per prompt token, and one order's generation as if the second were free.
    per_token = ab_t.get("prompt_ms", 0) / max(ab_t.get("prompt_n", 1), 1)
    one_order = ab_t.get("prompt_ms", 0) + ab_t.get("predicted_ms", 0)
    floor = (one_order + per_token * seq_t[1].get("prompt_n", 0)) / one_order if one_order else float("nan")
    return {"ab": ab, "ba": ba, "both": both, "slower": both / slower, "mean": both / ((ab + ba) / 2),
            "seq": seq / slower, "floor": floor,
            "tokens": (ab_tokens, ba_tokens), "together": tuple(together),
            "prompt": prompt_both / prompt_alone if prompt_alone else float("nan"),
            "generation": gen_both / gen_alone if gen_alone else float("nan"),
            "prompt_ms": prompt_alone, "generation_ms": gen_alone,
            "computed": "%d/%d/%d" % (ab_t.get("prompt_n", 0), sum(t.get("prompt_n", 0) for t in both_t), seq_t[1].get("prompt_n", 0)),
            "cached": "%d/%d" % (ab_t.get("cache_n", 0), seq_t[1].get("cache_n", 0))}


async def measure_pair(args: argparse.Namespace) -> None:
    backend = LocalBackend("bench", args.model, concurrency=2, n_threads=args.pair_threads)
    configs = load_pair_models(args, backend)
    for models in configs.values():  # both slots of every model hold a compare_pair prompt, as after real calls
        for n in (-2, -1):
            await pair_round(models, pair_payloads(backend, n, 8, shape=args.shape))
    question, answer_a, _ = pair_inputs(args.shape, 0, args.answer_chars)
    print(
        f"\ncompare_pair's two orders at once against one: {backend.model_id}, 2 slots, threads {backend.n_threads}, "
        f"template sop, max_tokens {args.pair_tokens or pairwise.MAX_TOKENS['sop']}, pair {args.shape!r} (answer A: "
        f"{len(pairwise.user_prompt(question, answer_a, ''))} characters with the question), {args.repeats} repetitions; "
        f"load average {load_average()}",
        flush=True,
    )
    print(f"{'configuration':>26} {'rep':>3} {'AB s':>6} {'BA s':>6} {'both s':>6} {'/slower':>7} {'/mean':>6} {'seq':>5} "
          f"{'floor':>5} {'tokens':>8} {'computed':>11} {'cached':>7} {'prompt ms':>9} {'x2':>5} {'gen ms':>7} {'x2':>5} {'load':>5}")
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in configs}
    for rep in range(args.repeats):
        labels = list(configs) if rep % 2 == 0 else list(configs)[::-1]  # alternate which configuration goes first
        for label in labels:
            payloads = pair_payloads(backend, rep, args.pair_tokens, args.answer_chars, args.shape)
            r = await pair_round(configs[label], payloads)
            rows[label].append(r)
            same = "" if r["together"] == r["tokens"] else f" (together {r['together'][0]},{r['together'][1]})"
            print(
                f"{label:>26} {rep:>3} {r['ab']:>6.2f} {r['ba']:>6.2f} {r['both']:>6.2f} {r['slower']:>7.2f} "
                f"{r['mean']:>6.2f} {r['seq']:>5.2f} {r['floor']:>5.2f} {'%d,%d' % r['tokens']:>8} {r['computed']:>11} "
                f"{r['cached']:>7} {r['prompt_ms']:>9.0f} {r['prompt']:>5.2f} {r['generation_ms']:>7.0f} "
                f"{r['generation']:>5.2f} {load_average():>5}{same}",
                flush=True,
            )
    print("medians:")
    for label, runs in rows.items():
        keys = ("ab", "ba", "both", "slower", "mean", "seq", "floor", "prompt", "generation", "prompt_ms", "generation_ms")
        med = {key: statistics.median(r[key] for r in runs) for key in keys}
        print(
            f"{label:>26}  AB {med['ab']:.2f}s  BA {med['ba']:.2f}s  both {med['both']:.2f}s  "
            f"both/slower {med['slower']:.2f}  both/mean {med['mean']:.2f}  one slot in turn/slower {med['seq']:.2f}  "
            f"floor {med['floor']:.2f}  prompt {med['prompt_ms']:.0f} ms alone, x{med['prompt']:.2f} both  "
            f"generation {med['generation_ms']:.0f} ms alone, x{med['generation']:.2f} both",
            flush=True,
        )


async def measure_tool(args: argparse.Namespace) -> None:
    """The tool path: compare_pair through the Python API (the tool's code, the call layer, the embedded backend)
    with both orders (swap true) and with one (swap false), alternating which goes first, a new question each
    time (the call cache never answers), on one loaded model shared by both."""
    import tempfile  # lazy: perf only, and only for --tool

    from judge_mcp.api import Judge, JudgeError  # lazy: perf only, and only for --tool

    with tempfile.TemporaryDirectory() as tmp:
        async with Judge(db=Path(tmp) / "judge.db", env={"JUDGE_MCP_BACKEND": "local"}) as judge:
            async def call(n: int, swap: bool) -> tuple[float, Any]:
                question, answer_a, answer_b = pair_inputs(args.shape, n, args.answer_chars)
                start = time.perf_counter()
                try:
                    result: Any = await judge.compare_pair(prompt=question, response_a=answer_a, response_b=answer_b, swap=swap)
                except JudgeError as exc:  # e.g. an order that loops until the backend's timeout
                    result = type("Failed", (), {"winner": f"error: {str(exc)[:60]}"})()
                return time.perf_counter() - start, result

            await call(-1, True)  # load and warm up
            await call(-2, True)
            print(f"\ncompare_pair through the tool path, pair {args.shape!r}, {args.repeats} repetitions; "
                  f"load average {load_average()}", flush=True)
            print(f"{'rep':>3} {'one order s':>11} {'two orders s':>12} {'ratio':>6} {'load':>5} winner")
            ratios = []
            for rep in range(args.repeats):
                timed_calls = {}
                for swap in ((False, True) if rep % 2 == 0 else (True, False)):
                    timed_calls[swap] = await call(2 * rep + int(swap), swap)
                (one, _), (two, result) = timed_calls[False], timed_calls[True]
                ratios.append(two / one)
                print(f"{rep:>3} {one:>11.2f} {two:>12.2f} {two / one:>6.2f} {load_average():>5} {result.winner}",
                      flush=True)
            print(f"median two orders / one: {statistics.median(ratios):.2f}", flush=True)


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
    parser.add_argument("--shape", choices=SHAPES, default="reverse", help="--pair: the pair (capital, runs: the demo's)")
    parser.add_argument("--pair-threads", type=int, default=None, help="--pair: n_threads (default: the backend's)")
    parser.add_argument("--batch-threads", default="0", help="--pair: n_threads_batch values to alternate (0: default; 0u: with a unified KV cache)")
    parser.add_argument("--tool", action="store_true", help="compare_pair's two orders against one on the tool path")
    args = parser.parse_args()
    if args.tool:
        await measure_tool(args)
        return
    if args.pair:
        await measure_pair(args)
        return
    levels = [int(x) for x in args.levels.split(",")]
    thread_settings = [int(x) for x in args.threads.split(",")] if args.threads else [None]
    for threads in thread_settings:
        await measure(args, levels, threads)


if __name__ == "__main__":
    anyio.run(main)
