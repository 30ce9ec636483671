"""What a judgment pays for its prompts with the providers' prompt caches (issue 45), side by side in one run:

- `today`: main's score_response layout (the criterion between the query and the answer), no cache hints (no
  `prompt_cache_key`, no `cache_control`), every call of a judgment sent at once;
- `layout`: the criterion after the answer, with the cache hints, every call at once (JUDGE_MCP_CACHE_WARMUP=off);
- `warm-up`: the same, the first call first and the rest once it is answered (JUDGE_MCP_CACHE_WARMUP=auto).

Per method and shape, against the billing scripted servers (testkit/billing_servers.py: OpenAI's automatic prefix
caching from 1,024 tokens in 128-token steps; Anthropic's breakpoints, 1,024-token minimum, 20-block lookback,
reads 0.1x and writes 1.25x; an entry readable only once the request that wrote it has started answering):

1. shared prefix: of each judgment's prompt characters, the share that is a prefix shared with an earlier call of
   the same judgment (in the order the calls reached the server);
2. billed input / uncached input, OpenAI at a 0.1x cached price (GPT-5's; `--openai-price` changes it) and
   Anthropic at its own ratios;
3. latency: the round trips a judgment makes one after another (from the order requests reached the server and
   started answering: 1 when all go at once), and its wall time over the server's latency (`--latency`).

`--embedded` adds the embedded model (the bundled SmolLM2 GGUF): score_response with 5 criteria against one
criterion on a ~1,500-token response, each mode, wall time (it takes minutes on 2 cores).

    .venv/bin/python -m perf.prompt_cache [--latency 0.2] [--openai-price 0.1] [--embedded [--modes today,warm-up] [--repeats 3]]

Not a test: figures are printed, ratios of the modes measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge_mcp import prompts
from judge_mcp.api import Judge
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.methods import score, transcript, user_inputs
from judge_mcp.methods.parsing import neutralise
from testkit.billing_servers import AnthropicCacheBilling, OpenAICacheBilling, _blocks, _common
from testkit.scripted_judges import UNIVERSAL_ANSWER

MODES = ("today", "layout", "warm-up")
CRITERIA = ["correctness", "completeness", "clarity", "concision", "safety"]
WORDS = ("the service reads its settings from the environment, checks each value, and names the setting in every error; "
         "a request that fails is retried with backoff, bounded by the timeout, and the error names the backend. ")
TODAY_USER = """<|The Start of User Query|>
{prompt}
<|The End of User Query|>

{inputs}

<|The Start of AI Answer|>
{response}
<|The End of AI Answer|>

{notes}

[Your judgement]
Respond in JSON format. {answer_format}"""


def text(tokens: int, seed: int = 0) -> str:
    """About `tokens` tokens (4 characters each) of prose, numbered sentences so no two texts are alike."""
    out, k = [], 0
    while sum(len(s) for s in out) < tokens * 4:
        out.append(f"({seed}.{k}) {WORDS}")
        k += 1
    return "".join(out)[: tokens * 4]


def trajectory(n: int, chars: int = 1000) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n // 2):
        out.append({"role": "assistant", "content": f"Step {k}: " + text(chars // 4, k)[:chars],
                    "tool_calls": [{"id": f"c{k}", "name": "run", "arguments": {"step": k}}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": text(chars // 4, 100 + k)[:chars]})
    return out


def today_parts(instruction: Any, response: Any, criterion: str, reference: str | None, low: int, high: int, structured: bool) -> tuple[str, str]:
    """main's score_user.txt: the criterion between the query and the answer; nothing marked shared."""
    inputs = user_inputs.blocks(criterion, reference, neutralise, criteria_block="score_criterion.txt")
    notes = user_inputs.notes(criterion, reference, reference_note="score_reference_note.txt", criteria_note="score_criterion_note.txt")
    whole = TODAY_USER.format(prompt=transcript.render(instruction, neutralise).strip("\n"), inputs=inputs,
                              response=transcript.render(response, neutralise).strip("\n"), notes=notes,
                              answer_format=score.answer_format(structured, low, high))
    return "", whole


@contextlib.contextmanager
def today() -> Iterator[None]:
    """main's behaviour: the old layout, no prompt_cache_key (and, nothing marked shared, no cache_control)."""
    parts, payload = score.user_parts, OpenAICompatBackend.payload

    def without_key(self: OpenAICompatBackend, request: Any) -> dict[str, Any]:
        out = payload(self, request)
        out.pop("prompt_cache_key", None)
        return out

    score.user_parts = today_parts  # type: ignore[assignment]
    OpenAICompatBackend.payload = without_key  # type: ignore[method-assign]
    try:
        yield
    finally:
        score.user_parts = parts  # type: ignore[assignment]
        OpenAICompatBackend.payload = payload  # type: ignore[method-assign]


def shapes() -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(name, tool, the judgments' arguments, in order)."""
    long = text(2000)
    return [
        ("score_response 5x1, 2,000-token response", "score_response",
         [{"instruction": "Describe how the service handles failures.", "response": long, "criteria": [{"name": c} for c in CRITERIA]}]),
        ("score_response 5x2, 2,000-token response", "score_response",
         [{"instruction": "Describe how the service handles failures.", "response": long, "criteria": [{"name": c} for c in CRITERIA],
           "samples": 2}]),
        ("self-critique loop: score_response 5x1 on a trajectory at 10/20/30/40 messages of ~1,000 characters", "score_response",
         [{"instruction": "Fix the failing build.", "response": trajectory(n), "criteria": [{"name": c} for c in CRITERIA]} for n in (10, 20, 30, 40)]),
        ("compare_pair (both orders), 1,000-token answers", "compare_pair",
         [{"prompt": "Describe how the service handles failures.", "response_a": text(1000, 1), "response_b": text(1000, 2)}]),
        ("grade_score_options, 4 options of 500 tokens", "grade_score_options",
         [{"instruction": "Describe how the service handles failures.", "options": [text(500, k) for k in range(4)]}]),
        ("infer_instruction_reward (FLIP), 3 responses of 700 tokens", "infer_instruction_reward",
         [{"instruction": "Describe how the service handles failures.", "responses": [text(700, k) for k in range(3)]}]),
    ]


def shared_share(payloads: list[dict[str, Any]]) -> float:
    """Of the prompts' characters, the share that is a prefix shared with an earlier prompt of the list."""
    texts = ["".join(t for t, _ in _blocks(p)) for p in payloads]
    shared = sum(max((_common(t, e) for e in texts[:k]), default=0) for k, t in enumerate(texts))
    return shared / max(1, sum(len(t) for t in texts))


async def run_mode(mode: str, kind: str, billing: Any, tool: str, judgments: list[dict[str, Any]], db: Path) -> tuple[float, int, list[list[dict]]]:
    """Wall time per judgment (mean), the most round trips one after another in a judgment, and each judgment's
    requests, for one mode on one billing server."""
    server = billing.server()
    env = {"JUDGE_MCP_BACKEND": kind, "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "scripted-model",
           "JUDGE_MCP_API_KEY": "scripted", "JUDGE_MCP_CACHE_WARMUP": "auto" if mode == "warm-up" else "off"}
    walls, rounds, per_judgment = [], [], []
    try:
        with today() if mode == "today" else contextlib.nullcontext():
            async with Judge(db=db, env=env) as judge:
                await judge.compare_pair(prompt="q", response_a="a", response_b="b")  # connections and start-up, not measured
                billing.reset()
                for arguments in judgments:
                    before = len(billing.arrivals)
                    started = time.perf_counter()
                    await getattr(judge, tool)(**arguments)
                    walls.append(time.perf_counter() - started)
                    rounds.append(billing.rounds(before))
                    per_judgment.append([p for p, _ in billing.arrivals[before:]])
    finally:
        server.stop()
    return statistics.fmean(walls), max(rounds), per_judgment


async def measure(latency: float, openai_price: float) -> None:
    print("| method and shape | mode | shared prefix | OpenAI billed / uncached | Anthropic billed / uncached | round trips per judgment | wall / latency |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, tool, judgments) in enumerate(shapes()):
            for mode in MODES:
                openai = OpenAICacheBilling(lambda p: UNIVERSAL_ANSWER, latency_s=latency, read_price=openai_price)
                anthropic = AnthropicCacheBilling(lambda p: UNIVERSAL_ANSWER, latency_s=latency)
                wall, rounds, requests = await run_mode(mode, "openai", openai, tool, judgments, Path(tmp) / f"o{n}{mode}.db")
                await run_mode(mode, "anthropic", anthropic, tool, judgments, Path(tmp) / f"a{n}{mode}.db")
                shares = [shared_share(r) for r in requests]
                print(f"| {name} | {mode} | {statistics.fmean(shares):.1%} | {openai.billed() / openai.uncached():.2f} | "
                      f"{anthropic.billed() / anthropic.uncached():.2f} | {rounds} | {wall / latency:.2f} |")


async def embedded(repeats: int, modes: list[str]) -> None:
    """score_response on the bundled model: 5 criteria against 1, ~1,500-token response, each mode."""
    response = text(1500, 7)
    print()
    print("| embedded model (bundled SmolLM2, 4 slots) | mode | 1 criterion, s (median) | 5 criteria, s (median) | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            env = {"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_CACHE_WARMUP": "auto" if mode == "warm-up" else "off", "JUDGE_MCP_TIMEOUT_S": "600"}
            times: dict[int, list[float]] = {1: [], 5: []}
            with today() if mode == "today" else contextlib.nullcontext():
                async with Judge(db=Path(tmp) / f"e{mode}.db", env=env) as judge:
                    await judge.score_response(instruction="Warm the model up.", response="ok", criteria="c")
                    for r in range(repeats):
                        for k in (1, 5):
                            started = time.perf_counter()
                            await judge.score_response(instruction=f"Describe the service ({mode} {r} {k}).", response=response,
                                                       criteria=[{"name": c} for c in CRITERIA[:k]])
                            times[k].append(time.perf_counter() - started)
            one, five = statistics.median(times[1]), statistics.median(times[5])
            print(f"| score_response, ~1,500-token response | {mode} | {one:.1f} | {five:.1f} | {five / one:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="the billing servers' latency in seconds (default 0.2)")
    parser.add_argument("--openai-price", type=float, default=0.1, help="OpenAI's cached-token price ratio (default 0.1)")
    parser.add_argument("--embedded", action="store_true", help="also the embedded model (minutes)")
    parser.add_argument("--repeats", type=int, default=3, help="embedded: judgments per figure, the median kept (default 3)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"embedded: the modes to run (default {','.join(MODES)})")
    parser.add_argument("--no-servers", action="store_true", help="skip the billing servers' table")
    args = parser.parse_args()
    prompts.load("score_user.txt")
    if not args.no_servers:
        asyncio.run(measure(args.latency, args.openai_price))
    if args.embedded:
        asyncio.run(embedded(args.repeats, [m for m in args.modes.split(",") if m in MODES]))


if __name__ == "__main__":
    main()
