"""Running the bench against the scripted batch APIs (testkit/scripted_batches.py) through a named backend
with `batch = true` in a real TOML configuration file and a real SQLite bench database."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

from judge_mcp.bench.runner import RunSpec, run
from testkit.scripted_batches import ScriptedAnthropicBatches, ScriptedOpenAIBatches
from testkit.scripted_judges import first_user
from tests.bench.datasets import PROMPTS, TokenJudge, good_first
from tests.helpers import make_app

POLL_S = 0.02


def pairwise_json(payload: dict[str, Any]) -> str:
    """A right pairwise verdict as JSON (the Anthropic payload carries no schema name to dispatch on)."""
    verdict = "[[A>B]]" if good_first(first_user(payload)) else "[[B>A]]"
    return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": verdict})


def start(kind: str, **kw: Any) -> ScriptedOpenAIBatches | ScriptedAnthropicBatches:
    if kind == "openai":
        return ScriptedOpenAIBatches(TokenJudge(PROMPTS), **kw).__enter__()
    return ScriptedAnthropicBatches(pairwise_json, **kw).__enter__()


def batch_env(server: Any, kind: str, tmp_path: Path, db_name: str = "bench.db") -> dict[str, str]:
    """Environment values whose TOML file names the backend `cheap` (batch = true) at `server`."""
    toml = tmp_path / "backends.toml"
    toml.write_text(
        f'[backends.cheap]\nkind = "{kind}"\nmodel = "scripted-model"\nbase_url = "{server.base_url}"\nbatch = true\n', encoding="utf-8"
    )
    return {"JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_DB": str(tmp_path / db_name), "JUDGE_MCP_MAX_RETRIES": "0"}


async def bench_batch(server: Any, kind: str, dataset: Path, method: str, tmp_path: Path, stream: io.StringIO | None = None, **kw: Any) -> dict[str, Any]:
    app = make_app(batch_env(server, kind, tmp_path))
    try:
        spec = RunSpec(dataset=dataset, method=method, backend="cheap", batch_poll_s=POLL_S, **kw)
        return await run(app, spec, progress_stream=stream or io.StringIO())
    finally:
        await app.aclose()


def db_rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()
