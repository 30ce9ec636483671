"""The MCP tools, one module-level function each: `await compare_pair(app, ComparePairArgs(...))` runs the tool
without any MCP machinery and returns its result model, or raises a ToolError naming the problem.

A tool's signature says everything the server publishes about it: its argument model (judge_mcp/contract/args.py) is the
`inputSchema`, its result model the `outputSchema`, its docstring the description. `mcp_tools(app)` turns TOOLS
into the SDK's Tool objects for build_server: each checks a client's arguments against the model strictly and
readably (`ArgsTool`), then calls the function. The judging tools run their method through the method table
(methods/registry.py), the LWE session tools and judge_stats read the store in a worker thread.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, get_type_hints

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from judge_mcp.contract import image_files
from judge_mcp.contract import images as imagelib
from judge_mcp.telemetry import hooks as telemetry
from judge_mcp import tenants
from judge_mcp.server import schemas as tool_schemas
from judge_mcp.runtime.app import App
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, JudgeStatsArgs, JudgingArgs, LweJudgeArgs,
    LweSessionArgs, LweSessionShowArgs, RecordLabelArgs, ToolArgs,
)
from judge_mcp.backends import sampling
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.context import ProgressFn
from judge_mcp.config.settings import ConfigError
from judge_mcp.methods import registry
from judge_mcp.runtime.run import run_method
from judge_mcp.contract.results import (
    ComparePairResult, FlipResult, GradeScoreResult, LabelResult, LweResult, LweSessionResult, StatsReport,
)
from judge_mcp.contract.rubric import ScoreResponseArgs, ScoreResponseResult
from judge_mcp.storage.engine import StoreError

log = logging.getLogger("judge_mcp.server")

ANTICIPATED = (InputError, ConfigError, BackendError, StoreError)
LABEL_WAIT_S = 5.0  # record_label waits this long for a verdict row still being written in the background


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


async def run_tool(app: App, args: JudgingArgs, progress: ProgressFn | None = None) -> Any:
    """Run the method registered under the arguments' tool, by one backend or a panel; anticipated failures
    become ToolErrors."""
    try:
        result, _ = await run_method(app, args.tool, args, progress=progress)
        return result
    except Exception as exc:
        if sampling.needs_input(exc):  # the client's model has requests to answer first (mcp_tool answers with them)
            raise
        known = anticipated(exc)
        if known is not None:
            raise ToolError(str(known)) from exc
        log.exception("%s failed unexpectedly", args.tool)
        raise ToolError(f"internal error in {args.tool}: {type(exc).__name__}: {exc}") from exc


async def _off_loop(work: Callable[[], Any]) -> Any:
    """A store read or write in a worker thread; its anticipated failures become ToolErrors."""
    try:
        return await anyio.to_thread.run_sync(work)
    except (InputError, StoreError) as exc:
        raise ToolError(str(exc)) from exc


# ---- the tools ----------------------------------------------------------------------------------------------------
async def compare_pair(app: App, args: ComparePairArgs, progress: ProgressFn | None = None) -> ComparePairResult:
    """Judge which of two answers to one prompt is better. Goal-reversed: it asks which is *worse*, in both A/B
    orders concurrently; `winner` is A or B only when both orders agree, else null with `consistent: false`
    (position bias shows as inconsistency, not as a wrong verdict). `p_better`: each answer's probability of being
    the better one, from log-probabilities. Optional: your `criteria`, a `reference` answer, images.

    Use it for exactly two candidates; for 3-10, grade_score_options; to rank responses by an instruction,
    infer_instruction_reward; for many pairs in one domain, lwe_judge. Cost: 2 backend calls (1 with swap=false),
    plus a re-ask per unparsed answer; with `backends`, per member."""
    return await run_tool(app, args, progress)


async def infer_instruction_reward(app: App, args: InferInstructionRewardArgs, progress: ProgressFn | None = None) -> FlipResult:
    """Reference-free reward (FLIP): the model infers from each response the instruction it answers; the reward
    is the similarity of inferred and given instruction. Ranks the responses.

    Use it to score or rank responses to one instruction without a reference answer (e.g. best-of-n); text inside
    a response cannot address a judge. For a head-to-head verdict use compare_pair. Cost: n backend calls for n
    responses, plus a re-ask per unparsed answer."""
    return await run_tool(app, args, progress)


async def grade_score_options(app: App, args: GradeScoreOptionsArgs, progress: ProgressFn | None = None) -> GradeScoreResult:
    """Pick the best of several options: one trial per cyclic rotation of the options, reporting the winner and
    the Grade Score (harmonic mean of position entropy and choice stability; low: the pick moves with the order).
    Optional `criteria`, `reference` and images as for compare_pair.

    Use it for 3-10 candidates (for two, compare_pair is cheaper). Cost: n backend calls for n options (n+1 with
    unrelated_option), plus a re-ask per unparsed answer; with `backends`, per panel member."""
    return await run_tool(app, args, progress)


async def score_response(app: App, args: ScoreResponseArgs, progress: ProgressFn | None = None) -> ScoreResponseResult:
    """Score one response against 1-10 weighted criteria on an integer scale (default 1-10), each criterion in its
    own call; `overall` is the weighted mean. With log-probabilities a score is probability-weighted over the scale.
    `samples` > 1 draws independent samples at `temperature` and flags `unstable` criteria.

    Use it for one draft (a self-critique loop, a rubric check); for two drafts compare_pair is more reliable.
    Cost: criteria x samples backend calls, plus a re-ask per unparsed answer."""
    return await run_tool(app, args, progress)


async def lwe_judge(app: App, args: LweJudgeArgs, progress: ProgressFn | None = None) -> LweResult:
    """Learning While Evaluating: judges a pair in both orders; an inconsistent case gets a case-specific
    prompt written from the session's meta-prompt, and the judge's feedback refines that meta-prompt every
    `batch_size` cases (stored per session, versioned); a record_label contradicting a verdict joins that feedback
    (unless the session was created with learn_from_labels false). Optional `criteria`, `reference` and images as
    for compare_pair.

    Use it for many pairwise judgments in one domain, where the judge should improve as it goes; for a one-off,
    compare_pair. Not idempotent. Cost: 2 backend calls when both orders agree, up to 9 otherwise."""
    return await run_tool(app, args, progress)


async def lwe_session_show(app: App, args: LweSessionShowArgs, progress: ProgressFn | None = None) -> LweSessionResult:
    """Show an LWE session: its meta-prompt, batch size, pending feedback and versions. Read-only (lwe_session's
    "show"). No backend calls."""
    lwe = registry.imported("judge_mcp.methods.lwe")  # (preloaded with the methods after the handshake), not at start
    return await _off_loop(partial(lwe.lwe_session, app.store, LweSessionArgs(session=args.session)))


async def lwe_session(app: App, args: LweSessionArgs, progress: ProgressFn | None = None) -> LweSessionResult:
    """Reset an LWE session to the initial meta-prompt (dropping buffered feedback), roll it back to a version, or
    show it. Reset and rollback add a version that later lwe_judge calls use; to only read, use lwe_session_show.
    No backend calls."""
    lwe = registry.imported("judge_mcp.methods.lwe")
    return await _off_loop(partial(lwe.lwe_session, app.store, args))


async def judge_stats(app: App, args: JudgeStatsArgs, progress: ProgressFn | None = None) -> StatsReport:
    """How far to trust each judge, from the verdict log per backend/model/tool, all time and over the newest
    `last` verdicts: position bias, order inconsistency, parse failures, re-asks, ties, length preference, calls,
    latency; with record_label's labels, agreement (accuracy, kappa, calibration of p_better;
    MAE, Spearman and Kendall for scores). Each rate has its
    count and denominator `of`.

    Use it before relying on a judge's verdicts. Read-only. No backend calls."""
    # lazy: LWE, the stats and the labels load at their first use (or with the methods after the handshake), not at start
    from judge_mcp.stats import report as stats

    report = await _off_loop(partial(stats.from_store, app.store, args.last, app.settings.cached_input_price))
    return report.model_copy(update={"verdict_log": app.verdict_writes.health()})  # this server's writing of the log


async def record_label(app: App, args: RecordLabelArgs, progress: ProgressFn | None = None) -> LabelResult:
    """Record the correct answer (`label`) for a verdict, by the `verdict_id` a judging tool returned;
    recording again replaces it. judge_stats then reports each judge's agreement with the labels; on an lwe_judge
    verdict it contradicts, the label also feeds the session's next refinement.

    Use it when you know the right answer (a reviewer's decision, a passing test). Returns whether the verdict
    agreed. No backend calls."""
    # lazy: LWE, the stats and the labels load at their first use (or with the methods after the handshake), not at start
    from judge_mcp.stats import labels

    settled = await app.verdict_writes.settle(args.verdict_id, LABEL_WAIT_S)  # a row still being written: wait a little
    return await _off_loop(partial(labels.record, app.store, args, pending=not settled))


# ---- the table the server registers --------------------------------------------------------------------------------
# A judgment reads its inputs and asks a model: it changes nothing the caller owns (the verdict log only grows),
# and the same call gives the same answer (temperature 0, the call cache).
JUDGING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
# lwe_judge: each inconsistent case buffers feedback and may refine the session's meta-prompt, so a repeat differs.
LEARNING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
# record_label: writes a label (replacing the verdict's earlier one); the same call leaves the same state.
LABELLING = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
ADMIN = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)

ToolFn = Callable[[App, Any, ProgressFn | None], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    fn: ToolFn
    title: str
    annotations: ToolAnnotations

    @property
    def name(self) -> str:
        return self.fn.__name__

    def models(self) -> tuple[type[ToolArgs], type[BaseModel]]:
        """(argument model, result model), from the function's signature."""
        hints = get_type_hints(self.fn)
        return hints["args"], hints["return"]


TOOLS = (
    ToolSpec(compare_pair, "Compare two answers (goal-reversed, both orders)", JUDGING),
    ToolSpec(infer_instruction_reward, "FLIP reward: infer the instruction back from each response", JUDGING),
    ToolSpec(grade_score_options, "Pick the best option over every cyclic order (Grade Score)", JUDGING),
    ToolSpec(score_response, "Score one response against weighted criteria (pointwise)", JUDGING),
    ToolSpec(lwe_judge, "Judge a pair while learning a meta-prompt (LWE)", LEARNING),
    ToolSpec(lwe_session_show, "Show an LWE session (read-only)", READ_ONLY),
    ToolSpec(lwe_session, "Show, reset or roll back an LWE session", ADMIN),
    ToolSpec(judge_stats, "Bias telemetry of the judges (read-only)", READ_ONLY),
    ToolSpec(record_label, "Record the correct answer for a verdict (a human label)", LABELLING),
)


def _progress(ctx: Context | None) -> ProgressFn | None:
    if ctx is None:
        return None

    async def report(done: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.report_progress(done, total, message)
        except Exception:  # a client that went away must not fail the judgment
            log.debug("progress notification failed", exc_info=True)

    return report


@cache
def _non_text(model: type[ToolArgs]) -> frozenset[str]:
    """The arguments that take no free text (numbers, booleans, lists, enums): the ones a client's JSON text is
    decoded for."""
    return non_text(model.input_schema())


def non_text(schema: dict[str, Any]) -> frozenset[str]:
    """`_non_text` read from an input schema: the model's, or the one a server publishes (compacting leaves out
    only a null beside a type, never a string)."""
    out = set()
    for name, prop in schema.get("properties", {}).items():
        members = prop.get("anyOf", [prop])
        if not any(m.get("type") == "string" and "enum" not in m and "const" not in m for m in members):
            out.add(name)
    return frozenset(out)


def _decoded(value: Any) -> Any:
    """A value sent as JSON text inside a string ("4096", "true", '["a"]'), decoded; anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return value
    return value if isinstance(decoded, str) else decoded


def client_args(
    model: type[ToolArgs], arguments: dict[str, Any], image_paths: imagelib.PathPolicy = imagelib.NO_PATHS, decode: frozenset[str] | None = None
) -> ToolArgs:
    """A client's arguments as `model`: a value some clients send as JSON text inside a string ("4096", "true",
    '["a", "b"]') is read as that value for the arguments that take no free text (`decode`, by default `_non_text`:
    judged text is never decoded), then `model.parse` checks everything strictly (an image may be a file path where
    `image_paths` allows it)."""
    decode = _non_text(model) if decode is None else decode
    return model.parse({k: _decoded(v) if k in decode else v for k, v in arguments.items()}, image_paths)


def image_paths(app: App) -> imagelib.PathPolicy:
    """Where the server's clients may name image files: over stdio only, inside JUDGE_MCP_IMAGE_DIRS."""
    return imagelib.PathPolicy(stdio=app.stdio, dirs=app.settings.image_dirs)


class ArgsTool(Tool):
    """An SDK tool whose arguments are one model of args.py: a client's arguments are checked against it strictly
    and reported readably (arg_errors.py), then the tool function gets the model (the SDK's own argument model
    holds that one value, so its validation has nothing left to check)."""

    args_model: Any = Field(exclude=True)
    non_text: frozenset[str] = Field(exclude=True)  # from the published input schema: no schema generated at a call
    app: Any = Field(exclude=True)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        self.app.calls_in_flight += 1
        # the methods' preload (after the handshake) waits while a call runs; telemetry: a no-op unless OpenTelemetry is on
        with registry.judging(), telemetry.tool_call(self.name):
            try:
                try:
                    paths = image_paths(self.app)
                    args = await image_files.checked(partial(client_args, self.args_model, arguments, paths, self.non_text), paths)
                except InputError as exc:
                    raise ToolError(f"Error executing tool {self.name}: {exc}") from None
                return settings_note(await super().run({"args": args}, context, convert_result), self.app.settings.warnings)
            except ToolError as exc:
                warnings = self.app.settings.warnings
                if not warnings:
                    raise
                raise ToolError(f"{exc} (settings: {'; '.join(warnings)})") from exc.__cause__
            finally:
                self.app.calls_in_flight -= 1


def with_settings_warnings(result: Any, app: App) -> Any:
    """`result` with the settings' warnings (a misspelt JUDGE_MCP_* variable) added to its own, when it has any."""
    extra = list(app.settings.warnings)
    if not extra or not isinstance(getattr(result, "warnings", None), list):
        return result
    return result.model_copy(update={"warnings": [*result.warnings, *extra]})


def settings_note(result: Any, warnings: tuple[str, ...]) -> Any:
    """A result whose structured content has no `warnings` field (judge_stats, lwe_session, lwe_session_show,
    record_label) with the settings' warnings as one more text block after its JSON, so a misspelt variable shows
    in every tool's result, as it does in every error (ArgsTool.run) and in the judging tools' `warnings`."""
    if not warnings or not isinstance(result, CallToolResult) or result.is_error:
        return result
    if isinstance(result.structured_content, dict) and "warnings" in result.structured_content:
        return result  # with_settings_warnings put them there
    note = TextContent(type="text", text=f"judge-mcp settings: {'; '.join(warnings)}")
    return result.model_copy(update={"content": [*result.content, note]})


class _DeferredArgModel(ArgModelBase):
    """The SDK's argument model base, its validator built at a tool's first call (not every tool's at start)."""

    model_config = ConfigDict(defer_build=True)


def mcp_tool(spec: ToolSpec, app: App, schemas: dict[str, Any]) -> ArgsTool:
    """The SDK tool for `spec`, running its function with `app` and the request's progress notifications. `schemas`:
    its published input and output schemas (tool_schemas.py: shipped, or generated from its models)."""
    args_model, result_model = spec.models()

    async def call(args: ToolArgs, ctx: Context) -> BaseModel | InputRequiredResult:
        # the caller's tenant (tenants.py), for every store the call reads or writes; a sampling backend asks this call's client
        with tenants.acting(tenants.of_request(ctx)), sampling.serving(ctx) as rounds:
            try:
                result = await spec.fn(app, args, _progress(ctx))
            except Exception as exc:
                if rounds is not None and sampling.needs_input(exc):  # 2026-07-28: the requests go back as input_required
                    return rounds.result()
                raise
        telemetry.tool_result(args, result)
        return with_settings_warnings(result, app)

    holder = create_model(f"{spec.name}Call", __base__=_DeferredArgModel, args=(args_model, ...))
    return ArgsTool(
        fn=call,
        name=spec.name,
        title=spec.title,
        description=reflow(spec.fn.__doc__ or ""),
        parameters=schemas["input"],
        fn_metadata=FuncMetadata(arg_model=holder, output_model=result_model, output_schema=schemas["output"]),
        is_async=True,
        context_kwarg="ctx",
        annotations=spec.annotations,
        args_model=args_model,
        non_text=non_text(schemas["input"]),
        app=app,
    )


def mcp_tools(app: App) -> list[Tool]:
    published = tool_schemas.schemas(TOOLS)  # read from the shipped file when it is current: no schema generation
    return [mcp_tool(spec, app, published[spec.name]) for spec in TOOLS]


def reflow(docstring: str) -> str:
    """A docstring as a description: its indentation gone and each paragraph on one line."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
