"""The MCP server: the tools (judge_mcp/server/tools.py, one function and one argument model each), the prompts and the
resources, wired to one App. Tools, resources and prompts turn anticipated failures into errors naming the problem."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types import INVALID_PARAMS

from judge_mcp import prompts, tenants
from judge_mcp._version import __version__
from judge_mcp.runtime.app import App
from judge_mcp.contract.fields import DEFAULT_LAST, MAX_LAST, InputError
from judge_mcp.methods import registry
from judge_mcp.storage.engine import StoreError
from judge_mcp.server.sdk_tools import mcp_tools

INSTRUCTIONS = (
    "judge-mcp: LLM-as-a-judge tools. compare_pair judges two answers in both orders with goal-reversed "
    "prompting (winner only when both orders agree); infer_instruction_reward scores responses by how well the "
    "instruction can be recovered from them (FLIP); grade_score_options picks the best of 2-10 options over "
    "every cyclic order and reports the Grade Score; score_response scores one response against weighted criteria; "
    "lwe_judge judges a pair while refining a stored meta-prompt. "
    "compare_pair, grade_score_options and score_response take a panel of backends (`backends`); judge_stats reports each judge's "
    "position bias, inconsistency and parse failures from the verdict log: read it before trusting a judge. Every "
    "verdict has a verdict_id: record_label stores its correct answer, and judge_stats reports agreement with those labels."
)


class JudgeServer(MCPServer):
    """The MCP server, holding the App it serves (the CLI and the tests reach its store through `app`)."""

    app: App

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._header_free: dict[str, tuple[Any, bool]] = {}  # tool name -> (its input schema, declares no x-mcp-header)
        super().__init__(*args, **kwargs)

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema the SDK checks a tools/call's `Mcp-Param-*` headers against over streamable HTTP, or None
        (nothing to check) when the tool's schema declares no `x-mcp-header`: the SDK's check then answers "no
        mismatch" whatever the headers, after walking the whole schema twice on every call (~100 positions for
        compare_pair). Which schemas declare one is found once per schema, with the SDK's own functions."""
        schema = super()._tool_input_schema(name)
        if schema is None:
            return None
        known = self._header_free.get(name)
        if known is None or known[0] is not schema:
            free = find_invalid_x_mcp_header(schema) is not None or not x_mcp_header_map(schema)
            known = self._header_free[name] = (schema, free)
        return None if known[1] else schema

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        """prompts/get, its arguments checked first: an unknown prompt, a missing or an unknown argument is invalid
        params (-32602) naming it, as the specification says, not an internal error with a traceback."""
        check_prompt_arguments(self._prompt_manager.get_prompt(name), name, arguments)
        return await super().get_prompt(name, arguments, context)

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """A resource read as the caller's tenant (tenants.py): LWE sessions and judge_stats are the tenant's own."""
        with tenants.acting(tenants.of_request(context)):
            return await super().read_resource(uri, context)


def build_server(app: App | None = None) -> JudgeServer:
    app = app or App()
    server = JudgeServer(name="judge-mcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING", tools=mcp_tools(app))
    server.app = app

    @server.prompt(
        title="Compare two drafts",
        description="Judge which of two drafts better does a task (calls compare_pair); optionally against your criteria "
        "(e.g. 'correctness first, then readability' for a code review) or a reference answer",
    )
    def compare_drafts(task: str, draft_a: str, draft_b: str, criteria: str = "", reference: str = "") -> str:
        text = prompts.render("mcp_compare_drafts.txt", task=task, draft_a=draft_a, draft_b=draft_b)
        return text + with_inputs(criteria, reference)

    @server.prompt(
        title="Pick the best option",
        description="Pick the best of several options, one per line or separated by a line with ---, and say how stable the pick is "
        "(calls grade_score_options); optionally against your criteria or a reference answer",
    )
    def pick_best(question: str, options: str, criteria: str = "", reference: str = "") -> str:
        listed = split_options(options)
        text = prompts.render("mcp_pick_best.txt", question=question, options=json.dumps(listed, ensure_ascii=False))
        return text + with_inputs(criteria, reference)

    @server.resource("lwe://sessions", name="lwe-sessions", description="LWE sessions with versions and counts", mime_type="application/json")
    def sessions_resource() -> str:
        lwe = _lwe()
        return json.dumps(lwe.list_sessions(app.store), indent=2)

    # A session name is checked by its own pattern ([A-Za-z0-9_.-]{1,64}: no "/", never a file path), so ".." is a
    # name like any other; the SDK's path-traversal check refused its resources as "Unknown resource".
    session_name = ResourceSecurity(exempt_params={"session"})

    @server.resource(
        "lwe://sessions/{session}/meta-prompt", name="lwe-meta-prompt", description="the session's current meta-prompt", mime_type="text/plain",
        security=session_name,
    )
    def meta_prompt_resource(session: str) -> str:
        lwe = _lwe()
        try:
            return lwe.meta_prompt_text(app.store, session)
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    @server.resource(
        "lwe://sessions/{session}/history", name="lwe-history", description="every meta-prompt version with time and reason", mime_type="application/json",
        security=session_name,
    )
    def history_resource(session: str) -> str:
        lwe = _lwe()
        try:
            return json.dumps(lwe.session_history(app.store, session), indent=2)
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    # ---- bias telemetry (judge_mcp/stats/report.py): the same report as a resource, a template and a read-only tool ----
    @server.resource(
        "judge://stats", name="judge-stats", mime_type="application/json",
        description=f"bias telemetry from the verdict log per backend/model/tool: all time and the last {DEFAULT_LAST} verdicts",
    )
    def stats_resource() -> str:  # sync: the SDK runs it in a worker thread
        return _stats_json(app, DEFAULT_LAST)

    @server.resource(
        "judge://stats/last/{n}", name="judge-stats-last", mime_type="application/json",
        description=f"bias telemetry: all time and the last n verdicts (n from 1 to {MAX_LAST:,})",
    )
    def stats_last_resource(n: str) -> str:
        # lazy: LWE and the stats load at their first use (or with the methods after the handshake), not at start
        from judge_mcp.stats import report as stats

        try:
            last = stats.check_last(n, name="n")
        except ValueError as exc:
            raise ResourceNotFoundError(f"judge://stats/last/{{n}}: {exc}") from exc
        return _stats_json(app, last)

    return server


def _lwe() -> ModuleType:
    """The LWE package, loaded at the first read of a session (or ahead of it, with the methods: registry.preload),
    like the stats at the first read of the report: the server starts without either."""
    return registry.imported("judge_mcp.methods.lwe")


def _stats_json(app: App, last: int) -> str:
    # lazy: LWE and the stats load at their first use (or with the methods after the handshake), not at start
    from judge_mcp.stats import report as stats

    try:
        report = stats.from_store(app.store, last, app.settings.cached_input_price)
        return report.model_copy(update={"verdict_log": app.verdict_writes.health()}).model_dump_json(indent=2)
    except StoreError as exc:
        raise ResourceError(str(exc)) from exc


def check_prompt_arguments(prompt: Prompt | None, name: str, arguments: dict[str, Any] | None) -> None:
    """Raise invalid params (-32602) naming what is wrong with a prompts/get request for `prompt`."""
    if prompt is None:
        raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}")
    declared = prompt.arguments or []
    given = set(arguments or {})
    missing = [a.name for a in declared if a.required and a.name not in given]
    unknown = sorted(given - {a.name for a in declared})
    problems = []
    if missing:
        problems.append(f"missing required argument{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    if unknown:
        problems.append(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}")
    if problems:
        takes = ", ".join(a.name if a.required else f"{a.name} (optional)" for a in declared)
        raise MCPError(INVALID_PARAMS, f"prompt {name!r}: {'; '.join(problems)}; it takes {takes}")


def with_inputs(criteria: str, reference: str) -> str:
    """What an MCP prompt adds when the user gave criteria or a reference answer: nothing when neither was given."""
    text = ""
    if criteria.strip():
        text += "\n" + prompts.render("mcp_with_criteria.txt", criteria=criteria).strip("\n") + "\n"
    if reference.strip():
        text += "\n" + prompts.render("mcp_with_reference.txt", reference=reference).strip("\n") + "\n"
    return text


def split_options(text: str) -> list[str]:
    """The pick_best prompt's options: blocks separated by a line holding only ---, else one per non-empty line."""
    if any(line.strip() == "---" for line in text.splitlines()):
        blocks: list[str] = []
        current: list[str] = []
        for line in text.splitlines():
            if line.strip() == "---":
                blocks.append("\n".join(current).strip())
                current = []
            else:
                current.append(line)
        blocks.append("\n".join(current).strip())
        return [b for b in blocks if b]
    return [line.strip() for line in text.splitlines() if line.strip()]
