"""The bench's fixture datasets (tests/bench_fixtures) and `bench()`, which runs one method over one of them against a
scripted judge through a real App. The fixtures' answers are token-marked (GOOD-<id> right, BAD-<id> wrong), so
`right_judge` (judge_mcp/bench/scripted_judges.TokenJudge) is right on every item."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from judge_mcp.bench.data import load_items
from judge_mcp.bench.runner import RunSpec, run
from judge_mcp.bench.scripted_judges import TokenJudge
from tests.helpers import app_env, make_app

FIXTURES = Path(__file__).resolve().parent.parent / "bench_fixtures"
PAIRS = FIXTURES / "pairs.jsonl"  # 6 pairs (alpha: p1-p3, beta: p4-p6) and one degenerate (p0)
LISTS = FIXTURES / "lists.jsonl"  # 4 listwise items, best at 0, 2, 1, 3
PAIR_ITEMS = {it.id: it for it in load_items(PAIRS)}
LIST_ITEMS = {it.id: it for it in load_items(LISTS)}
PROMPTS = {**{k: v.prompt for k, v in PAIR_ITEMS.items()}, **{k: v.prompt for k, v in LIST_ITEMS.items()}}
right_judge = TokenJudge(PROMPTS)


async def bench(scripted, responder, dataset: Path, method: str, tmp_path: Path, db_name: str = "bench.db", **kw) -> tuple[dict, Any]:
    """(summary, scripted server): `method` over `dataset` against `responder` (or the scripted server given as
    `server=`), in the database tmp_path/db_name; `app_concurrency` sets the backend's concurrency (4), the rest is
    RunSpec's."""
    server = kw.pop("server", None) or scripted(responder)
    env = app_env(server, tmp_path / db_name, JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_CONCURRENCY=str(kw.pop("app_concurrency", 4)))
    app = make_app(env)
    try:
        summary = await run(app, RunSpec(dataset=dataset, method=method, **kw), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    return summary, server
