"""The whole run of a judging method, from its arguments to its verdict row: the one path the MCP tools, the Python
API (both through server/tools.py's `invoke`) and the bench take. `run_method` reads as the run goes:

1. The method: its entry in the method table (methods/registry.py), its arguments parsed into its argument model.
2. The judges (`Judges.chosen`): the one backend the arguments name (or the environment's), or a panel
   (`backends`), each built by the App; the self-preference guard (methods/self_preference.py) is consulted once,
   before any call, on which of them judge.
3. The judging (`judge`): each judge runs the method over its own call context (calls/context.py), concurrently for a
   panel; a panel member whose backend fails is reported, and only a panel that has no member left fails. What comes
   back is an `Outcome`: the result (the one judge's, or the panel's combined by the method's combine function, with
   the guard's findings for judges whose model is known only from their answers: the sampling backend), the verdict
   row's backend and model, every call record, and the new cache rows. A judging that fails writes no verdict; the
   answers that did come back are still cached.
4. The record (`record`): the verdict log row (inputs, output, model, usage, every call record) with the Outcome's
   cache rows in one transaction, the tool call's only write; the answer waits at most a second for it
   (verdict_writes.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from pydantic import BaseModel

from judge_mcp import tenants
from judge_mcp.backends import Backend
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.cache import CacheRow
from judge_mcp.calls.context import CallContext, ProgressFn, Sampling
from judge_mcp.contract.args import JudgingArgs
from judge_mcp.methods import registry
from judge_mcp.methods.members import Member
from judge_mcp.methods.self_preference import Guard
from judge_mcp.runtime.app import App
from judge_mcp.runtime.verdict_writes import new_verdict_id
from judge_mcp.storage.call_cache import CacheTable
from judge_mcp.storage.verdict_log import VerdictLog

log = logging.getLogger("judge_mcp")

Records = list[dict[str, Any]]
# A method bound to its arguments: run over one judge's call context, its result.
Judging = Callable[[CallContext], Awaitable[BaseModel]]
# combine(members, latency_ms=..., warnings=...) -> a panel's result (the method's combine, bound to its arguments)
Combine = Callable[..., BaseModel]


async def run_method(
    app: App,
    name: str,
    args: JudgingArgs | Mapping[str, Any],
    *,
    progress: ProgressFn | None = None,
    no_reask: bool = False,
    log_extra: dict[str, Any] | None = None,
    sampling: Sampling | None = None,
    **options: Any,
) -> tuple[BaseModel, Records]:
    """Run method `name` with `args` (its argument model, or a mapping parsed into it: InputError when it does not
    fit), by one backend or, when the arguments name `backends`, by a panel: (its result, the verdict row's call
    records: every judge's, a panel member's tagged with `panel_member`). `no_reask` is the papers' strict rule (an
    unparsed first answer counts as it is); `log_extra` adds keys to the logged inputs only (the bench's item id and
    placement); `sampling` (the bench's --repeats) sets every request's temperature and bypasses the call cache
    (logged); `options` are the method's own keywords that are not tool arguments (lwe_judge's `learn`), logged too."""
    # 1. the method from the table
    method = registry.METHODS.get(name)
    if method is None:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(registry.METHODS))}")
    if isinstance(args, Mapping):
        args = method.args.parse(args)
    if not isinstance(args, method.args):
        raise TypeError(f"{name} takes {method.args.__name__}, got {type(args).__name__}")
    panel = getattr(args, "backends", None)
    if panel and method.combine is None:
        raise ValueError(f"{name} cannot be judged by a panel")
    # 2. the judges chosen, the guard consulted once: a configuration error or an exclusion of all fails here
    judges = Judges.chosen(app, args, panel)
    inputs = {**(log_extra or {}), **args.logged(), **options, **({"no_reask": True} if no_reask else {})}
    if sampling is not None:
        inputs["sampling"] = {"temperature": sampling.temperature, "fresh": sampling.fresh}

    async def by_method(context: CallContext) -> BaseModel:
        context.no_reask, context.sampling = no_reask, sampling
        return await method.run(context, args, **options)

    # 3. judged: an Outcome, nothing written yet
    combine = partial(method.combine, args=args) if panel and method.combine is not None else None
    outcome = await judge(app, name, judges, by_method, combine=combine, progress=progress)
    # 4. recorded: the verdict row with the Outcome's cache rows, the one write
    return await record(app, name, inputs, outcome), outcome.records


@dataclass
class Seat:
    """One chosen judge: its backend, and its Member (what it judged, as a panel's combine reads it; `excluded` when
    the guard left it out)."""

    backend: Backend
    member: Member


@dataclass
class Judges:
    """The judges of one run, chosen once before any call: a seat per chosen backend, the guard that chose them
    (consulted again after the judging, with the models the answers named), and whether they sit as a panel."""

    seats: list[Seat]
    guard: Guard
    panel: bool = False

    @classmethod
    def chosen(cls, app: App, args: JudgingArgs, panel: Sequence[str] | None) -> Judges:
        """The `panel` the arguments name (`backends`) or else their one backend, each built by the App (ConfigError
        before any call: an unknown name, a broken table); the guard, consulted once, says which of them judge
        (InputError when it excludes every one)."""
        backends = [app.backend(b) for b in panel] if panel else [app.backend(args.backend)]
        guard = Guard.of(args)
        judging = guard.judges([(b.name, b.model_id) for b in backends])
        return cls([Seat(b, Member(b.name, b.model_id, excluded=b.name not in judging)) for b in backends], guard, bool(panel))

    @classmethod
    def one(cls, backend: Backend) -> Judges:
        """`backend` alone, with no authors for the guard to check."""
        return cls([Seat(backend, Member(backend.name, backend.model_id))], Guard(None))

    @property
    def judging(self) -> list[Seat]:
        return [seat for seat in self.seats if not seat.member.excluded]


@dataclass(frozen=True)
class Outcome:
    """What a judging produced, all that its record needs: the result, the verdict row's backend (the judge's name,
    or the panel members' joined by "+") and model, every call record, and the new cache rows (written with the row)."""

    result: BaseModel
    backend: str
    model: str
    records: Records
    cache_rows: list[CacheRow]


async def judge(
    app: App, tool: str, judges: Judges, method: Judging, *, combine: Combine | None = None, progress: ProgressFn | None = None,
) -> Outcome:
    """`method` run by `judges` (a panel, its results combined by `combine`), each over a call context of its own whose
    new answers' cache rows go to the Outcome; it writes nothing. Until recorded, the call cache answers those requests
    from memory. If the judging fails, the answers that did come back are still cached (best effort: the failure is
    what counts) and the failure is raised; cancelled, they are dropped."""
    rows: list[CacheRow] = []
    try:
        if judges.panel and combine is not None:
            return await _panel(app, judges, method, combine, progress, rows)
        return await _one(app, judges, method, progress, rows)
    except Exception:
        if rows:  # the rows go to the store's write lane, which lets go of them once done
            try:
                await app.store.writes.run(_write, app, rows, False, CacheTable(app.store).put_many, rows)
            except Exception:
                log.warning("could not cache the answers of a failed %s call", tool, exc_info=True)
        raise
    except BaseException:  # cancelled: the rows are dropped
        app.cache.written(rows)
        raise


async def _one(app: App, judges: Judges, method: Judging, progress: ProgressFn | None, rows: list[CacheRow]) -> Outcome:
    """One backend judges; its failure is the call's. A judge whose model its answers named (the sampling backend:
    the client's model) is checked by the guard with that model; the guard's findings join the result's warnings."""
    backend, guard = judges.seats[0].backend, judges.guard
    context = CallContext(backend, app.cache, app.store, progress=progress, cache_rows=rows, shared_option_pool=app.settings.shared_option_pool)
    result = with_notes(await method(context), context.notes)
    guard.reported([(backend.name, backend.model_id, context.model_id)], lambda _, model: backend.self_preference_warning(model), one_judge=True)
    if guard.found is not None or guard.warnings:
        result = result.model_copy(update={"warnings": [*getattr(result, "warnings", []), *guard.warnings], **guard.update()})
    return Outcome(result, backend.name, context.model_id, context.records, rows)


async def _panel(app: App, judges: Judges, method: Judging, combine: Combine, progress: ProgressFn | None, rows: list[CacheRow]) -> Outcome:
    """Every member that judges runs concurrently, each over its own call context (sharing the call cache). A member
    whose backend fails after its retries is reported as failed; when every member that ran failed, the first
    failure is raised. `combine(members, latency_ms=..., warnings=...)` makes the panel's result; one verdict row
    holds every member's call records, each tagged with `panel_member`."""
    contexts: dict[str, CallContext] = {}
    errors: list[BackendError] = []
    judging = judges.judging
    started = time.perf_counter()
    done = 0

    async def one(seat: Seat) -> None:
        nonlocal done
        member = seat.member
        context = contexts[member.backend] = CallContext(
            seat.backend, app.cache, app.store, cache_rows=rows, shared_option_pool=app.settings.shared_option_pool
        )
        try:
            member.result = with_notes(await method(context), context.notes)
        except BackendError as exc:
            member.error = str(exc)
            errors.append(exc)
        member.usage = context.usage()
        member.model = context.model_id  # the sampling backend's: the model its client reported
        done += 1
        if progress is not None:
            await progress(done, len(judging), f"panel member {member.backend} {'failed' if member.error else 'judged'}")

    async with anyio.create_task_group() as tg:
        for seat in judging:
            tg.start_soon(one, seat)
    if errors and len(errors) == len(judging):
        raise errors[0]
    by_name = {seat.backend.name: seat.backend for seat in judging}
    guard = judges.guard
    guard.reported(
        [(s.member.backend, s.backend.model_id, s.member.model) for s in judging],
        lambda name, model: by_name[name].self_preference_warning(model), one_judge=False,
    )
    members = [seat.member for seat in judges.seats]
    result = combine(members, latency_ms=(time.perf_counter() - started) * 1000.0, warnings=guard.warnings)
    if guard.found is not None:
        result = result.model_copy(update=guard.update())
    records = [{**record, "panel_member": m.backend} for m in members if m.backend in contexts for record in contexts[m.backend].records]
    return Outcome(result, "+".join(m.backend for m in members), result.model, records, rows)  # type: ignore[attr-defined]


def with_notes(result: BaseModel, notes: list[str]) -> BaseModel:
    """`result` with its call context's notes (calls/context.py) among its warnings, each once."""
    warnings = getattr(result, "warnings", None)
    if not notes or warnings is None:
        return result
    return result.model_copy(update={"warnings": [*warnings, *(n for n in notes if n not in warnings)]})


async def record(app: App, tool: str, inputs: dict[str, Any], outcome: Outcome) -> Any:
    """The verdict row of `outcome` (its logged `inputs`, the result as output, its usage, backend, model and call
    records) written with its cache rows in one transaction, the tool call's only write; the result. A result model
    with a `verdict_id` field gets the id of its row, made before the row is written (record_label finds the row by
    it); one with `warnings` gets a warning when the row is not in within verdict_writes.WAIT_S (it is then written in
    the background)."""
    rows = outcome.cache_rows
    handed = False  # the rows are with a write in the store's write lane, which lets go of them once done
    try:
        verdict_id = new_verdict_id()
        result = outcome.result
        if "verdict_id" in type(result).model_fields:
            result = result.model_copy(update={"verdict_id": verdict_id})
        output = result.model_dump(mode="json")
        tenant = tenants.current()
        log_row = VerdictLog(app.store).log
        attempt = partial(
            app.store.writes.future, _write, app, rows, True,
            log_row, tool, outcome.backend, outcome.model, inputs, output, output.get("usage", {}), outcome.records, rows, verdict_id, tenant,
        )
        handed = True
        warning = await app.verdict_writes.write(attempt, partial(app.cache.written, rows), tool, verdict_id, tenant)
    finally:
        if not handed:  # failed before anything was written: the rows are dropped
            app.cache.written(rows)
    if warning is not None and "warnings" in type(result).model_fields:
        result = result.model_copy(update={"warnings": [*getattr(result, "warnings", []), warning]})
    return result


def _write(app: App, rows: list[CacheRow], retried: bool, write: Callable[..., Any], *args: Any) -> Any:
    """In the store's write lane: `write(*args)` (one transaction holding `rows`), then the rows leave the call cache's
    memory (later lookups read the table). A failed write drops them as well, unless it is `retried` (the verdict's
    row: verdict_writes.py tries again, and lets go of them when it gives up). Done in the lane, so a caller cancelled
    while its write waits there leaves the rows answered from memory until they are in the table."""
    try:
        done = write(*args)
    except BaseException:
        if not retried:
            app.cache.written(rows)
        raise
    app.cache.written(rows, stored=True)
    return done
