"""The services a judging call runs on, shared by the MCP server, the CLI, the Python API and the bench harness.

`App` owns the settings, the one store, the verdict writes, the shared call cache and the backends (built once per
name, on first use, each starting at the concurrency limit it learned last time). It runs nothing itself: the run
of a method, from its arguments to its verdict row, is runtime/run.py; what a server does once at start (the
imports ahead of the first call, the heap settled) is runtime/startup.py. It knows nothing about MCP, nor the
method table.
"""

from __future__ import annotations

import copy
import logging

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.backends import Backend, build_backend
from judge_mcp.calls.cache import CallCache
from judge_mcp.config.settings import Settings, load_settings
from judge_mcp.storage import open_store, retention
from judge_mcp.storage.backend_limits import BackendLimits
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.runtime.repeats import Repeats
from judge_mcp.runtime.verdict_writes import VerdictWrites, refuse_read_only

log = logging.getLogger("judge_mcp")


class App:
    def __init__(self, settings: Settings | None = None, *, store: Engine | None = None):
        self.settings = settings or load_settings()
        self.store = store or open_store(self.settings.database, MIGRATIONS)
        refuse_read_only(self.store)  # before any backend call is spent on answers that could not be kept
        self.apply_retention()
        self._new_loop_state()
        self._learned_limits = BackendLimits(self.store).all()  # by backend identity: where each limit starts
        self.stdio = False  # set by `serve --transport stdio`: only then may an image argument be a file path
        self.calls_in_flight = 0  # tool calls running now (server/tools.py: invoke), for the message a Ctrl-C of `serve` prints
        self.interrupted = False  # set by a Ctrl-C of `serve` (cli/main.py)
        telemetry.configure(self.settings)  # OpenTelemetry on or off, as the settings say (telemetry/hooks.py)

    def _new_loop_state(self) -> None:
        """What belongs to one event loop: the backends (their HTTP sessions and limiters), the call cache's calls in
        flight, the verdict rows being written."""
        self.verdict_writes = VerdictWrites()
        self.repeats = Repeats()  # the calls running now, for a client that sends one again (runtime/repeats.py)
        self.cache = CallCache(self.store, shared=self.settings.shared_cache)
        self._backends: dict[str, Backend] = {}

    def sibling(self) -> App:
        """An App on this one's settings and store with loop state of its own: for another event loop (the Python API's
        Judge used from several threads, each with its own asyncio.run). Closed with `close_loop`, not `aclose`."""
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
