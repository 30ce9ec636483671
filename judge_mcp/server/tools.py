"""The MCP tools, one module-level function each: `await compare_pair(app, ComparePairArgs(...))` runs the tool
without any MCP machinery and returns its result model, or raises a ToolError naming the problem; and their one
front door, `invoke`.

A tool's signature says everything the server publishes about it: its argument model (judge_mcp/contract/args.py) is the
`inputSchema`, its result model the `outputSchema`, its docstring the description. The judging tools run their
method through the method table (runtime/run.py), the LWE session tools and judge_stats read the store in a worker
thread.

Every call of a tool, an MCP client's (sdk_tools.py turns TOOLS into the SDK's Tool objects) or the Python API's
(api.py), goes through `invoke`: the client's arguments checked against the model strictly and readably, the
tenant, the telemetry span, the settings' warnings, each applied there once, in one order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, get_type_hints

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from judge_mcp.contract import image_files
from judge_mcp.contract import images as imagelib
from judge_mcp.telemetry import hooks as telemetry
from judge_mcp import tenants
from judge_mcp.runtime.app import App
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, JudgeStatsArgs, JudgingArgs, LweJudgeArgs,
    LweSessionArgs, LweSessionShowArgs, RecordLabelArgs, ToolArgs,
)
from judge_mcp.backends import sampling
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.context import ProgressFn
from judge_mcp.config.bundled import bundled_warning, is_bundled
from judge_mcp.config.settings import ConfigError
from judge_mcp.methods import registry
from judge_mcp.runtime.repeats import call_key
from judge_mcp.runtime.run import run_method
from judge_mcp.server.heartbeat import Heartbeat
from judge_mcp.contract.results import (
    ComparePairResult, FlipResult, GradeScoreResult, LabelResult, LweResult, LweSessionResult, StatsReport,
)
from judge_mcp.contract.rubric import ScoreResponseArgs
from judge_mcp.contract.results import ScoreResponseResult
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
    from judge_mcp.methods.lwe import label_feedback
    from judge_mcp.stats import labels

    settled = await app.verdict_writes.settle(args.verdict_id, LABEL_WAIT_S)  # a row still being written: wait a little
    # the server wires label learning: LWE's verdicts learn from their labels (methods/lwe/label_feedback.py)
    return await _off_loop(partial(labels.record, app.store, args, pending=not settled, learners=label_feedback.LEARNERS))


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
        return _models(self.fn)


@cache
def _models(fn: ToolFn) -> tuple[type[ToolArgs], type[BaseModel]]:
    hints = get_type_hints(fn)
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


BY_NAME = {spec.name: spec for spec in TOOLS}


# ---- the front door: every tool call, from an MCP client (sdk_tools.py) or the Python API (api.py) -------------------
@dataclass(frozen=True)
class Caller:
    """Who calls, as far as the front door needs to know: where an image argument may name a file (`paths`), the
    tenant the call acts for, where progress goes, which arguments arrive as JSON text to be decoded (MCP clients:
    `non_text`; the Python API: none), and the MCP request whose client a sampling backend asks (None: the API)."""

    paths: imagelib.PathPolicy
    tenant: str
    progress: ProgressFn | None = None
    decode: frozenset[str] = frozenset()
    request: Any = None


async def invoke(app: App, spec: ToolSpec, arguments: dict[str, Any], caller: Caller) -> Any:
    """A tool call, through its one front door: the MCP server's tools (sdk_tools.py) and the Python API (api.py) both
    come in here, so each concern is applied once, in this order, whoever calls:

    1. around all of it: the call counted in flight (the message a Ctrl-C of `serve` prints), the methods' preload
       waiting (registry.judging), the telemetry span (a no-op unless OpenTelemetry is on);
    2. the arguments checked against the tool's model, strictly and readably, image arguments with them (a file read
       off the event loop where `caller.paths` allows files);
    3. the call acting for `caller.tenant` (every store it reads or writes), a sampling backend asking the client of
       `caller.request` (on a 2026-07-28 connection, requests it must answer first return as the InputRequiredResult);
    4. the tool function, its result to the telemetry span;
    5. the settings' warnings (a misspelt JUDGE_MCP_* variable) added to the result's `warnings` or to the error.

    The result model, or a ToolError naming the problem for every anticipated failure (bad arguments, a
    configuration problem, a backend that failed after its retries, the store); anything else is a bug, raised as
    it is."""
    app.calls_in_flight += 1
    try:
        with registry.judging(), telemetry.tool_call(spec.name):
            try:
                args_model = spec.models()[0]
                try:
                    args = await image_files.checked(partial(client_args, args_model, arguments, caller.paths, caller.decode), caller.paths)
                except InputError as exc:
                    raise ToolError(str(exc)) from None
                serving = sampling.serving(caller.request) if caller.request is not None else nullcontext()
                with tenants.acting(caller.tenant), serving as rounds:
                    try:
                        result = await _once(app, spec, args, caller)
                    except Exception as exc:
                        if rounds is not None and sampling.needs_input(exc):
                            return rounds.result()
                        raise
                telemetry.tool_result(args, result)
                return with_settings_warnings(with_bundled_warning(result, app, spec, args), app)
            except ToolError as exc:
                warnings = app.settings.warnings
                if not warnings:
                    raise
                raise ToolError(f"{exc} (settings: {'; '.join(warnings)})") from exc.__cause__
    finally:
        app.calls_in_flight -= 1


async def _once(app: App, spec: ToolSpec, args: Any, caller: Caller) -> Any:
    """The tool function, with progress at least every heartbeat.EVERY_S where the client asked for progress, and
    judged once when the same call comes again while it runs (runtime/repeats.py: joined, or for lwe_judge answered
    again from its result)."""
    beat = Heartbeat(caller.progress) if caller.progress is not None else None

    async def run() -> Any:
        return await spec.fn(app, args, beat.report if beat is not None else None)

    async def judged() -> Any:
        if not _joinable(app, spec, args):
            return await run()
        key = call_key(caller.tenant, spec.name, args.model_dump(mode="json"))
        result, note = await app.repeats.run(key, run, replay=spec.annotations is LEARNING)
        if note is not None and isinstance(getattr(result, "warnings", None), list):
            result = result.model_copy(update={"warnings": [*result.warnings, note]})
        return result

    if beat is None:
        return await judged()
    failed: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(beat.beat_until_stopped)
        try:
            result = await judged()
        except Exception as exc:  # raised after the group, as it is (a task group would wrap it in an ExceptionGroup)
            failed = exc
        finally:
            beat.stopped = True
            tg.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return result


def _joinable(app: App, spec: ToolSpec, args: Any) -> bool:
    """A judging call that a repeat may join: deterministic (no samples at a temperature) and not on the sampling
    backend (a client's own model, whose answers never go to another MCP session)."""
    if spec.annotations not in (JUDGING, LEARNING) or (getattr(args, "samples", 1) or 1) > 1 or (getattr(args, "temperature", None) or 0) > 0:
        return False
    names = [getattr(args, "backend", None), *(getattr(args, "backends", None) or [])]
    try:
        return all(app.settings.backend(name).kind != "sampling" for name in names)
    except ConfigError:  # an unknown backend name: the tool says so
        return False


def with_bundled_warning(result: Any, app: App, spec: ToolSpec, args: Any) -> Any:
    """A judging tool's `result` with a warning for each backend it judged with that is the bundled 135M model
    (config/bundled.py): a result naming `local/SmolLM2-135M` with no warning was taken for a real judge's."""
    if spec.annotations not in (JUDGING, LEARNING) or not isinstance(getattr(result, "warnings", None), list):
        return result
    names = dict.fromkeys([getattr(args, "backend", None), *(getattr(args, "backends", None) or [])])
    notes = []
    for name in names:
        try:
            cfg = app.settings.backend(name)
        except ConfigError:  # an unknown or broken backend: the tool said so
            continue
        if is_bundled(cfg):
            notes.append(bundled_warning(cfg.name))
    notes = [note for note in notes if note not in result.warnings]
    return result.model_copy(update={"warnings": [*result.warnings, *notes]}) if notes else result


def with_settings_warnings(result: Any, app: App) -> Any:
    """`result` with the settings' warnings (a misspelt JUDGE_MCP_* variable) added to its own, when it has any."""
    extra = list(app.settings.warnings)
    if not extra or not isinstance(getattr(result, "warnings", None), list):
        return result
    return result.model_copy(update={"warnings": [*result.warnings, *extra]})


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
