"""One backend call per request across every process on a database that offers leases (PostgreSQL's; storage/
pg_leases.py): the cross-replica half of the call cache's single-flight. calls/cache.py runs `complete_once` as
the task of a new in-process flight, so the per-process sharing stays in front and each process claims a key once.

The task claims the key's lease: if another replica answered meanwhile, that answer is read and returned; if
this process now holds the lease, it sends the request, then writes the answer's cache row, drops the lease and
notifies the key in one commit; if another replica holds it, the task waits for the notification (or its poll
interval) and tries again, so a holder that died is replaced once its lease runs out. A task cancelled or failing
at any point gives its claim up (a release queued behind the claim in the write lane), so waiters elsewhere do
not wait for the lease to run out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion
from judge_mcp.storage.call_cache import CacheRow
from judge_mcp.storage.engine import StoreError

log = logging.getLogger("judge_mcp")

# how a flight's answer came: sent by this process and written (SENT_STORED) or not written (SENT), or read from
# the table after another process wrote it (ELSEWHERE)
SENT, SENT_STORED, ELSEWHERE = "sent", "sent-stored", "elsewhere"
STORE_WAIT_S = 5.0  # the longest a claim or the answer's write is waited for (the job itself runs to its end in the lane)


async def complete_once(
    store: Any,
    backend: Backend,
    request: ChatRequest,
    key: str,
    row_of: Callable[[Completion], CacheRow | None],
    written: Callable[[CacheRow], None],
) -> tuple[Completion | dict[str, Any], str]:
    """(completion, SENT or SENT_STORED) when this process sent the request; (the stored answer, ELSEWHERE) when
    another process did. `row_of(completion)` is the cache row to write for a new answer (None: not stored);
    `written(row)` is called in the write lane once it is committed."""
    leases = store.leases
    loop = asyncio.get_running_loop()
    token = leases.token()
    try:
        while True:
            woken = leases.watch(key, loop)  # before the claim: a notification in between is not missed
            try:
                state, stored = await _bounded(store, "claim the request's lease", leases.claim, key, token)
                if state == "stored":
                    return stored, ELSEWHERE
                if state == "mine":
                    break
                try:
                    await asyncio.wait_for(woken, leases.poll_s)
                except TimeoutError:
                    pass
            finally:
                leases.unwatch(key, woken)
        completion = await backend.complete(request)
    except BaseException:
        _release_soon(store, key, token)
        raise
    try:
        await _bounded(store, "write the answer", _finish, leases, key, token, row_of(completion), written)
    except Exception as exc:  # the answer stands; its lease runs out by itself and the caller writes the row later
        log.warning("could not write a shared answer and release its lease (%s); it is written with the verdict", exc)
        return completion, SENT
    return completion, SENT_STORED


async def _bounded(store: Any, doing: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in the store's write lane, waited for STORE_WAIT_S at most (StoreError then; the job still runs
    to its end, so a claim it makes is released by the release queued behind it)."""
    try:
        return await asyncio.wait_for(store.writes.run(fn, *args), STORE_WAIT_S)
    except TimeoutError:
        raise StoreError(f"could not {doing} in the database {store.location!r} within {STORE_WAIT_S:g} s (is it stopped or unreachable?)") from None


def _finish(leases: Any, key: str, token: str, row: CacheRow | None, written: Callable[[CacheRow], None]) -> None:
    leases.finish(key, token, row)
    if row is not None:
        written(row)


def _release_soon(store: Any, key: str, token: str) -> None:
    """Queue the release of `token`'s claim behind the claim in the write lane (a no-op if it never held it)."""
    try:
        store.writes.submit(partial(store.leases.release, key, token), _ignore)
    except Exception:  # noqa: BLE001 - no lane: the lease runs out by itself
        pass


def _ignore(result: Any, error: BaseException | None) -> None:
    if error is not None:
        log.info("could not release a call lease (%s); it runs out by itself", error)
