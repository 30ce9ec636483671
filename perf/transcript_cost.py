"""What judging conversations and trajectories costs (judge_mcp/methods/transcript.py), measured side by side in one run:

1. Checking and rendering per 1,000 messages: trajectories of MAX_MESSAGES messages (an assistant turn with a tool
   call, then the tool's result, in turns), validated as compare_pair's `response_a` (messages.py) and rendered with
   pairwise's defusing, against defusing the same text flattened into one string (what a caller sent before).
2. The prompt a trajectory pair costs: compare_pair's user prompt for two agent runs given as trajectories, against
   the same runs flattened into prose ("assistant called search(...)", "search returned ..."), in characters and in
   tokens of the embedded model's tokenizer (SmolLM2-135M, through llama.cpp: the prompt_tokens of a 1-token
   completion; `--no-tokens` skips it, e.g. without the `local` extra).

    .venv/bin/python -m perf.transcript_cost [--repeats 5] [--no-tokens]

Not a test: figures are printed, ratios of the two measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from judge_mcp.contract.args import ComparePairArgs
from judge_mcp.contract.messages import MAX_MESSAGES, Message
from judge_mcp.methods import pairwise, transcript
from judge_mcp.methods.parsing import neutralise

SENTENCE = "The build failed on the linux job; the log shows a missing header in src/net/socket.c at line 212. "


def trajectory(n: int, seed: int, chars: int = 300) -> list[dict[str, Any]]:
    """`n` messages: an assistant turn with a few words and one tool call, then the tool's result (`chars` long)."""
    out: list[dict[str, Any]] = []
    for k in range(n // 2):
        call_id = f"call_{seed}_{k}"
        out.append({"role": "assistant", "content": f"Step {k}: reading the log again.",
                    "tool_calls": [{"id": call_id, "name": "read_file", "arguments": {"path": f"logs/job_{k}.txt", "tail": 40}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": (SENTENCE * (chars // len(SENTENCE) + 1))[:chars]})
    return out


def flatten(messages: list[dict[str, Any]]) -> str:
    """How a caller flattened a run into one string before: one line per call, result and reply."""
    names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls") or ()}
    lines = []
    for m in messages:
        if m["role"] == "tool":
            lines.append(f"{names.get(m['tool_call_id'], 'tool')} returned: {m['content']}")
            continue
        if m.get("content"):
            lines.append(f"{m['role']}: {m['content']}")
        for call in m.get("tool_calls") or ():
            args = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"], ensure_ascii=False)
            lines.append(f"assistant called {call['name']}({args})")
    return "\n".join(lines)


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def rendering(repeats: int) -> None:
    runs = [trajectory(MAX_MESSAGES, seed) for seed in range(5)]  # 1,000 messages; flattened, each within one string's limit
    flat = [flatten(r) for r in runs]
    args = [ComparePairArgs.parse({"prompt": "Why did the build fail?", "response_a": r, "response_b": "x"}) for r in runs]
    parsed: list[list[Message]] = [a.response_a for a in args]  # type: ignore[misc]
    text_chars = sum(len(f) for f in flat)
    check_s = _best(lambda: [ComparePairArgs.parse({"prompt": "q", "response_a": r, "response_b": "x"}) for r in runs], repeats)
    render_s = _best(lambda: [transcript.render(p, neutralise.__wrapped__) for p in parsed], repeats)
    string_s = _best(lambda: [neutralise.__wrapped__(f) for f in flat], repeats)
    string_check_s = _best(lambda: [ComparePairArgs.parse({"prompt": "q", "response_a": f, "response_b": "x"}) for f in flat], repeats)
    print(f"## Checking and rendering 1,000 messages ({len(runs)} trajectories of {MAX_MESSAGES}, {text_chars:,} characters flattened)")
    print("| step | trajectories, ms | flattened strings, ms | ratio |")
    print("|---|---|---|---|")
    print(f"| check (argument model) | {check_s * 1000:.1f} | {string_check_s * 1000:.2f} | {check_s / string_check_s:.0f} |")
    print(f"| render / defuse | {render_s * 1000:.1f} | {string_s * 1000:.1f} | {render_s / string_s:.2f} |")
    print(f"| both | {(check_s + render_s) * 1000:.1f} | {(string_check_s + string_s) * 1000:.1f} | "
          f"{(check_s + render_s) / (string_check_s + string_s):.2f} |")


async def _prompt_tokens(texts: list[str]) -> list[int | None]:
    try:
        from judge_mcp.backends.base import user
        from judge_mcp.backends.local import LocalBackend
    except ImportError:
        return [None] * len(texts)
    backend = LocalBackend("local", None, concurrency=1, n_ctx=16384)
    try:
        out: list[int | None] = []
        for text in texts:
            completion = await backend.complete(user(text, system=pairwise.system_prompt("worse", "sop", False), max_tokens=1))
            out.append(completion.usage.prompt_tokens)
        return out
    finally:
        await backend.aclose()


def prompt_size(tokens: bool) -> None:
    question = [{"role": "user", "content": "The CI build fails on linux. Find out why and say what to fix."}]
    runs = [trajectory(6, 1, chars=300) + [{"role": "assistant", "content": "Add the missing include <sys/socket.h> in src/net/socket.c."}],
            trajectory(4, 2, chars=300) + [{"role": "assistant", "content": "The runner is flaky; re-run the job."}]]
    args = ComparePairArgs.parse({"prompt": question, "response_a": runs[0], "response_b": runs[1]})
    as_messages = pairwise.user_prompt(args.prompt, args.response_a, args.response_b)
    as_strings = pairwise.user_prompt(question[0]["content"], flatten(runs[0]), flatten(runs[1]))
    counted = asyncio.run(_prompt_tokens([as_messages, as_strings])) if tokens else [None, None]
    print()
    print(f"## compare_pair's user prompt for one trajectory pair ({len(runs[0])} and {len(runs[1])} messages), one order")
    print("| shape | characters | tokens (SmolLM2, with the system prompt) |")
    print("|---|---|---|")
    for name, text, n in (("trajectories (transcript)", as_messages, counted[0]), ("flattened strings", as_strings, counted[1])):
        print(f"| {name} | {len(text):,} | {n if n is not None else 'n/a'} |")
    if counted[0] and counted[1]:
        print(f"ratio: {len(as_messages) / len(as_strings):.2f}x the characters, {counted[0] / counted[1]:.2f}x the tokens")
    else:
        print(f"ratio: {len(as_messages) / len(as_strings):.2f}x the characters")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure; the best is kept (default 5)")
    parser.add_argument("--no-tokens", action="store_true", help="skip the token counts (they load the embedded model)")
    args = parser.parse_args()
    rendering(args.repeats)
    prompt_size(not args.no_tokens)


if __name__ == "__main__":
    main()
