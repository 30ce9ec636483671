"""The application core shared by the MCP server, the CLI and the bench harness.

`App` owns the settings, the one Store, the shared call cache and the backends (built once per name, on first
use). `App.run` executes one judging method: it builds a `CallContext`, runs the method, and writes the verdict log
row (inputs, output, model, usage, every call record) and the call's new cache rows in one transaction, the tool
call's only write; an answer waits at most a second for it (verdict_writes.py: the row follows in the background
when the database is busy or failing, and a database that takes no writes is refused at start). `App.run_panel`
runs one method on several backends at once (a judge panel) and combines their results with a function of
methods/panel.py; both apply the self-preference guard when the caller says who wrote the answers. It knows
nothing about MCP.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from functools import partial
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.backends import Backend, build_backend, preload
from judge_mcp.backends.errors import BackendError
from judge_mcp.calls.cache import CacheRow, CallCache
from judge_mcp.config.settings import ConfigError, Settings, load_settings
from judge_mcp.calls.context import CallContext, ProgressFn
from judge_mcp.storage import open_store, retention
from judge_mcp.storage.backend_limits import BackendLimits
from judge_mcp.storage.call_cache import CacheTable
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.verdict_log import VerdictLog
from judge_mcp.runtime.verdict_writes import VerdictWrites, new_verdict_id, refuse_read_only

if TYPE_CHECKING:  # the methods (panel among them) load at the first judging call, not at start
    from judge_mcp.methods import panel

log = logging.getLogger("judge_mcp")
R = TypeVar("R", bound=BaseModel)


def settle_heap() -> None:
    """Call once start-up is done (imports, settings, the server's tools): what the heap holds moves to the permanent
    generation (gc.freeze), so the collector stops re-scanning the SDK's, pydantic's and our long-lived objects in
    every older-generation collection (~0.05 ms of CPU per compare_pair, ~1.2 ms per 16-response FLIP call, measured
    in process). No full collection first: it took ~30-95 ms of the start (perf/cold_start.py) to free a few hundred
    objects of start-up garbage (3,382 counted with the collector off during the imports, cli.main), which the
    permanent generation now keeps, once. Turns the collector (back) on."""
    gc.freeze()
    gc.enable()


class App:
    def __init__(self, settings: Settings | None = None, *, store: Engine | None = None):
        self.settings = settings or load_settings()
        self.store = store or open_store(self.settings.database, MIGRATIONS)
        refuse_read_only(self.store)  # before any backend call is spent on answers that could not be kept
        self.verdict_writes = VerdictWrites()
        self.apply_retention()
        self.cache = CallCache(self.store)
        self._backends: dict[str, Backend] = {}
        self._learned_limits = BackendLimits(self.store).all()  # by backend identity: where each limit starts
        self.stdio = False  # set by `serve --transport stdio`: only then may an image argument be a file path
        self.calls_in_flight = 0  # tool calls running now (tools.ArgsTool), for the message a Ctrl-C of `serve` prints
        self.interrupted = False  # set by a Ctrl-C of `serve` (cli.py)
        telemetry.configure(self.settings)  # OpenTelemetry on or off, as the settings say (telemetry.py)

    def apply_retention(self) -> dict[str, int]:
        """Delete cache and verdict-log rows past the configured ages (JUDGE_MCP_*_MAX_AGE_DAYS); none set: nothing."""
        cache_days, verdict_days = self.settings.cache_max_age_days, self.settings.verdicts_max_age_days
        if cache_days is None and verdict_days is None:
            return {"call_cache": 0, "verdicts": 0, "labels": 0, "texts": 0}
        return retention.gc(
            self.store,
            cache_older_than_s=None if cache_days is None else cache_days * 86400,
            verdicts_older_than_s=None if verdict_days is None else verdict_days * 86400,
        )

    def warm_up(self) -> list[threading.Thread]:
        """Ahead of the first tool call: the default backend's HTTP client imported in a thread (backends.preload).
        Nothing for the embedded model or a configuration with an error (each call reports that error). And the judging
        methods' modules, in a thread of their own (methods/registry.py). Returns the threads (a benchmark waits for
        them, as a client's think time would)."""
        from judge_mcp.methods import registry

        threads = [registry.preload()]
        try:
            kind = self.settings.backend(None).kind
        except ConfigError:
            return threads
        backend_thread = preload(kind)
        return threads if backend_thread is None else [*threads, backend_thread]

    def backend(self, name: str | None) -> Backend:
        """The backend named `name` (None: the environment's). Raises ConfigError for unknown names."""
        cfg = self.settings.backend(name)
        backend = self._backends.get(cfg.name)
        if backend is None:
            backend = self._backends[cfg.name] = build_backend(cfg)
            learned = self._learned_limits.get(backend.identity())
            if learned is not None:
                backend.limit.resume(*learned)
        return backend

    async def run(
        self,
        tool: str,
        inputs: dict[str, Any],
        method: Callable[[CallContext], Awaitable[R]],
        *,
        backend: str | None = None,
        progress: ProgressFn | None = None,
        authors: panel.Authors | None = None,
    ) -> R:
        from judge_mcp.methods import panel

        chosen = self.backend(backend)
        found, warnings, _ = panel.guard(authors, [(chosen.name, chosen.model_id)])  # raises when it excludes the judge

        async def judged(rows: list[CacheRow]) -> tuple[R, str, str, list[dict[str, Any]]]:
            judge = CallContext(chosen, self.cache, self.store, progress=progress, cache_rows=rows, shared_option_pool=self.settings.shared_option_pool)
            result = await method(judge)
            return self._guarded(result, chosen, judge.model_id, authors, found, warnings), chosen.name, judge.model_id, judge.records

        return await self._logged(tool, inputs, judged)

    @staticmethod
    def _guarded(result: R, backend: Backend, model_id: str, authors: panel.Authors | None, found: list[Any] | None, warnings: list[str]) -> R:
        """The result with the self-preference guard's findings. A judge whose model the answers named (the sampling
        backend: the client's model) is checked again with it; one whose verdicts always carry a warning (the sampling
        backend again) carries it when the caller did not say who wrote the answers."""
        if authors is not None and model_id != backend.model_id:
            from judge_mcp.methods import panel

            found, warnings, _ = panel.guard(authors, [(backend.name, model_id)])
        own = backend.self_preference_warning(model_id) if authors is None else None
        warnings = [*warnings, *([own] if own else [])]
        if found is None and not warnings:
            return result
        update: dict[str, Any] = {"warnings": [*getattr(result, "warnings", []), *warnings]}
        if found is not None:
            update["self_preference"] = found
        return result.model_copy(update=update)

    async def _logged(
        self, tool: str, inputs: dict[str, Any], judged: Callable[[list[CacheRow]], Awaitable[tuple[R, str, str, list[dict[str, Any]]]]]
    ) -> R:
        """Run `judged(rows)` -> (result, backend, model, call records), its Judges appending their new cache rows to
        `rows`, then write the verdict row with those cache rows in one transaction: the tool call's only write.
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
                        await self.store.writes.run(self._write, partial(CacheTable(self.store).put_many, rows), rows)
                    except Exception:
                        log.warning("could not cache the answers of a failed %s call", tool, exc_info=True)
                raise
            if "verdict_id" in type(result).model_fields:
                result = result.model_copy(update={"verdict_id": verdict_id})
            output = result.model_dump(mode="json")
            usage = output.get("usage", {})
            handed = True
            write = partial(VerdictLog(self.store).log, tool, backend, model, inputs, output, usage, records, rows, verdict_id)
            warning = await self.verdict_writes.write(
                partial(self.store.writes.run, self._write_kept, write, rows), partial(self.cache.written, rows), tool, verdict_id
            )
        finally:
            if not handed:  # cancelled, or failed before anything was written: the rows are dropped
                self.cache.written(rows)
        if warning is not None and "warnings" in type(result).model_fields:
            result = result.model_copy(update={"warnings": [*getattr(result, "warnings", []), warning]})
        return result

    def _write_kept(self, write: Callable[[], Any], rows: list[CacheRow]) -> Any:
        """In the store's write lane: one attempt at the verdict's write; once it is in, the rows leave the call
        cache's memory (later lookups read the table). A failed attempt keeps them there for the next one."""
        done = write()
        self.cache.written(rows, stored=True)
        return done

    def _write(self, write: Callable[[], Any], rows: list[CacheRow]) -> Any:
        """In the store's write lane: `write()`, then the rows leave the call cache's memory (written, or dropped with
        the failed write; later lookups read the table). Done in the lane, so a caller cancelled while its write waits
        there leaves the rows answered from memory until they are in the table."""
        try:
            done = write()
        except BaseException:
            self.cache.written(rows)
            raise
        self.cache.written(rows, stored=True)
        return done

    async def run_panel(
        self,
        tool: str,
        inputs: dict[str, Any],
        method: Callable[[CallContext], Awaitable[R]],
        combine: Callable[..., R],
        *,
        backends: Sequence[str],
        progress: ProgressFn | None = None,
        authors: panel.Authors | None = None,
    ) -> R:
        """Run `method` once per backend, concurrently, each with its own CallContext (sharing the call cache), and
        `combine(members, latency_ms=..., warnings=...)` their outcomes. A member whose backend fails after its retries is
        reported as failed; when every member that ran failed, the first failure is raised. One verdict-log row
        holds every member's call records (each tagged with `panel_member`), written with every member's new cache
        rows in one transaction, as App.run does."""
        from judge_mcp.methods import panel

        chosen = [self.backend(name) for name in backends]  # ConfigError on an unknown name, before any call
        found, warnings, judging = panel.guard(authors, [(b.name, b.model_id) for b in chosen])
        members = [panel.Member(b.name, b.model_id, excluded=b.name not in judging) for b in chosen]
        judges: dict[str, CallContext] = {}
        errors: list[BackendError] = []
        started = time.perf_counter()
        done = 0

        async def judged(rows: list[CacheRow]) -> tuple[R, str, str, list[dict[str, Any]]]:
            async def one(member: panel.Member, backend: Backend) -> None:
                nonlocal done
                judge = judges[member.backend] = CallContext(
                    backend, self.cache, self.store, cache_rows=rows, shared_option_pool=self.settings.shared_option_pool
                )
                try:
                    member.result = await method(judge)
                except BackendError as exc:
                    member.error = str(exc)
                    errors.append(exc)
                member.usage = judge.usage()
                member.model = judge.model_id  # the sampling backend's: the model its client reported
                done += 1
                if progress is not None:
                    await progress(done, len(judging), f"panel member {member.backend} {'failed' if member.error else 'judged'}")

            async with anyio.create_task_group() as tg:
                for member, backend in zip(members, chosen):
                    if not member.excluded:
                        tg.start_soon(one, member, backend)
            if errors and len(errors) == len(judging):
                raise errors[0]
            found_now, warnings_now = self._late_guard(members, chosen, authors, found, warnings)
            result = combine(members, latency_ms=(time.perf_counter() - started) * 1000.0, warnings=warnings_now)
            if found_now is not None:
                result = result.model_copy(update={"self_preference": found_now})
            records = [{**record, "panel_member": m.backend} for m in members if m.backend in judges for record in judges[m.backend].records]
            return result, "+".join(backends), result.model, records  # type: ignore[attr-defined]

        return await self._logged(tool, inputs, judged)

    @staticmethod
    def _late_guard(
        members: Sequence[panel.Member], chosen: Sequence[Backend], authors: panel.Authors | None, found: list[Any] | None, warnings: list[str]
    ) -> tuple[list[Any] | None, list[str]]:
        """The self-preference findings and warnings once the panel has judged: a member whose model its answers named
        (the sampling backend: the client's model) is checked with that model, or, without authors, adds its own
        warning."""
        late = [(m, b) for m, b in zip(members, chosen) if m.model != b.model_id]
        if not late:
            return found, warnings
        if authors is None:
            return found, [*warnings, *(w for m, b in late for w in [b.self_preference_warning(m.model)] if w)]
        from judge_mcp.methods import panel

        names = {m.backend for m, _ in late}
        found = [*(p for p in found or [] if p.backend not in names), *panel.self_preference([(m.backend, m.model) for m, _ in late], authors.models)]
        return found, panel.self_preference_warnings(found, authors.models, authors.names)

    async def _keep_learned_limits(self) -> None:
        """What this process's backends learned of their limits (backends/limiter.py), for the next process."""
        learned = {b.identity(): b.limit.learned for b in self._backends.values()}
        changed = {k: v for k, v in learned.items() if v is not None and self._learned_limits.get(k) != v}
        if changed:
            try:
                await self.store.writes.run(BackendLimits(self.store).put, changed)
            except Exception:  # best effort: the next process starts at the ceiling and learns again
                log.warning("could not keep the backends' learned concurrency limits", exc_info=True)

    async def aclose(self) -> None:
        await self.verdict_writes.drain()  # verdict rows still being written, before the store closes
        await self._keep_learned_limits()
        for backend in self._backends.values():
            try:
                await backend.aclose()
            except Exception:  # pragma: no cover - best effort on shutdown
                log.exception("closing backend %s", backend.name)
        self._backends.clear()
        self.store.close()
        telemetry.flush()
