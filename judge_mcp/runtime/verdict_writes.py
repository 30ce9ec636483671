"""A tool call's verdict row is worth less than its answer: the answer goes out within WAIT_S of the judgment, and
the row follows.

The row (the verdict and the call's new cache rows, in one transaction: nothing half-written) is written in the
store's write lane. Normally that takes milliseconds and the call returns once it is in. When it is not in after
WAIT_S (another process holds the database's write lock) or its attempt failed (a full disk), the call answers all
the same, with a warning saying so, and the write goes on in the background: retried after each of RETRY_DELAYS_S,
each attempt whole or not at all. A row given up on after the last attempt is counted as lost (`judge_stats`
reports `verdict_log`: rows pending, written late, lost, and the last reason) and logged; its answers then leave
the call cache's memory, so a later identical request is sent again. Shutdown waits up to DRAIN_S for pending
rows.

Each verdict has a `verdict_id` before its row exists (`new_verdict_id`, made when the call starts): the answer
carries it whether or not the row is in yet, and record_label can wait for a row still pending (`settle`).

A cache hit thus never waits out a lock for its row; a call that spent backend calls gets its verdict even when
the database cannot take it.

Each row belongs to the tenant of its call (tenants.py), and so does its bookkeeping: `health()` counts the calling
tenant's rows only, and `settle` waits only for the calling tenant's own rows, so another tenant's `verdict_id` is
unknown at once, pending or not, as it is once written (stats/labels.py). What refuses to start instead is a database that cannot be written at all
(`refuse_read_only`): better than spending backend calls whose answers and verdicts could never be kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


from judge_mcp.contract.results import VerdictLogHealth
from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage.engine import Engine, StoreError

log = logging.getLogger("judge_mcp.verdict_writes")

WAIT_S = 1.0  # the longest an answer waits for its verdict row
RETRY_DELAYS_S = (1.0, 4.0, 15.0)  # waits before the background retries (each attempt may also wait the busy timeout)
DRAIN_S = 10.0  # shutdown waits this long for rows still being written


def new_verdict_id() -> str:
    """A verdict's id: 32 random hex digits (a UUID4's), made before its row is written and stored with it."""
    return uuid.uuid4().hex


@dataclass
class _Kept:
    """One tenant's rows written late or given up on since the server started, and the last reason."""

    written_late: int = 0
    lost: int = 0
    last_error: str | None = None


class VerdictWrites:
    """The verdict rows of one App: written before the answer when quick, else after it (see the module doc); the
    bookkeeping of each tenant's rows apart."""

    def __init__(self) -> None:
        self._pending: dict[asyncio.Task[None], str] = {}  # the rows being written in the background -> their tenant
        self._by_id: dict[tuple[str, str], asyncio.Task[None]] = {}  # (tenant, verdict id) of the pending rows
        self._kept: dict[str, _Kept] = {}

    def _of(self, tenant: str) -> _Kept:
        kept = self._kept.get(tenant)
        if kept is None:
            kept = self._kept[tenant] = _Kept()
        return kept

    def health(self, tenant: str | None = None) -> VerdictLogHealth:
        """The rows of `tenant` (None: the call's, tenants.current()): pending, written late, lost, the last reason."""
        tenant = tenant or tenants.current()
        kept = self._kept.get(tenant) or _Kept()
        pending = sum(1 for owner in self._pending.values() if owner == tenant)
        return VerdictLogHealth(pending=pending, written_late=kept.written_late, lost=kept.lost, last_error=kept.last_error)

    async def write(
        self, attempt: Callable[[], Awaitable[Any]], give_up: Callable[[], None], what: str, verdict_id: str | None = None,
        tenant: str | None = None,
    ) -> str | None:
        """Write a row of `tenant` (None: the call's) with `attempt()` (one whole transaction; called again for each
        retry). None once it is written; a warning for the answer when it is not within WAIT_S (the rest then happens
        in the background, and `give_up()` runs if the last attempt fails too; `settle(verdict_id)` waits for it). An
        `attempt` that returns a future (the write lane's `future`) is waited for as it is, with no task around it."""
        tenant = tenant or tenants.current()
        first = asyncio.ensure_future(attempt())
        done, _ = await asyncio.wait({first}, timeout=WAIT_S)
        if done and first.exception() is None:
            return None
        reason = _reason(first.exception()) if done else f"the database was still busy after {WAIT_S:g} s"
        task = asyncio.get_running_loop().create_task(self._finish(first, attempt, give_up, what, self._of(tenant)))
        self._pending[task] = tenant
        task.add_done_callback(lambda done_task: self._pending.pop(done_task, None))
        if verdict_id is not None:
            key = (tenant, verdict_id)
            self._by_id[key] = task
            task.add_done_callback(lambda _: self._by_id.pop(key, None))
        return (
            f"the verdict log row of this call is not written yet ({reason}); the verdict stands and the row is retried "
            f"in the background, up to {len(RETRY_DELAYS_S)} more times (judge_stats reports rows given up on)"
        )

    async def _finish(
        self, first: asyncio.Future[Any], attempt: Callable[[], Awaitable[Any]], give_up: Callable[[], None], what: str, kept: _Kept
    ) -> None:
        error: BaseException | None = None
        try:
            await first
            kept.written_late += 1
            return
        except Exception as exc:  # noqa: BLE001 - every failure of a write is retried, then counted
            error = exc
        for delay in RETRY_DELAYS_S:
            kept.last_error = _reason(error)
            await asyncio.sleep(delay)
            try:
                await attempt()
            except Exception as exc:  # noqa: BLE001
                error = exc
                continue
            kept.written_late += 1
            return
        kept.lost += 1
        kept.last_error = _reason(error)
        log.warning("gave up writing the verdict row of a %s call after %d attempts: %s", what, len(RETRY_DELAYS_S) + 1, kept.last_error)
        give_up()

    def is_pending(self, verdict_id: str) -> bool:
        """The row of this verdict of the calling tenant is still being written in the background (by this process)."""
        return (tenants.current(), verdict_id) in self._by_id

    async def settle(self, verdict_id: str, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the background write of this verdict's row, if one of the calling tenant's is
        pending; True when none is pending any more (written, or given up on)."""
        task = self._by_id.get((tenants.current(), verdict_id))
        if task is None:
            return True
        await asyncio.wait({task}, timeout=timeout_s)
        return task.done()

    async def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait up to `timeout_s` for the rows still being written (shutdown); those left are counted lost."""
        if not self._pending:
            return
        owners = dict(self._pending)
        done, left = await asyncio.wait(set(owners), timeout=timeout_s)
        for task in left:
            task.cancel()
            self._of(owners[task]).lost += 1
        if left:
            log.warning("shut down with %d verdict row(s) not written (the database stayed busy or failing)", len(left))


def _reason(exc: BaseException | None) -> str:
    return str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"


class _Probe(Exception):
    """Raised inside the probe's transaction to roll its row back."""


def refuse_read_only(store: Engine) -> None:
    """Raise StoreError when the database takes no write (a read-only file or folder, an immutable file): a row
    is written in a transaction and rolled back. Run at start, before any backend call is spent."""
    started = time.time()
    try:
        with store.transaction() as tx:
            tx.execute(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                ["write-probe", "", "", "{}", "{}", "{}", "[]", started],
            )
            raise _Probe
    except _Probe:
        return
    except StoreError as exc:
        raise StoreError(f"cannot use the database {store.location!r} (JUDGE_MCP_DB): it takes no writes ({exc})") from None
