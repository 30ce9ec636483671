"""Whether a store can serve: the database answers and has every migration this version applies (the HTTP
readiness probe, transports/probes.py). Reasons are short and fixed: a probe answers nothing about the database."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from judge_mcp.storage.engine import Engine, Migration, StoreError
from judge_mcp.storage.migrations import MIGRATIONS, names

READY_TIMEOUT_S = 3.0  # a database that has not answered by then is not ready

# The readiness check's own thread (per event loop): never one of anyio's shared limiter, which the tools and the
# store use, so probes do not take a worker thread from a call, nor wait for one behind them.
_PROBE_THREADS: RunVar[anyio.CapacityLimiter] = RunVar("judge_mcp_probe_threads")


def _probe_limiter() -> anyio.CapacityLimiter:
    try:
        return _PROBE_THREADS.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _PROBE_THREADS.set(limiter)
        return limiter


def not_ready(store: Engine, migrations: Sequence[Migration] = MIGRATIONS) -> str | None:
    """None when ready; else why not ("database unreachable", "migrations not applied"). Blocks: run it in a thread."""
    try:
        applied = {row["name"] for row in store.query("SELECT name FROM _migrations")}
    except StoreError:
        return "database unreachable"
    return "migrations not applied" if set(names(migrations)) - applied else None


async def readiness(store: Engine, migrations: Sequence[Migration] = MIGRATIONS) -> str | None:
    """`not_ready` in a thread of the probes' own limiter (one at a time), given up after READY_TIMEOUT_S (the thread
    finishes on its own)."""
    with anyio.move_on_after(READY_TIMEOUT_S):
        return await anyio.to_thread.run_sync(partial(not_ready, store, migrations), abandon_on_cancel=True, limiter=_probe_limiter())
    return "database unreachable"
