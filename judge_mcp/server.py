"""The MCP shell: tools, prompts, resources and their descriptions. Each tool's limits are in its signature (so
they are in its inputSchema; `tool_args` checks them and reports them readably); the tool hands its arguments to
a method through `App.run` and returns the method's pydantic model (whose schema is the tool's outputSchema).
Anticipated failures become `ToolError`s with a message naming the problem."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

import anyio.to_thread

from judge_mcp import __version__, prompts, stats, tool_args
from judge_mcp.app import App
from judge_mcp.backends.errors import BackendError
from judge_mcp.config import ConfigError
from judge_mcp.methods import flip, grade_score, lwe, panel, registry
from judge_mcp.validation import MAX_TEXT_CHARS, SESSION_PATTERN
from judge_mcp.storage.sqlite import StoreError
from judge_mcp.validation import InputError
from judge_mcp.outputs import ComparePairResult, FlipResult, GradeScoreResult, LweResult, LweSessionResult

log = logging.getLogger("judge_mcp.server")

INSTRUCTIONS = (
    "judge-mcp: LLM-as-a-judge tools. compare_pair judges two answers in both orders with goal-reversed "
    "prompting (winner only when both orders agree); infer_instruction_reward scores responses by how well the "
    "instruction can be recovered from them (FLIP); grade_score_options picks the best of 2-10 options over "
    "every cyclic order and reports the Grade Score; lwe_judge judges a pair while refining a stored meta-prompt. "
    "compare_pair and grade_score_options take a panel of backends (`backends`); judge_stats reports each judge's "
    "position bias, inconsistency and parse failures from the verdict log: read it before trusting a judge."
)

# A judgment reads its inputs and asks a model: it changes nothing the caller owns (the verdict log only grows),
# and the same call gives the same answer (temperature 0, the call cache).
JUDGING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
# lwe_judge: each inconsistent case buffers feedback and may refine the session's meta-prompt, so a repeat differs.
LEARNING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
ADMIN = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
BackendArg = Annotated[str | None, Field(max_length=64, description="a backend named in the JUDGE_MCP_CONFIG TOML file; default: the environment's")]
BackendsArg = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]] | None,
    Field(
        min_length=panel.MIN_MEMBERS,
        max_length=panel.MAX_MEMBERS,
        json_schema_extra={"uniqueItems": True},
        description="a judge panel: 2-8 distinct backend names (JUDGE_MCP_CONFIG; 'default' is the environment's); each judges "
        "concurrently and the verdict is the majority of those that answered. Not with `backend`",
    ),
]
ExcludeArg = Annotated[
    bool, Field(description="leave out every judge of the same model family as an answer's author (needs response_models)")
]
SessionArg = Annotated[str, Field(pattern=SESSION_PATTERN, description="session name, [A-Za-z0-9_.-]{1,64}; each has its own meta-prompt")]


def _progress(ctx: Context | None) -> Callable[[float, float | None, str | None], Awaitable[None]] | None:
    if ctx is None:
        return None

    async def report(done: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.report_progress(done, total, message)
        except Exception:  # a client that went away must not fail the judgment
            log.debug("progress notification failed", exc_info=True)

    return report


ANTICIPATED = (InputError, ConfigError, BackendError, StoreError)


def anticipated(exc: BaseException) -> BaseException | None:
    """The anticipated failure in `exc`. Methods raise their concurrent calls' first error bare (fanout.run_each
    unwraps its task group); this still looks inside an exception group, should another task group raise one."""
    if isinstance(exc, ANTICIPATED):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = anticipated(inner)
            if found is not None:
                return found
    return None


async def _run(
    app: App,
    tool: str,
    inputs: dict[str, Any],
    backend: str | None,
    ctx: Context | None,
    *,
    backends: list[str] | None = None,
    authors: panel.Authors | None = None,
    log_extra: dict[str, Any] | None = None,
) -> Any:
    """Run the method registered as `tool` (methods/registry.py), by one backend or a panel; anticipated failures
    become ToolErrors."""
    try:
        result, _ = await registry.call(
            app, tool, inputs, backend=backend, backends=backends, authors=authors, progress=_progress(ctx), log_extra=log_extra
        )
        return result
    except Exception as exc:
        known = anticipated(exc)
        if known is not None:
            raise ToolError(str(known)) from exc
        log.exception("%s failed unexpectedly", tool)
        raise ToolError(f"internal error in {tool}: {type(exc).__name__}: {exc}") from exc


def _panel_args(
    backend: str | None, backends: Any, response_models: Any, exclude_same_family: Any, names: list[str], what: str
) -> tuple[list[str] | None, panel.Authors | None, dict[str, Any]]:
    """(backends, authors, the extra inputs to log) from a judging tool's panel and self-preference arguments."""
    try:
        members = panel.check_backends(backend, backends)
        models = panel.check_response_models(response_models, len(names), what, exclude_same_family)
    except InputError as exc:
        raise ToolError(str(exc)) from exc
    authors = panel.Authors(models, names, exclude_same_family) if models is not None else None
    logged = {"backends": members} if members else {}
    if models is not None:
        logged.update(response_models=models, exclude_same_family=exclude_same_family)
    return members, authors, logged


def build_server(app: App | None = None) -> MCPServer:
    app = app or App()
    server = MCPServer(name="judge-mcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    server.app = app  # type: ignore[attr-defined]  (for the CLI and tests)

    @server.tool(annotations=JUDGING, title="Compare two answers (goal-reversed, both orders)")
    async def compare_pair(
        prompt: Annotated[Text, Field(description="the user prompt both answers respond to")],
        response_a: Annotated[Text, Field(description="answer A")],
        response_b: Annotated[Text, Field(description="answer B")],
        goal: Annotated[Literal["worse", "better"], Field(description="ask which answer is worse (GRP, default) or better")] = "worse",
        template: Annotated[Literal["sop", "cot", "direct"], Field(description="sop: judge answers first (Arena-Hard); cot; direct")] = "sop",
        swap: Annotated[
            bool | Literal["auto"],
            Field(description='true: judge both orders (default), winner only when they agree; false: one order; "auto": '
                  "the second order only when the first is not confident (see swap_margin) or has no probabilities"),
        ] = True,
        swap_margin: Annotated[
            float | None,
            Field(ge=0.0, le=1.0, description='swap "auto" only: run the second order when the first\'s |p_A - p_B| is under this (default 0.5, i.e. p < 0.75)'),
        ] = None,
        max_tokens: Annotated[
            int | None, Field(ge=1, le=32768, description="answer budget in tokens, 1..32768 (default: 4096, JudgeBench's Arena-Hard judge)")
        ] = None,
        backend: BackendArg = None,
        backends: BackendsArg = None,
        response_models: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=panel.MAX_MODEL_CHARS)]] | None,
            Field(min_length=2, max_length=2, description="the models that wrote response_a and response_b, e.g. [\"gpt-4o\", \"claude-sonnet-4-5\"]: a judge of the same family gets a warning"),
        ] = None,
        exclude_same_family: ExcludeArg = False,
        ctx: Context | None = None,
    ) -> ComparePairResult:
        """Judge which of two answers to the same prompt is better, asking the model which is *worse*
        (goal-reversed prompting) in both A/B orders concurrently. `winner` is A or B only when both orders agree;
        otherwise null with `consistent: false` (position bias shows up as inconsistency, not as a wrong verdict;
        with swap=false, `consistent` is null). Where the backend returns token log-probabilities (OpenAI-compatible
        servers, the embedded model), `p_better` gives each answer's probability of being the better one, averaged
        over both orders so position bias cancels; null where there are none. swap="auto" judges the second order
        only when the first is not confident.

        Use it for exactly two candidates (two drafts, two patches, before/after). For 3-10 candidates use
        grade_score_options; to score responses against an instruction without a judge prompt, use
        infer_instruction_reward; for a stream of pairs in one domain where the judge should learn, lwe_judge.
        Cost: 2 backend calls (1 with swap=false, 1 or 2 with swap="auto"), plus one re-ask per unparsed answer; with
        `backends`, that per panel member (the verdict is the majority of the members that answered)."""
        inputs = dict(prompt=prompt, response_a=response_a, response_b=response_b, goal=goal, template=template, swap=swap, max_tokens=max_tokens)
        if swap_margin is not None:
            inputs["swap_margin"] = swap_margin
        members, authors, logged = _panel_args(backend, backends, response_models, exclude_same_family, ["response_a", "response_b"], "response_a, response_b")
        return await _run(app, "compare_pair", inputs, backend, ctx, backends=members, authors=authors, log_extra=logged)

    @server.tool(annotations=JUDGING, title="FLIP reward: infer the instruction back from each response")
    async def infer_instruction_reward(
        instruction: Annotated[Text, Field(description="the instruction (or, with context, the system prompt) the responses should follow")],
        responses: Annotated[list[Text], Field(min_length=1, max_length=flip.MAX_RESPONSES, description="1 to 16 candidate responses")],
        context: Annotated[Text | None, Field(description="optional user prompt or conversation; then `instruction` is a system prompt")] = None,
        similarity: Annotated[
            Literal["f1", "rouge_l", "token_sort"],
            Field(description="f1 (word-level F1, default), rouge_l (ROUGE-L F-measure) or token_sort (rapidfuzz token_sort_ratio)"),
        ] = "f1",
        prompt_variant: Annotated[Literal[1, 2, 3], Field(description="the FLIP paper's inference prompt 1 (default), 2 or 3")] = 1,
        answer_order: Annotated[
            Literal["reasoning_first", "instruction_first"],
            Field(description="reasoning_first: the paper's answer order (default); instruction_first: for small models that loop in the explanation"),
        ] = "reasoning_first",
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> FlipResult:
        """Reference-free reward (FLIP): the model infers, from each response alone, the instruction it answers;
        the reward is the similarity (word-level F1) between inferred and given instruction. Ranks the responses.

        Use it to score or rank 1-16 responses to one instruction without a reference answer, e.g. as a reward
        for best-of-n sampling; it holds up where small judges fail at direct judging, and text inside a response
        cannot address a judge. For a head-to-head verdict use compare_pair. Cost: n backend calls (one per
        response), plus one re-ask per unparsed answer."""
        inputs = dict(instruction=instruction, responses=responses, context=context, similarity=similarity, prompt_variant=prompt_variant, answer_order=answer_order)
        return await _run(app, "infer_instruction_reward", inputs, backend, ctx)

    @server.tool(annotations=JUDGING, title="Pick the best option over every cyclic order (Grade Score)")
    async def grade_score_options(
        instruction: Annotated[Text, Field(description="the question or task the options answer")],
        options: Annotated[
            list[Text], Field(min_length=grade_score.MIN_OPTIONS, max_length=grade_score.MAX_OPTIONS, description="2 to 10 candidate options")
        ],
        prompt_variant: Annotated[Literal[1, 2, 3, 4], Field(description="the Grade Score paper's judge prompt A.1-A.4 (1..4, default 2)")] = 2,
        unrelated_option: Annotated[bool, Field(description="add an option answering a different instruction as a sanity check")] = False,
        backend: BackendArg = None,
        backends: BackendsArg = None,
        response_models: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=panel.MAX_MODEL_CHARS)]] | None,
            Field(min_length=grade_score.MIN_OPTIONS, max_length=grade_score.MAX_OPTIONS, description="the model that wrote each option, one per option: a judge of the same family gets a warning"),
        ] = None,
        exclude_same_family: ExcludeArg = False,
        ctx: Context | None = None,
    ) -> GradeScoreResult:
        """Multiple-choice judging: one trial per cyclic rotation of the options (each option at each position
        once), reporting the winner, the position entropy (llm_score), the choice stability (choice_score) and
        their harmonic mean, the Grade Score.

        Use it to pick the best of 2-10 options and to see how much to trust that pick (a low Grade Score means
        the judge's choice moves with the order). For two candidates compare_pair is cheaper. Cost: n backend
        calls for n options (n+1 with unrelated_option), plus one re-ask per unparsed answer; with `backends`, that
        per panel member (the winner is the majority of the members that answered)."""
        inputs = dict(instruction=instruction, options=options, prompt_variant=prompt_variant, unrelated_option=unrelated_option)
        names = [f"options[{i}]" for i in range(len(options))]
        members, authors, logged = _panel_args(backend, backends, response_models, exclude_same_family, names, "one per option")
        return await _run(app, "grade_score_options", inputs, backend, ctx, backends=members, authors=authors, log_extra=logged)

    @server.tool(annotations=LEARNING, title="Judge a pair while learning a meta-prompt (LWE)")
    async def lwe_judge(
        prompt: Annotated[Text, Field(description="the user prompt both answers respond to")],
        response_a: Annotated[Text, Field(description="answer A")],
        response_b: Annotated[Text, Field(description="answer B")],
        session: SessionArg = "default",
        selective: Annotated[bool, Field(description="only cases judged inconsistently in both orders take the meta-prompt path")] = True,
        batch_size: Annotated[
            int, Field(ge=1, le=lwe.MAX_BATCH_SIZE, description="feedback items per refinement (used when the session is created)")
        ] = 4,
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> LweResult:
        """Learning While Evaluating: a vanilla judgment in both orders; inconsistent cases get a case-specific
        evaluation prompt written from the session's meta-prompt, and the judge's self-feedback refines that
        meta-prompt every `batch_size` cases (stored, versioned, shared across calls and restarts).

        Use it for many pairwise judgments in one domain, where the judge should get better at that domain as it
        goes; for a one-off comparison compare_pair is cheaper and stateless. Not idempotent: an inconsistent case
        buffers feedback in the session and may trigger a refinement. Cost: 2 backend calls when both orders
        agree; up to 9 otherwise (evaluation prompt, judgment, feedback, and a refinement and condensation when a
        batch is due)."""
        inputs = dict(prompt=prompt, response_a=response_a, response_b=response_b, session=session, selective=selective, batch_size=batch_size)
        return await _run(app, "lwe_judge", inputs, backend, ctx)

    @server.tool(annotations=READ_ONLY, title="Show an LWE session (read-only)")
    async def lwe_session_show(session: SessionArg = "default") -> LweSessionResult:
        """Show an LWE session: its current meta-prompt, batch size, pending feedback and every version. Read-only
        (the same as lwe_session with action "show"); the lwe:// resources give the same data. No backend calls."""
        return await _session_admin(app, session=session, action="show", version=None)

    @server.tool(annotations=ADMIN, title="Show, reset or roll back an LWE session")
    async def lwe_session(
        action: Annotated[Literal["show", "reset", "rollback"], Field(description="show the session, reset to the initial meta-prompt, or roll back to `version`")] = "show",
        session: SessionArg = "default",
        version: Annotated[int | None, Field(ge=1, le=2**31 - 1, description="for rollback: the version to restore")] = None,
    ) -> LweSessionResult:
        """Manage an LWE session's meta-prompt lineage: reset it to the initial meta-prompt (drops the buffered
        feedback) or roll it back to an earlier version; "show" reads it. Reset and rollback add a new version
        (history is never rewritten), but they change what every later lwe_judge call in the session uses. For
        read-only inspection use lwe_session_show. No backend calls."""
        return await _session_admin(app, session=session, action=action, version=version)

    @server.prompt(title="Compare two drafts", description="Judge which of two drafts better does a task (calls compare_pair)")
    def compare_drafts(task: str, draft_a: str, draft_b: str) -> str:
        return prompts.render("mcp_compare_drafts.txt", task=task, draft_a=draft_a, draft_b=draft_b)

    @server.prompt(title="Pick the best option", description="Pick the best of several options, one per line or separated by a line with ---, and say how stable the pick is (calls grade_score_options)")
    def pick_best(question: str, options: str) -> str:
        listed = split_options(options)
        return prompts.render("mcp_pick_best.txt", question=question, options=json.dumps(listed, ensure_ascii=False))

    @server.resource("lwe://sessions", name="lwe-sessions", description="LWE sessions with versions and counts", mime_type="application/json")
    def sessions_resource() -> str:
        return json.dumps(lwe.list_sessions(app.store), indent=2)

    @server.resource("lwe://sessions/{session}/meta-prompt", name="lwe-meta-prompt", description="the session's current meta-prompt", mime_type="text/plain")
    def meta_prompt_resource(session: str) -> str:
        try:
            return lwe.meta_prompt_text(app.store, session)
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    @server.resource("lwe://sessions/{session}/history", name="lwe-history", description="every meta-prompt version with time and reason", mime_type="application/json")
    def history_resource(session: str) -> str:
        try:
            return json.dumps(lwe.session_history(app.store, session), indent=2)
        except InputError as exc:
            raise ResourceNotFoundError(str(exc)) from exc

    # ---- bias telemetry (judge_mcp/stats.py): the same report as a resource, a template and a read-only tool ----
    @server.resource(
        "judge://stats", name="judge-stats", mime_type="application/json",
        description=f"bias telemetry from the verdict log per backend/model/tool: all time and the last {stats.DEFAULT_LAST} verdicts",
    )
    def stats_resource() -> str:  # sync: the SDK runs it in a worker thread
        return _stats_json(app, stats.DEFAULT_LAST)

    @server.resource(
        "judge://stats/last/{n}", name="judge-stats-last", mime_type="application/json",
        description=f"bias telemetry: all time and the last n verdicts (n from 1 to {stats.MAX_LAST:,})",
    )
    def stats_last_resource(n: str) -> str:
        try:
            last = stats.check_last(n, name="n")
        except ValueError as exc:
            raise ResourceNotFoundError(f"judge://stats/last/{{n}}: {exc}") from exc
        return _stats_json(app, last)

    @server.tool(annotations=READ_ONLY, title="Bias telemetry of the judges (read-only)")
    async def judge_stats(
        last: Annotated[int, Field(ge=1, le=stats.MAX_LAST, description=f"size of the recent window: the newest `last` verdicts (default {stats.DEFAULT_LAST})")] = stats.DEFAULT_LAST,
    ) -> stats.StatsReport:
        """How far to trust each judge, from the verdict log, per backend/model/tool, over all time and the newest
        `last` verdicts: position_bias (share of parsed trials naming the first-shown answer; compare with
        `unbiased`, 0.5 for pairs), order_inconsistency (both orders parsed and disagreeing), parse_failures and
        reasks (per answer), ties (no winner / tied best / tied mode), length_preference (decided pairs won by the
        longer answer) and mean calls, cached_calls and latency_ms. Each rate has its count and denominator `of`;
        a null rate means nothing to count yet.

        Use it before relying on a judge's verdicts, or to see whether a backend's habits changed lately. Read-only,
        the same report as the judge://stats resources. No backend calls."""
        try:
            report = await anyio.to_thread.run_sync(lambda: stats.from_store(app.store, last))
            return report.model_copy(update={"verdict_log": app.verdict_writes.health()})
        except StoreError as exc:
            raise ToolError(str(exc)) from exc

    tool_args.install(server)
    return server


def _stats_json(app: App, last: int) -> str:
    try:
        report = stats.from_store(app.store, last)
        return report.model_copy(update={"verdict_log": app.verdict_writes.health()}).model_dump_json(indent=2)
    except StoreError as exc:
        raise ResourceError(str(exc)) from exc


async def _session_admin(app: App, *, session: str, action: str, version: int | None) -> LweSessionResult:
    """lwe_session's work in a worker thread (it reads and writes the store)."""
    try:
        return await anyio.to_thread.run_sync(lambda: lwe.lwe_session(app.store, session=session, action=action, version=version))
    except (InputError, StoreError) as exc:
        raise ToolError(str(exc)) from exc


def split_options(text: str) -> list[str]:
    """The pick_best prompt's options: blocks separated by a line holding only ---, else one per non-empty line."""
    if any(line.strip() == "---" for line in text.splitlines()):
        blocks, current = [], []
        for line in text.splitlines():
            if line.strip() == "---":
                blocks.append("\n".join(current).strip())
                current = []
            else:
                current.append(line)
        blocks.append("\n".join(current).strip())
        return [b for b in blocks if b]
    return [line.strip() for line in text.splitlines() if line.strip()]
