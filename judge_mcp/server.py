"""The MCP shell: tools, resources and their descriptions. Each tool checks nothing itself beyond its types:
it hands its arguments to a method through `App.run` and returns the method's pydantic model (whose schema is
the tool's outputSchema). Anticipated failures become `ToolError`s with a message naming the problem."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from judge_mcp import __version__
from judge_mcp.app import App
from judge_mcp.backends.base import BackendError
from judge_mcp.config import ConfigError
from judge_mcp.methods import flip, grade_score, lwe, pairwise
from judge_mcp.methods.judge import Judge
from judge_mcp.store import StoreError
from judge_mcp.validation import InputError
from judge_mcp.verdicts import ComparePairResult, FlipResult, GradeScoreResult, LweResult, LweSessionResult

log = logging.getLogger("judge_mcp.server")
R = TypeVar("R", bound=BaseModel)

INSTRUCTIONS = (
    "judge-mcp: LLM-as-a-judge tools. compare_pair judges two answers in both orders with goal-reversed "
    "prompting (winner only when both orders agree); infer_instruction_reward scores responses by how well the "
    "instruction can be recovered from them (FLIP); grade_score_options picks the best of 2-10 options over "
    "every cyclic order and reports the Grade Score; lwe_judge judges a pair while refining a stored meta-prompt."
)

JUDGING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
BackendArg = Annotated[str | None, Field(description="a backend named in the JUDGE_MCP_CONFIG TOML file; default: the environment's")]


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
    """The first anticipated failure in `exc`, looking inside exception groups (concurrent trials raise those)."""
    if isinstance(exc, ANTICIPATED):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = anticipated(inner)
            if found is not None:
                return found
    return None


async def _run(app: App, tool: str, inputs: dict[str, Any], method: Callable[[Judge], Awaitable[R]], backend: str | None, ctx: Context | None) -> R:
    try:
        return await app.run(tool, inputs, method, backend=backend, progress=_progress(ctx))
    except Exception as exc:
        known = anticipated(exc)
        if known is not None:
            raise ToolError(str(known)) from exc
        log.exception("%s failed unexpectedly", tool)
        raise ToolError(f"internal error in {tool}: {type(exc).__name__}: {exc}") from exc


def build_server(app: App | None = None) -> MCPServer:
    app = app or App()
    server = MCPServer(name="judge-mcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    server.app = app  # type: ignore[attr-defined]  (for the CLI and tests)

    @server.tool(annotations=JUDGING, title="Compare two answers (goal-reversed, both orders)")
    async def compare_pair(
        prompt: Annotated[str, Field(description="the user prompt both answers respond to")],
        response_a: Annotated[str, Field(description="answer A")],
        response_b: Annotated[str, Field(description="answer B")],
        goal: Annotated[Literal["worse", "better"], Field(description="ask which answer is worse (GRP, default) or better")] = "worse",
        template: Annotated[Literal["sop", "cot", "direct"], Field(description="sop: judge answers first (Arena-Hard); cot; direct")] = "sop",
        swap: Annotated[bool, Field(description="judge both orders (default); winner only when they agree")] = True,
        max_tokens: Annotated[int | None, Field(description="answer budget in tokens, 1..32768 (default: 4096, JudgeBench's Arena-Hard judge)")] = None,
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> ComparePairResult:
        """Judge which of two answers is better, asking the model which is *worse* (goal-reversed prompting) in
        both A/B orders concurrently. `winner` is A or B only when both orders agree; otherwise null with
        `consistent: false` (position bias shows up as inconsistency, not as a wrong verdict)."""
        inputs = dict(prompt=prompt, response_a=response_a, response_b=response_b, goal=goal, template=template, swap=swap, max_tokens=max_tokens)
        return await _run(app, "compare_pair", inputs, lambda j: pairwise.compare_pair(j, **inputs), backend, ctx)

    @server.tool(annotations=JUDGING, title="FLIP reward: infer the instruction back from each response")
    async def infer_instruction_reward(
        instruction: Annotated[str, Field(description="the instruction (or, with context, the system prompt) the responses should follow")],
        responses: Annotated[list[str], Field(description="1 to 16 candidate responses")],
        context: Annotated[str | None, Field(description="optional user prompt or conversation; then `instruction` is a system prompt")] = None,
        similarity: Annotated[
            Literal["f1", "rouge_l", "token_sort"],
            Field(description="f1 (word-level F1, default), rouge_l (ROUGE-L F-measure) or token_sort (rapidfuzz token_sort_ratio)"),
        ] = "f1",
        prompt_variant: Annotated[int, Field(description="the FLIP paper's inference prompt 1 (default), 2 or 3")] = 1,
        answer_order: Annotated[Literal["reasoning_first", "instruction_first"], Field(description="reasoning_first (the paper's, default) or instruction_first (for small models)")] = "reasoning_first",
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> FlipResult:
        """Reference-free reward (FLIP): the model infers, from each response alone, the instruction it answers;
        the reward is the similarity between inferred and given instruction. Ranks the responses."""
        inputs = dict(instruction=instruction, responses=responses, context=context, similarity=similarity, prompt_variant=prompt_variant, answer_order=answer_order)
        return await _run(app, "infer_instruction_reward", inputs, lambda j: flip.infer_instruction_reward(j, **inputs), backend, ctx)

    @server.tool(annotations=JUDGING, title="Pick the best option over every cyclic order (Grade Score)")
    async def grade_score_options(
        instruction: Annotated[str, Field(description="the question or task the options answer")],
        options: Annotated[list[str], Field(description="2 to 10 candidate options")],
        prompt_variant: Annotated[int, Field(description="the Grade Score paper's judge prompt A.1-A.4 (1..4, default 2)")] = 2,
        unrelated_option: Annotated[bool, Field(description="add an option answering a different instruction as a sanity check")] = False,
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> GradeScoreResult:
        """Multiple-choice judging: one trial per cyclic rotation of the options (each option at each position
        once), reporting the winner, the position entropy (llm_score), the choice stability (choice_score) and
        their harmonic mean, the Grade Score."""
        inputs = dict(instruction=instruction, options=options, prompt_variant=prompt_variant, unrelated_option=unrelated_option)
        return await _run(app, "grade_score_options", inputs, lambda j: grade_score.grade_score_options(j, **inputs), backend, ctx)

    @server.tool(annotations=JUDGING, title="Judge a pair while learning a meta-prompt (LWE)")
    async def lwe_judge(
        prompt: Annotated[str, Field(description="the user prompt both answers respond to")],
        response_a: Annotated[str, Field(description="answer A")],
        response_b: Annotated[str, Field(description="answer B")],
        session: Annotated[str, Field(description="session name [A-Za-z0-9_.-]{1,64}; each has its own meta-prompt")] = "default",
        selective: Annotated[bool, Field(description="only cases judged inconsistently in both orders take the meta-prompt path")] = True,
        batch_size: Annotated[int, Field(description="feedback items per refinement (used when the session is created)")] = 4,
        backend: BackendArg = None,
        ctx: Context | None = None,
    ) -> LweResult:
        """Learning While Evaluating: a vanilla judgment in both orders; inconsistent cases get a case-specific
        evaluation prompt written from the session's meta-prompt, and the judge's self-feedback refines that
        meta-prompt every `batch_size` cases (stored, versioned, shared across calls and restarts)."""
        inputs = dict(prompt=prompt, response_a=response_a, response_b=response_b, session=session, selective=selective, batch_size=batch_size)
        return await _run(app, "lwe_judge", inputs, lambda j: lwe.lwe_judge(j, **inputs), backend, ctx)

    @server.tool(
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False),
        title="Show, reset or roll back an LWE session",
    )
    def lwe_session(
        action: Annotated[Literal["show", "reset", "rollback"], Field(description="show the session, reset to the initial meta-prompt, or roll back to `version`")] = "show",
        session: Annotated[str, Field(description="session name")] = "default",
        version: Annotated[int | None, Field(description="for rollback: the version to restore")] = None,
    ) -> LweSessionResult:
        """Inspect or manage an LWE session's meta-prompt lineage. Reset and rollback add a new version (history is
        never rewritten)."""
        try:
            return lwe.lwe_session(app.store, session=session, action=action, version=version)
        except InputError as exc:
            raise ToolError(str(exc)) from exc

    @server.resource("lwe://sessions", name="lwe-sessions", description="LWE sessions with versions and counts", mime_type="application/json")
    def sessions_resource() -> str:
        return json.dumps(lwe.list_sessions(app.store), indent=2)

    @server.resource("lwe://sessions/{session}/meta-prompt", name="lwe-meta-prompt", description="the session's current meta-prompt", mime_type="text/plain")
    def meta_prompt_resource(session: str) -> str:
        try:
            return lwe.meta_prompt_text(app.store, session)
        except InputError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource("lwe://sessions/{session}/history", name="lwe-history", description="every meta-prompt version with time and reason", mime_type="application/json")
    def history_resource(session: str) -> str:
        try:
            return json.dumps(lwe.session_history(app.store, session), indent=2)
        except InputError as exc:
            raise ResourceError(str(exc)) from exc

    return server
