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
from mcp_types import InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, create_model

from judge_mcp.contract import images as imagelib
from judge_mcp.telemetry import hooks as telemetry
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
from judge_mcp.contract.results import (
    ComparePairResult, FlipResult, GradeScoreResult, LabelResult, LweResult, LweSessionResult, StatsReport,
)
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


async def run_method(app: App, args: JudgingArgs, progress: ProgressFn | None = None) -> Any:
    """Run the method registered under the arguments' tool, by one backend or a panel; anticipated failures
    become ToolErrors."""
    try:
        result, _ = await registry.call(app, args.tool, args, progress=progress)
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
    """Judge which of two answers to the same prompt is better, asking the model which is *worse*
    (goal-reversed prompting) in both A/B orders concurrently. `winner` is A or B only when both orders agree;
    otherwise null with `consistent: false` (position bias shows up as inconsistency, not as a wrong verdict;
    with swap=false, `consistent` is null). Where the backend returns token log-probabilities (OpenAI-compatible
    servers, the embedded model), `p_better` gives each answer's probability of being the better one, averaged
    over both orders so position bias cancels; null where there are none. swap="auto" judges the second order
    only when the first is not confident. Optional `criteria` (your rubric, e.g. for a code review "correctness
    first, then thread safety, then readability") and `reference` (a reference answer, e.g. "5050" for the sum of
    1..100) are shown to the judge in both orders; the verdict is then about them. Images as data: URIs: `images`
    (what the prompt shows) and `response_a_images` / `response_b_images` (e.g. two UI screenshots), which move with
    their answer when the order is swapped; for a vision model (over stdio, also file paths inside the folders
    of JUDGE_MCP_IMAGE_DIRS).

    Use it for exactly two candidates (two drafts, two patches, before/after). For 3-10 candidates use
    grade_score_options; to score responses against an instruction without a judge prompt, use
    infer_instruction_reward; for a stream of pairs in one domain where the judge should learn, lwe_judge.
    Cost: 2 backend calls (1 with swap=false, 1 or 2 with swap="auto"), plus one re-ask per unparsed answer; with
    `backends`, that per panel member (the verdict is the majority of the members that answered)."""
    return await run_method(app, args, progress)


async def infer_instruction_reward(app: App, args: InferInstructionRewardArgs, progress: ProgressFn | None = None) -> FlipResult:
    """Reference-free reward (FLIP): the model infers, from each response alone, the instruction it answers;
    the reward is the similarity (word-level F1) between inferred and given instruction. Ranks the responses.

    Use it to score or rank 1-16 responses to one instruction without a reference answer, e.g. as a reward
    for best-of-n sampling; it holds up where small judges fail at direct judging, and text inside a response
    cannot address a judge. For a head-to-head verdict use compare_pair. Cost: n backend calls (one per
    response), plus one re-ask per unparsed answer."""
    return await run_method(app, args, progress)


async def grade_score_options(app: App, args: GradeScoreOptionsArgs, progress: ProgressFn | None = None) -> GradeScoreResult:
    """Multiple-choice judging: one trial per cyclic rotation of the options (each option at each position
    once), reporting the winner, the position entropy (llm_score), the choice stability (choice_score) and
    their harmonic mean, the Grade Score. Optional `criteria` and `reference` (as for compare_pair) are shown in
    every rotation, as are `images` and `option_images` (one list per option, moving with it).

    Use it to pick the best of 2-10 options and to see how much to trust that pick (a low Grade Score means
    the judge's choice moves with the order). For two candidates compare_pair is cheaper. Cost: n backend
    calls for n options (n+1 with unrelated_option), plus one re-ask per unparsed answer; with `backends`, that
    per panel member (the winner is the majority of the members that answered)."""
    return await run_method(app, args, progress)


async def lwe_judge(app: App, args: LweJudgeArgs, progress: ProgressFn | None = None) -> LweResult:
    """Learning While Evaluating: a vanilla judgment in both orders; inconsistent cases get a case-specific
    evaluation prompt written from the session's meta-prompt, and the judge's self-feedback refines that
    meta-prompt every `batch_size` cases (stored, versioned, shared across calls and restarts). Optional
    `criteria`, `reference` and images (as for compare_pair) go with the case into every call that judges it or
    writes about it; the meta-prompt itself stays text.

    Use it for many pairwise judgments in one domain, where the judge should get better at that domain as it
    goes; for a one-off comparison compare_pair is cheaper and stateless. Not idempotent: an inconsistent case
    buffers feedback in the session and may trigger a refinement. Cost: 2 backend calls when both orders
    agree; up to 9 otherwise (evaluation prompt, judgment, feedback, and a refinement and condensation when a
    batch is due)."""
    return await run_method(app, args, progress)


async def lwe_session_show(app: App, args: LweSessionShowArgs, progress: ProgressFn | None = None) -> LweSessionResult:
    """Show an LWE session: its current meta-prompt, batch size, pending feedback and every version. Read-only
    (the same as lwe_session with action "show"); the lwe:// resources give the same data. No backend calls."""
    registry.loaded()  # the LWE modules (preloaded with the methods), the stats and the labels load at first use
    from judge_mcp.methods import lwe

    return await _off_loop(partial(lwe.lwe_session, app.store, LweSessionArgs(session=args.session)))


async def lwe_session(app: App, args: LweSessionArgs, progress: ProgressFn | None = None) -> LweSessionResult:
    """Manage an LWE session's meta-prompt lineage: reset it to the initial meta-prompt (drops the buffered
    feedback) or roll it back to an earlier version; "show" reads it. Reset and rollback add a new version
    (history is never rewritten), but they change what every later lwe_judge call in the session uses. For
    read-only inspection use lwe_session_show. No backend calls."""
    registry.loaded()
    from judge_mcp.methods import lwe

    return await _off_loop(partial(lwe.lwe_session, app.store, args))


async def judge_stats(app: App, args: JudgeStatsArgs, progress: ProgressFn | None = None) -> StatsReport:
    """How far to trust each judge, from the verdict log, per backend/model/tool, over all time and the newest
    `last` verdicts: position_bias (share of parsed trials naming the first-shown answer; compare with
    `unbiased`, 0.5 for pairs), order_inconsistency (both orders parsed and disagreeing), parse_failures and
    reasks (per answer), ties (no winner / tied best / tied mode), length_preference (decided pairs won by the
    longer answer) and mean calls, cached_calls and latency_ms; with verdicts labelled by record_label, `agreement`
    (accuracy, Cohen's kappa, ECE and Brier of p_better against the labels). Each rate has its count and
    denominator `of`; a null rate means nothing to count yet.

    Use it before relying on a judge's verdicts, or to see whether a backend's habits changed lately. Read-only,
    the same report as the judge://stats resources. No backend calls."""
    from judge_mcp.stats import report as stats

    report = await _off_loop(partial(stats.from_store, app.store, args.last))
    return report.model_copy(update={"verdict_log": app.verdict_writes.health()})  # this server's writing of the log


async def record_label(app: App, args: RecordLabelArgs, progress: ProgressFn | None = None) -> LabelResult:
    """Record the correct answer for a verdict (human ground truth), by the `verdict_id` every judging tool returns:
    "A", "B" or "tie" for compare_pair and lwe_judge; the best option's index (or exact text) for
    grade_score_options; the index (or exact text) of the response that best follows the instruction for
    infer_instruction_reward (2+ responses). An optional `note` says why. Recording again for the same verdict
    replaces its label. judge_stats then reports, per judge, agreement with the labels (accuracy, Cohen's kappa,
    ECE and Brier of p_better).

    Use it when you know the right answer for a verdict (a reviewer's decision, a test that passed), to measure
    how far each judge can be trusted on your own cases. Labels stay in the server's database (tools report only
    counts and figures) and are deleted with their verdict by retention. Returns whether the verdict agreed. No
    backend calls."""
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
    out = set()
    for name, prop in model.input_schema().get("properties", {}).items():
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


def client_args(model: type[ToolArgs], arguments: dict[str, Any], image_paths: imagelib.PathPolicy = imagelib.NO_PATHS) -> ToolArgs:
    """A client's arguments as `model`: a value some clients send as JSON text inside a string ("4096", "true",
    '["a", "b"]') is read as that value for the arguments that take no free text (judged text is never decoded),
    then `model.parse` checks everything strictly (an image may be a file path where `image_paths` allows it)."""
    decode = _non_text(model)
    return model.parse({k: _decoded(v) if k in decode else v for k, v in arguments.items()}, image_paths)


def image_paths(app: App) -> imagelib.PathPolicy:
    """Where the server's clients may name image files: over stdio only, inside JUDGE_MCP_IMAGE_DIRS."""
    return imagelib.PathPolicy(stdio=app.stdio, dirs=app.settings.image_dirs)


class ArgsTool(Tool):
    """An SDK tool whose arguments are one model of args.py: a client's arguments are checked against it strictly
    and reported readably (arg_errors.py), then the tool function gets the model (the SDK's own argument model
    holds that one value, so its validation has nothing left to check)."""

    args_model: Any = Field(exclude=True)
    app: Any = Field(exclude=True)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        self.app.calls_in_flight += 1
        with telemetry.tool_call(self.name):  # a no-op unless OpenTelemetry is on
            try:
                try:
                    args = client_args(self.args_model, arguments, image_paths(self.app))
                except InputError as exc:
                    raise ToolError(f"Error executing tool {self.name}: {exc}") from None
                return await super().run({"args": args}, context, convert_result)
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


def mcp_tool(spec: ToolSpec, app: App, schemas: dict[str, Any]) -> ArgsTool:
    """The SDK tool for `spec`, running its function with `app` and the request's progress notifications. `schemas`:
    its published input and output schemas (tool_schemas.py: shipped, or generated from its models)."""
    args_model, result_model = spec.models()

    async def call(args: ToolArgs, ctx: Context) -> BaseModel | InputRequiredResult:
        with sampling.serving(ctx) as rounds:  # a sampling backend asks this call's client
            try:
                result = await spec.fn(app, args, _progress(ctx))
            except Exception as exc:
                if rounds is not None and sampling.needs_input(exc):  # 2026-07-28: the requests go back as input_required
                    return rounds.result()
                raise
        telemetry.tool_result(args, result)
        return with_settings_warnings(result, app)

    holder = create_model(f"{spec.name}Call", __base__=ArgModelBase, args=(args_model, ...))
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
        app=app,
    )


def mcp_tools(app: App) -> list[Tool]:
    published = tool_schemas.schemas(TOOLS)  # read from the shipped file when it is current: no schema generation
    return [mcp_tool(spec, app, published[spec.name]) for spec in TOOLS]


def reflow(docstring: str) -> str:
    """A docstring as a description: its indentation gone and each paragraph on one line."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
