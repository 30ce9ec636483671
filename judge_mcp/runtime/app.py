"""The services a judging call runs on, shared by the MCP server, the CLI, the Python API and the bench harness.

`App` owns the settings, the one store, the verdict writes, the shared call cache and the backends (built once per
name, on first use, each starting at the concurrency limit it learned last time). It runs nothing itself: the run
of a method, from its arguments to its verdict row, is runtime/run.py. It knows nothing about MCP.
"""

from __future__ import annotations

import copy
import gc
import logging
import threading

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.backends import Backend, build_backend, preload
from judge_mcp.calls.cache import CallCache
from judge_mcp.config.settings import ConfigError, Settings, load_settings
from judge_mcp.methods import registry
from judge_mcp.storage import open_store, retention
from judge_mcp.storage.backend_limits import BackendLimits
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.runtime.verdict_writes import VerdictWrites, refuse_read_only

log = logging.getLogger("judge_mcp")


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
        self.apply_retention()
        self._new_loop_state()
        self._learned_limits = BackendLimits(self.store).all()  # by backend identity: where each limit starts
        self.stdio = False  # set by `serve --transport stdio`: only then may an image argument be a file path
        self.calls_in_flight = 0  # tool calls running now (tools.ArgsTool), for the message a Ctrl-C of `serve` prints
        self.interrupted = False  # set by a Ctrl-C of `serve` (cli/main.py)
        telemetry.configure(self.settings)  # OpenTelemetry on or off, as the settings say (telemetry.py)

    def _new_loop_state(self) -> None:
        """What belongs to one event loop: the backends (their HTTP sessions and limiters), the call cache's calls in
        flight, the verdict rows being written."""
        self.verdict_writes = VerdictWrites()
        self.cache = CallCache(self.store, shared=self.settings.shared_cache)
        self._backends: dict[str, Backend] = {}

    def sibling(self) -> App:
        """An App on this one's settings and store with loop state of its own: for another event loop (the Python API's
        CallContext used from several threads, each with its own asyncio.run). Closed with `close_loop`, not `aclose`."""
        other = copy.copy(self)
        other._new_loop_state()
        return other

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
        Nothing for the embedded model or a configuration with an error (each call reports that error). Then the
        judging methods' modules, in a thread of their own (methods/registry.py). Returns the threads (a benchmark
        waits for them, as a client's think time would)."""
        try:
            backend_thread = preload(self.settings.backend(None).kind)
        except ConfigError:
            backend_thread = None
        methods = registry.preload(after=backend_thread)
        return [methods] if backend_thread is None else [methods, backend_thread]

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
        await self.close_loop()
        self.store.close()
        telemetry.flush()

    async def close_loop(self) -> None:
        """Close what belongs to the running event loop (the store stays open)."""
        await self.verdict_writes.drain()  # verdict rows still being written, before the store closes
        await self._keep_learned_limits()
        for backend in self._backends.values():
            try:
                await backend.aclose()
            except Exception:  # pragma: no cover - best effort on shutdown
                log.exception("closing backend %s", backend.name)
        self._backends.clear()
