"""A run of a judging function of the test's own, written as runtime/run.py writes a tool call's: for the tests and
perf scripts that judge with a function (a method called with keywords, a method wrapped to observe it) rather than
through the method table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from judge_mcp.calls.context import CallContext
from judge_mcp.runtime import run
from judge_mcp.runtime.app import App


async def run_once(
    app: App, tool: str, inputs: dict[str, Any], method: Callable[[CallContext], Awaitable[BaseModel]], *, backend: str | None = None
) -> Any:
    """`method(context)` by one backend (`backend`, None: the environment's), its verdict row written as
    `run.run_method` writes it (logged under `tool` with `inputs`): the result."""
    outcome = await run.judge(app, tool, run.Judges.one(app.backend(backend)), method)
    return await run.record(app, tool, inputs, outcome)
