"""The Python API: the server's tools as async methods, for eval scripts and test suites that do not speak MCP.

    from judge_mcp import Judge

    async with Judge() as judge:
        result = await judge.compare_pair(prompt="Sum 1..100?", response_a="5050", response_b="5000")
        result.winner  # "A", "B" or None (the two orders disagreed, or an answer was unparsed)

A `Judge` is one App (app.py), like one running server: the same settings (the JUDGE_MCP_* environment, with the
keywords on top), the same database (call cache, verdict log, LWE sessions; `judge_stats` counts these calls with
the server's), the same backends. Each method takes the tool's arguments as keywords, checks them with the tool's
argument model (contract/args.py) and returns the tool's result model (contract/results.py). Whatever the tool would answer with an
error (bad arguments, a configuration problem, a backend that failed after its retries, the database) raises
JudgeError with the same message; an unparsed model answer is a result that says so, as over MCP.

One Judge may serve several event loops at once (threads each running `asyncio.run`): each loop gets its own backend
sessions and limits over the one database, closed when that loop ends (runtime/loop_apps.py).
`prompt`, `instruction` and `context` take a conversation, the answers, options and responses a trajectory: a list
of messages, as dicts or as `judge_mcp.Message` (with `judge_mcp.ToolCall`s), as over MCP.

Image arguments may be data: URIs or, as over stdio, file paths inside the JUDGE_MCP_IMAGE_DIRS folders: the
script runs with its user's own rights, as a stdio server does.

A call goes through the server's own front door (server/tools.py: `invoke`), so whatever a tool call gets over MCP a
method call gets here, in the same order: the arguments and images checked, the tenant (`local`, as over stdio), the
methods' preload held off while it runs, the telemetry span, and a misspelt JUDGE_MCP_* variable named in the
result's `warnings` and in a JudgeError's message.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from judge_mcp import tenants
from judge_mcp.contract import images as imagelib
from judge_mcp.server import tools
from judge_mcp.runtime.loop_apps import LoopApps
from judge_mcp.runtime.app import App
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import JudgingArgs
from judge_mcp.calls.context import ProgressFn
from judge_mcp.backends.local_models import start_note
from judge_mcp.config.bundled import cap_bundled
from judge_mcp.config.settings import ConfigError, load_settings_over
from judge_mcp.contract.results import (
    ComparePairResult, FlipResult, GradeScoreResult, LabelResult, LweResult, LweSessionResult, StatsReport,
)
from judge_mcp.contract.results import ScoreResponseResult
from judge_mcp.storage.engine import StoreError

log = logging.getLogger(__name__)


class JudgeError(Exception):
    """What the tool would have answered with an error; the message names the problem (the cause is chained)."""


class Judge:
    """The judge-mcp tools as async methods on one App. `db` (a SQLite path or a postgresql:// URL) and `config`
    (a backends TOML file) stand for JUDGE_MCP_DB and JUDGE_MCP_CONFIG; `env` sets any other JUDGE_MCP_* setting
    for this Judge only (e.g. {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_MODEL": "gpt-4o"}); `backend` names the
    TOML backend a call uses when it names none. Use it as an async context manager, or call `aclose()`."""

    def __init__(
        self, *, db: str | os.PathLike[str] | None = None, config: str | os.PathLike[str] | None = None,
        backend: str | None = None, env: dict[str, str] | None = None,
    ) -> None:
        overrides = dict(env or {})
        if db is not None:
            overrides["JUDGE_MCP_DB"] = os.fspath(db)
        if config is not None:
            overrides["JUDGE_MCP_CONFIG"] = os.fspath(config)
        try:
            settings, capped = cap_bundled(load_settings_over(overrides))
            for name in capped:
                log.warning("%s", start_note(name))
            if backend is not None:
                settings.backend(backend)  # an unknown name fails here, not at the first call
            self.app = App(settings)
        except (ConfigError, StoreError) as exc:
            raise JudgeError(str(exc)) from exc
        self.default_backend = backend
        self._paths = imagelib.PathPolicy(stdio=True, dirs=settings.image_dirs)
        self._loops = LoopApps(self.app)  # each event loop calling this Judge gets its own backends (runtime/loop_apps.py)

    async def __aenter__(self) -> Judge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for verdict rows still being written, close this event loop's backends and the database. (Another
        loop's backends close when that loop ends; its later calls fail on the closed database.)"""
        await self._loops.close_current()
        await self.app.aclose()

    async def compare_pair(self, progress: ProgressFn | None = None, **arguments: Any) -> ComparePairResult:
        """compare_pair's arguments as keywords (prompt, response_a, response_b, criteria, reference, template,
        swap, images, backend or backends, ...): goal-reversed pairwise judging in both orders."""
        return await self._run("compare_pair", arguments, progress)

    async def infer_instruction_reward(self, progress: ProgressFn | None = None, **arguments: Any) -> FlipResult:
        """infer_instruction_reward's arguments as keywords (instruction, responses, ...): FLIP rewards."""
        return await self._run("infer_instruction_reward", arguments, progress)

    async def grade_score_options(self, progress: ProgressFn | None = None, **arguments: Any) -> GradeScoreResult:
        """grade_score_options' arguments as keywords (instruction, options, ...): every cyclic order, Grade Score."""
        return await self._run("grade_score_options", arguments, progress)

    async def lwe_judge(self, progress: ProgressFn | None = None, **arguments: Any) -> LweResult:
        """lwe_judge's arguments as keywords (session, prompt, response_a, response_b, ...): Selective LWE."""
        return await self._run("lwe_judge", arguments, progress)

    async def score_response(self, progress: ProgressFn | None = None, **arguments: Any) -> ScoreResponseResult:
        """score_response's arguments as keywords (instruction, response, criteria, scale, samples, ...): pointwise
        scores against a rubric, one call per criterion and sample."""
        return await self._run("score_response", arguments, progress)

    async def lwe_session(self, **arguments: Any) -> LweSessionResult:
        """lwe_session's arguments as keywords (session, action "show" / "reset" / "rollback", version)."""
        return await self._run("lwe_session", arguments, None)

    async def judge_stats(self, **arguments: Any) -> StatsReport:
        """judge_stats' arguments as keywords (last): the bias telemetry of the verdict log."""
        return await self._run("judge_stats", arguments, None)

    async def record_label(self, **arguments: Any) -> LabelResult:
        """record_label's arguments as keywords (verdict_id from a result, label, note): a verdict's correct answer,
        for judge_stats' agreement figures."""
        return await self._run("record_label", arguments, None)

    async def _run(self, tool: str, arguments: dict[str, Any], progress: ProgressFn | None) -> Any:
        """The tool called through the server's own front door (server/tools.py: `invoke`), as the script's user."""
        spec = tools.BY_NAME[tool]
        if issubclass(spec.models()[0], JudgingArgs) and self.default_backend is not None and "backend" not in arguments and not arguments.get("backends"):
            arguments = {**arguments, "backend": self.default_backend}
        try:
            app = await self._loops.current()
        except RuntimeError as exc:
            raise JudgeError(str(exc)) from None
        try:
            return await tools.invoke(app, spec, arguments, tools.Caller(self._paths, tenants.LOCAL, progress))
        except (InputError, ToolError) as exc:
            raise JudgeError(str(exc)) from exc
