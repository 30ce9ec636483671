"""The MCP server: the tools (judge_mcp/server/tools.py, one function and one argument model each), the prompts and the
resources, wired to one App. Tools, resources and prompts turn anticipated failures into errors naming the problem."""

from __future__ import annotations

import json
from types import ModuleType

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from judge_mcp import __version__, prompts
from judge_mcp.runtime.app import App
from judge_mcp.contract.fields import DEFAULT_LAST, MAX_LAST, InputError
from judge_mcp.methods import registry
from judge_mcp.storage.engine import StoreError
from judge_mcp.server.tools import mcp_tools

INSTRUCTIONS = (
    "judge-mcp: LLM-as-a-judge tools. compare_pair judges two answers in both orders with goal-reversed "
    "prompting (winner only when both orders agree); infer_instruction_reward scores responses by how well the "
    "instruction can be recovered from them (FLIP); grade_score_options picks the best of 2-10 options over "
    "every cyclic order and reports the Grade Score; lwe_judge judges a pair while refining a stored meta-prompt. "
    "compare_pair and grade_score_options take a panel of backends (`backends`); judge_stats reports each judge's "
    "position bias, inconsistency and parse failures from the verdict log: read it before trusting a judge. Every "
    "verdict has a verdict_id: record_label stores its correct answer, and judge_stats reports agreement with those labels."
)


class JudgeServer(MCPServer):
    """The MCP server, holding the App it serves (the CLI and the tests reach its store through `app`)."""

    app: App


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

    @server.resource("lwe://sessions/{session}/meta-prompt", name="lwe-meta-prompt", description="the session's current meta-prompt", mime_type="text/plain")
    def meta_prompt_resource(session: str) -> str:
        lwe = _lwe()
        try:
            return lwe.meta_prompt_text(app.store, session)
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    @server.resource(
        "lwe://sessions/{session}/history", name="lwe-history", description="every meta-prompt version with time and reason", mime_type="application/json"
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
    registry.loaded()
    from judge_mcp.methods import lwe

    return lwe


def _stats_json(app: App, last: int) -> str:
    from judge_mcp.stats import report as stats

    try:
        report = stats.from_store(app.store, last)
        return report.model_copy(update={"verdict_log": app.verdict_writes.health()}).model_dump_json(indent=2)
    except StoreError as exc:
        raise ResourceError(str(exc)) from exc


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
