"""The bench's fixture datasets (tests/bench_fixtures) and `bench()`, which runs one method over one of them against a
scripted judge through a real App. The fixtures' answers are token-marked (GOOD-<id> right, BAD-<id> wrong), so
`right_judge` (a `TokenJudge`) is right on every item."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from judge_mcp.bench.data import load_items
from judge_mcp.bench.runner import RunSpec, run
from testkit.scripted_judges import FEEDBACK, OPTION_BLOCK, first_user, is_arena_hard, schema_name
from tests.helpers import app_env, make_app

FIXTURES = Path(__file__).resolve().parent.parent / "bench_fixtures"
PAIRS = FIXTURES / "pairs.jsonl"  # 6 pairs (alpha: p1-p3, beta: p4-p6) and one degenerate (p0)
LISTS = FIXTURES / "lists.jsonl"  # 4 listwise items, best at 0, 2, 1, 3
PAIR_ITEMS = {it.id: it for it in load_items(PAIRS)}
LIST_ITEMS = {it.id: it for it in load_items(LISTS)}
PROMPTS = {**{k: v.prompt for k, v in PAIR_ITEMS.items()}, **{k: v.prompt for k, v in LIST_ITEMS.items()}}


async def bench(scripted, responder, dataset: Path, method: str, tmp_path: Path, db_name: str = "bench.db", **kw) -> tuple[dict, Any]:
    """(summary, scripted server): `method` over `dataset` against `responder` (or the scripted server given as
    `server=`), in the database tmp_path/db_name; `app_concurrency` sets the backend's concurrency (4), the rest is
    RunSpec's; `env` adds settings (e.g. the judge's JUDGE_MCP_MODEL)."""
    server = kw.pop("server", None) or scripted(responder)
    env = app_env(server, tmp_path / db_name, JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_CONCURRENCY=str(kw.pop("app_concurrency", 4)), **kw.pop("env", {}))
    app = make_app(env)
    try:
        summary = await run(app, RunSpec(dataset=dataset, method=method, **kw), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    return summary, server


# ---- token-marked items (the bench's fixtures) ---------------------------------------------------------------------------
ITEM_TOKEN = re.compile(r"\b(GOOD|BAD)-([a-z]\d+)")


def item_of(text: str) -> str:
    """The item id of the first GOOD-<id> or BAD-<id> token in `text`."""
    match = ITEM_TOKEN.search(text)
    assert match, f"no item token in {text[:200]!r}"
    return match.group(2)


def good_first(text: str) -> bool:
    item = item_of(text)
    return text.index(f"GOOD-{item}") < text.index(f"BAD-{item}")


class TokenJudge:
    """Always right on token-marked items (the right answer holds GOOD-<id>, the wrong one BAD-<id>) for every bench
    method: pairwise (also Arena-Hard's labels), LWE, FLIP (it infers `instructions[id]`, the item's prompt, from a
    GOOD answer), pointwise ratings and Grade Score."""

    def __init__(self, instructions: dict[str, str]):
        self.instructions = instructions

    def __call__(self, payload: dict[str, Any]) -> str:
        name, text = schema_name(payload), first_user(payload)
        if is_arena_hard(payload):  # ">>" labels: JudgeBench reads them as ">"
            return "My own answer first. ... My final verdict is: " + ("[[A>>B]]" if good_first(text) else "[[B>>A]]")
        if name == "pairwise_verdict":
            return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]" if good_first(text) else "[[B>A]]"})
        if name in ("lwe_vanilla_verdict", "lwe_case_verdict"):
            return json.dumps({"explanation": "e", "verdict": "A" if good_first(text) else "B"})
        if name == "lwe_feedback":
            return FEEDBACK
        if name == "flip_inferred_instruction":
            token = ITEM_TOKEN.search(text)
            assert token, "no item token"
            inferred = self.instructions[token.group(2)] if token.group(1) == "GOOD" else "Write a poem about the sea."
            return json.dumps({"INFERRED INSTRUCTION": inferred, "REASONING": "r"})
        if name == "pointwise_rating":
            return json.dumps({"REASONING": "r", "SCORE": "9" if "GOOD-" in text.split("[AI Answer]")[1] else "3"})
        if name == "grade_selection":
            instruction = text.split("[User Instruction]")[1]
            item = item_of(instruction) if ITEM_TOKEN.search(instruction) else None
            blocks = OPTION_BLOCK.findall(text)
            pick = next(int(n) for n, body in blocks if "GOOD-" in body and (item is None or f"GOOD-{item}" in body))
            return json.dumps({"evaluation": "e", "selection": f"Option {pick}", "explanation": "x"})
        return "Judge which answer follows the instruction better."  # LWE's free-text prompts (build, refine)


right_judge = TokenJudge(PROMPTS)
