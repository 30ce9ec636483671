"""The whole run of a judging method, from its arguments to its verdict row: the one path the MCP tools, the Python
API and the bench take (`run_method`).

1. The method's entry in the method table (methods/registry.py) and its argument model.
2. The judges: the one backend the arguments name (or the environment's), or a panel (`backends`), each built by
   the App; the self-preference guard (methods/self_preference.py) decides which of them judge.
3. The judging: each judge runs the unchanged method over its own per-call context (calls/judge.py), concurrently
   for a panel; a panel member whose backend fails is reported, and only a panel that has no member left fails.
4. The result: the one judge's, or the panel's combined (the method's combine function); the guard's findings for
   judges whose model is known only from their answers (the sampling backend) are added.
5. The write: the verdict log row (inputs, output, model, usage, every call record) with the call's new cache rows
   in one transaction, the tool call's only write; the answer waits at most a second for it (verdict_writes.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
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
# judged(cache rows) -> (result, the verdict row's backend, its model, its call records)
Judged = Callable[[list[CacheRow]], Awaitable[tuple[BaseModel, str, str, Records]]]


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
    fit), by one backend or, when the arguments name `backends`, by a panel: (its result, the call records of every
    judge). `no_reask` is the papers' strict rule (an unparsed first answer counts as it is); `log_extra` adds keys
    to the logged inputs only (the bench's item id and placement); `sampling` (the bench's --repeats) sets every
    request's temperature and bypasses the call cache (logged); `options` are the method's own keywords that are
    not tool arguments (lwe_judge's `learn`), logged too."""
    method = registry.METHODS.get(name)
    if method is None:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(sorted(registry.METHODS))}")
    if isinstance(args, Mapping):
        args = method.args.parse(args)
    if not isinstance(args, method.args):
        raise TypeError(f"{name} takes {method.args.__name__}, got {type(args).__name__}")
    panel = getattr(args, "backends", None)
    combine = method.combine
    if panel and combine is None:
        raise ValueError(f"{name} cannot be judged by a panel")
    chosen = [app.backend(b) for b in panel] if panel else [app.backend(args.backend)]  # ConfigError before any call
    guard = Guard.of(args)
    judging = guard.judges([(b.name, b.model_id) for b in chosen])  # InputError when it excludes every judge
    members = [Member(b.name, b.model_id, excluded=b.name not in judging) for b in chosen]
    records: Records = []

    async def judge(context: CallContext) -> BaseModel:
        context.no_reask, context.sampling = no_reask, sampling
        result = await method.run(context, args, **options)
        records.extend(context.records)
        return result

    logged = {**(log_extra or {}), **args.logged(), **options, **({"no_reask": True} if no_reask else {})}
    if sampling is not None:
        logged["sampling"] = {"temperature": sampling.temperature, "fresh": sampling.fresh}
    if panel and combine is not None:
        judged = partial(_panel, app, judge, partial(combine, args=args), members, chosen, guard, progress)
    else:
        judged = partial(_one_judge, app, judge, members[0], chosen[0], guard, progress)
    return await write_verdict(app, name, logged, judged), records


async def run_once(
    app: App, tool: str, inputs: dict[str, Any], method: Callable[[CallContext], Awaitable[BaseModel]], *, backend: str | None = None
) -> Any:
    """`method(context)` by one backend, its verdict row written as `run_method` writes it, without the method table: for
    tests and perf scripts that judge with a function of their own."""
    chosen = app.backend(backend)
    judged = partial(_one_judge, app, method, Member(chosen.name, chosen.model_id), chosen, Guard(None), None)
    return await write_verdict(app, tool, inputs, judged)


async def _one_judge(
    app: App, judge: Callable[[CallContext], Awaitable[BaseModel]], member: Member, backend: Backend, guard: Guard,
    progress: ProgressFn | None, rows: list[CacheRow],
) -> tuple[BaseModel, str, str, Records]:
    """One backend judges; its failure is the call's. A judge whose model its answers named (the sampling backend:
    the client's model) is checked by the guard with that model; the guard's findings join the result's warnings."""
    context = CallContext(backend, app.cache, app.store, progress=progress, cache_rows=rows, shared_option_pool=app.settings.shared_option_pool)
    result = with_notes(await judge(context), context.notes)
    member.model = context.model_id
    guard.reported([(backend.name, backend.model_id, context.model_id)], lambda _, model: backend.self_preference_warning(model), one_judge=True)
    if guard.found is not None or guard.warnings:
        result = result.model_copy(update={"warnings": [*getattr(result, "warnings", []), *guard.warnings], **guard.update()})
    return result, backend.name, context.model_id, context.records


async def _panel(
    app: App, judge: Callable[[CallContext], Awaitable[BaseModel]], combine: Callable[..., BaseModel], members: list[Member],
    chosen: list[Backend], guard: Guard, progress: ProgressFn | None, rows: list[CacheRow],
) -> tuple[BaseModel, str, str, Records]:
    """Every member that judges runs concurrently, each over its own call context (sharing the call cache). A member
    whose backend fails after its retries is reported as failed; when every member that ran failed, the first
    failure is raised. `combine(members, latency_ms=..., warnings=...)` makes the panel's result; one verdict row
    holds every member's call records, each tagged with `panel_member`."""
    contexts: dict[str, CallContext] = {}
    errors: list[BackendError] = []
    judging = [m for m in members if not m.excluded]
    started = time.perf_counter()
    done = 0

    async def one(member: Member, backend: Backend) -> None:
        nonlocal done
        context = contexts[member.backend] = CallContext(
            backend, app.cache, app.store, cache_rows=rows, shared_option_pool=app.settings.shared_option_pool
        )
        try:
            member.result = with_notes(await judge(context), context.notes)
        except BackendError as exc:
            member.error = str(exc)
            errors.append(exc)
        member.usage = context.usage()
        member.model = context.model_id  # the sampling backend's: the model its client reported
        done += 1
        if progress is not None:
            await progress(done, len(judging), f"panel member {member.backend} {'failed' if member.error else 'judged'}")

    async with anyio.create_task_group() as tg:
        for member, backend in zip(members, chosen):
            if not member.excluded:
                tg.start_soon(one, member, backend)
    if errors and len(errors) == len(judging):
        raise errors[0]
    by_name = {b.name: b for b in chosen}
    judged = [(m.backend, b.model_id, m.model) for m, b in zip(members, chosen) if not m.excluded]
    guard.reported(judged, lambda name, model: by_name[name].self_preference_warning(model), one_judge=False)
    result = combine(members, latency_ms=(time.perf_counter() - started) * 1000.0, warnings=guard.warnings)
    if guard.found is not None:
        result = result.model_copy(update=guard.update())
    records = [{**record, "panel_member": m.backend} for m in members if m.backend in contexts for record in contexts[m.backend].records]
    return result, "+".join(m.backend for m in members), result.model, records  # type: ignore[attr-defined]


def with_notes(result: BaseModel, notes: list[str]) -> BaseModel:
    """`result` with its call context's notes (calls/context.py) among its warnings, each once."""
    warnings = getattr(result, "warnings", None)
    if not notes or warnings is None:
        return result
    return result.model_copy(update={"warnings": [*warnings, *(n for n in notes if n not in warnings)]})


async def write_verdict(app: App, tool: str, inputs: dict[str, Any], judged: Judged) -> Any:
    """Run `judged(rows)` -> (result, backend, model, call records), its call contexts appending their new cache rows
    to `rows`, then write the verdict row with those cache rows in one transaction: the tool call's only write.
    If the judgment fails, the answers that did come back are still cached (best effort: the failure is what
    counts). Until written, the call cache answers those requests from memory. A result model with a `verdict_id`
    field gets the id of its row, made before the row is written (record_label finds the row by it)."""
    verdict_id = new_verdict_id()
    rows: list[CacheRow] = []
    handed = False  # the rows are with a write in the store's write lane, which lets go of them once done
    try:
        try:
            result, backend, model, records = await judged(rows)
        except Exception:
            if rows:
                handed = True
                try:
                    await app.store.writes.run(_write, app, partial(CacheTable(app.store).put_many, rows), rows)
                except Exception:
                    log.warning("could not cache the answers of a failed %s call", tool, exc_info=True)
            raise
        if "verdict_id" in type(result).model_fields:
            result = result.model_copy(update={"verdict_id": verdict_id})
        output = result.model_dump(mode="json")
        usage = output.get("usage", {})
        handed = True
        tenant = tenants.current()
        write = partial(VerdictLog(app.store).log, tool, backend, model, inputs, output, usage, records, rows, verdict_id, tenant)
        warning = await app.verdict_writes.write(
            partial(app.store.writes.future, _write_kept, app, write, rows), partial(app.cache.written, rows), tool, verdict_id, tenant
        )
    finally:
        if not handed:  # cancelled, or failed before anything was written: the rows are dropped
            app.cache.written(rows)
    if warning is not None and "warnings" in type(result).model_fields:
        result = result.model_copy(update={"warnings": [*getattr(result, "warnings", []), warning]})
    return result


def _write_kept(app: App, write: Callable[[], Any], rows: list[CacheRow]) -> Any:
    """In the store's write lane: one attempt at the verdict's write; once it is in, the rows leave the call cache's
    memory (later lookups read the table). A failed attempt keeps them there for the next one."""
    done = write()
    app.cache.written(rows, stored=True)
    return done


def _write(app: App, write: Callable[[], Any], rows: list[CacheRow]) -> Any:
    """In the store's write lane: `write()`, then the rows leave the call cache's memory (written, or dropped with the
    failed write; later lookups read the table). Done in the lane, so a caller cancelled while its write waits there
    leaves the rows answered from memory until they are in the table."""
    try:
        done = write()
    except BaseException:
        app.cache.written(rows)
        raise
    app.cache.written(rows, stored=True)
    return done
