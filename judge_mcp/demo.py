"""`judge-mcp demo`: start the server as a subprocess, connect the official MCP client over stdio, call every
tool once on a small built-in example with the configured backend, and print each structured verdict."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

QUESTION = "What is the capital of Australia? Answer in one sentence."
GOOD = "The capital of Australia is Canberra."
BAD = "The capital of Australia is Sydney, its largest city."

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("compare_pair", {"prompt": QUESTION, "response_a": BAD, "response_b": GOOD}),
    (
        "infer_instruction_reward",
        {
            "instruction": "Write a haiku about the sea.",
            "responses": [
                "Waves fold into foam,\nsalt wind carries gull voices,\nthe tide breathes and goes.",
                "To reset your password, open Settings and choose Account, then Security.",
            ],
        },
    ),
    (
        "grade_score_options",
        {"instruction": QUESTION, "options": [BAD, GOOD, "Australia is a country in the southern hemisphere."], "unrelated_option": True},
    ),
    ("lwe_judge", {"prompt": "Is 17 a prime number? Answer yes or no with a reason.", "response_a": "Yes: 17 has no divisors other than 1 and itself.", "response_b": "No, 17 is divisible by 3.", "session": "demo"}),
]


def _print(name: str, data: dict[str, Any], seconds: float) -> None:
    usage = data.get("usage", {})
    print(f"\n=== {name}  ({seconds:.1f}s, model {data.get('model')}, {usage.get('calls', 0)} calls, {usage.get('cached_calls', 0)} cached)")
    if name == "compare_pair":
        print(f"winner: {data['winner']}   consistent: {data['consistent']}   goal: {data['goal']}   template: {data['template']}")
        for t in data["trials"]:
            print(f"  order {t['order']}: label {t['label']}  better {t['better']}  parse_ok {t['parse_ok']}")
    elif name == "infer_instruction_reward":
        for r in data["results"]:
            print(f"  response {r['index']}: reward {r['reward']:.3f}  echoes {r['echoes_instruction']}  parse_ok {r['parse_ok']}")
            print(f"    inferred: {r['inferred_instruction'][:160]!r}")
        print(f"ranking: {data['ranking']}   best_index: {data['best_index']}")
    elif name == "grade_score_options":
        for t in data["trials"]:
            print(f"  shown {t['order']}: picked position {t['selected_position']} -> option {t['selected_index']}  parse_ok {t['parse_ok']}")
        print(f"winner_index: {data['winner_index']}  grade_score: {data['grade_score']}  llm_score: {data['llm_score']}  choice_score: {data['choice_score']}")
        print(f"unrelated option at index {data['unrelated_index']}, picked {data.get('unrelated_picked')} time(s)")
    elif name == "lwe_judge":
        print(f"winner: {data['winner']}   path: {data['path']}   vanilla: {data['vanilla']}")
        print(f"meta-prompt version used: {data['meta_prompt_version']}  refined: {data['refined']}  pending feedback: {data['pending_feedback']}")
    else:  # pragma: no cover
        print(json.dumps(data, indent=2))


async def run_demo() -> int:
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=dict(os.environ))
    backend = os.environ.get("JUDGE_MCP_BACKEND", "local")
    print(f"judge-mcp demo: server over stdio, backend {backend!r} (set JUDGE_MCP_BACKEND to change)")
    failures = 0
    async with Client(params, read_timeout_seconds=900) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        print(f"tools: {', '.join(sorted(tools))}")
        for name, arguments in CALLS:
            start = time.perf_counter()
            try:
                result = await client.call_tool(name, arguments)
            except Exception as exc:  # transport-level failure
                failures += 1
                print(f"\n=== {name}: FAILED ({type(exc).__name__}: {exc})")
                continue
            if result.is_error or result.structured_content is None:
                failures += 1
                text = " ".join(getattr(c, "text", "") for c in result.content)
                print(f"\n=== {name}: ERROR {text}")
                continue
            _print(name, result.structured_content, time.perf_counter() - start)
    print(f"\n{len(CALLS) - failures} of {len(CALLS)} tool calls succeeded")
    return 0 if failures == 0 else 1
