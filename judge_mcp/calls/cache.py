"""The call cache: temperature-0 requests answered from the store (its table: storage/call_cache.py), and identical
requests in flight sharing one call.

Keyed by `ChatRequest.cache_key(backend.identity())`: a hash of the exact request and the backend's kind, endpoint
and model (never its key). A new answer is stored under `backend.answer_identity(...)`, the same identity but for
the sampling backend's, whose model is the one the client reports with the answer (its identity is None, no lookup,
until its client has answered once); a request asking for log-probabilities has its own key, and its cached completion keeps
them (a hit answers with the same probabilities as the call did). Requests with temperature > 0 are samples and always go to the backend. Completions with
empty text are not stored (a later identical request goes to the backend again). A hit is a pure read: it writes
nothing. The concurrent lookups of one judgment share one read of the table (`_Lookup`). A new answer is written at
once, or, when the caller passes a `defer` list (runtime/run.py's run_method does), appended to it as a `CacheRow` for the caller to
write with its verdict; until that write, identical requests are answered from memory, and for a while after it
(the last RECENTLY_WRITTEN answers) a read that began before the write committed still finds them.

Tenants: every key is scoped (`scoped_key`). By default the scope is the tenant of the call being served
(storage/tenancy.py), so a tenant is never answered from, nor joins the flight of, another tenant's identical request:
neither `usage.cached_calls` nor the latency tells it that someone else sent the same text. With `shared=True`
(JUDGE_MCP_SHARED_CACHE=1) the configured backends' deterministic answers are shared by every tenant under one scope,
which the operator accepts as visible to them; the sampling backend's answers (a client's own model) are always kept
per tenant, and its identity names the MCP session, so they are never served to another session. Rows cached before
keys were scoped (without a scope in their key) are never looked up again; migration m020 deletes them.

Where the store offers leases (PostgreSQL: replicas sharing one database), a new flight's task also claims the key
across processes (calls/leased.py): an identical request in flight in another replica is waited for, not sent
again, and a new answer is written as soon as it comes back (others wait for it), not deferred to the verdict.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from functools import partial
from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion, TokenLogprob, Usage
from judge_mcp.calls.leased import ELSEWHERE, SENT, complete_once
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage import tenancy
from judge_mcp.storage.engine import Engine

__all__ = ["RECENTLY_WRITTEN", "SHARED_SCOPE", "CacheRow", "CacheTable", "CallCache", "scoped_key"]

SHARED_SCOPE = "shared"  # the scope of answers shared by every tenant (JUDGE_MCP_SHARED_CACHE=1)


def scoped_key(key: str, scope: str) -> str:
    """The stored key of `key` (ChatRequest.cache_key) within `scope` ("tenant:NAME" or SHARED_SCOPE): a request's
    key differs from one scope to another, so no lookup, flight or lease of one scope ever meets another's."""
    return hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()


class _Lookup:
    """One read of the cache table for every key asked for while it was being scheduled: the concurrent requests of
    one judgment (both orders, n FLIP responses, n rotations) cost one trip to the store's read lane, not one each.
    The read is handed over by a callback of the event loop's next iteration, after the requests started with the
    first one (a task group's siblings) have added their keys. Each caller waits on a future of its own, so a
    cancelled caller stops waiting without touching the others'."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.keys: list[str] = []
        self.waiting: list[asyncio.Future[dict[str, dict[str, Any]]]] = []

    def settle(self, found: dict[str, dict[str, Any]] | None, error: BaseException | None) -> None:
        for future in self.waiting:
            if not future.done():
                if error is None:
                    future.set_result(found if found is not None else {})
                else:
                    future.set_exception(error)


class _Flight:
    """One backend call shared by every caller of an identical request. It runs in a task of its own, so a caller
    that is cancelled (a client's `notifications/cancelled`, a timeout) stops waiting without cancelling it for the
    others; it is cancelled only when no caller waits any more."""

    def __init__(self, task: asyncio.Task[Completion] | None = None) -> None:
        self.task: asyncio.Task[Completion] = task  # type: ignore[assignment]
        self.waiters = 0
        self.claimed = False  # one caller, the first to receive the answer, counts the call as sent
        self.how = SENT  # with leases: SENT_STORED (sent and written) or ELSEWHERE (another process's answer)

    def claim(self) -> bool:
        first, self.claimed = not self.claimed, True
        return first


def _to_cached(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "model": completion.model,
        "finish_reason": completion.finish_reason,
        "structured": completion.structured,
        "usage": dict(vars(completion.usage)),  # every field of the flat Usage dataclass (asdict deep-copies, ~20x slower)
        "logprobs": None if completion.logprobs is None else [t.to_list() for t in completion.logprobs],
        **({"reasoning": completion.reasoning, "reasoning_chars": completion.reasoning_chars} if completion.reasoning_chars else {}),
        **({"notes": completion.notes} if completion.notes else {}),
    }


def _from_cached(data: dict[str, Any], request: ChatRequest) -> Completion:
    logprobs = data.get("logprobs")
    return Completion(
        text=data["text"],
        model=data["model"],
        usage=Usage(**data["usage"]),
        finish_reason=data.get("finish_reason"),
        structured=bool(data.get("structured")),
        attempts=0,
        logprobs=None if logprobs is None else tuple(TokenLogprob.from_list(t) for t in logprobs),
        raw={"cached": True},
        reasoning=data.get("reasoning"),
        reasoning_chars=int(data.get("reasoning_chars") or 0),
        notes=list(data.get("notes") or []),
    )


RECENTLY_WRITTEN = 1024  # answers kept in memory after their write, for reads that began before it


class CallCache:
    """One per store; shared by every tool call so that identical requests anywhere share one backend call."""

    def __init__(self, store: Engine | None, *, shared: bool = False):
        self.store = store
        self.shared = shared  # Settings.shared_cache: configured backends' answers shared by every tenant
        self._inflight: dict[str, _Flight] = {}
        self._unwritten: dict[str, dict[str, Any]] = {}  # deferred rows' answers, by key, until written or dropped
        # The answers written last (at most RECENTLY_WRITTEN): a table read that began before their write committed
        # misses them, and without this a caller would send an identical request again (a test caught it under load).
        self._recent: dict[str, dict[str, Any]] = {}
        self._lookup: _Lookup | None = None  # the read being gathered, if any
        # claims on a key shared by every process on the database, where the engine offers them (engine.py)
        self.leases = getattr(store, "leases", None)

    async def complete(self, backend: Backend, request: ChatRequest) -> tuple[Completion, bool]:
        """(completion, answered_without_a_backend_call)."""
        completion, cached, _ = await self.lookup(backend, request)
        return completion, cached

    async def lookup(
        self, backend: Backend, request: ChatRequest, *, summary: dict[str, Any] | None = None, defer: list[CacheRow] | None = None
    ) -> tuple[Completion, bool, str | None]:
        """(completion, answered_without_a_backend_call, cache key or None for a sample). `summary` is the request's
        summary when the caller has it already; with `defer`, a new answer's cache row is appended there instead of
        written (the caller must pass it to `written` once it is written or dropped)."""
        if request.temperature != 0:
            return await backend.complete(request), False, None
        identity = backend.identity()
        if identity is None:  # the sampling backend before its client first said which model it is: no lookup
            completion = await backend.complete(request)
            row = self._row(backend, request, completion, None, summary)
            await self._store(row, defer)
            return completion, False, None if row is None else row.key
        key = scoped_key(request.cache_key(identity), self.scope(backend))
        hit = self._unwritten.get(key)
        if hit is None and self.store is not None:
            hit = await self._stored(key)
            if hit is None:  # written while the read was under way (its snapshot predates the commit)?
                hit = self._unwritten.get(key) or self._recent.get(key)
        if hit is not None:
            return _from_cached(hit, request), True, key
        flight = self._inflight.get(key)
        if flight is None:
            flight = self._inflight[key] = _Flight()
            call = backend.complete(request) if self.leases is None else self._once(flight, backend, request, key, summary)
            flight.task = asyncio.get_running_loop().create_task(call)
            flight.task.add_done_callback(partial(self._forget, key, flight))
        flight.waiters += 1
        try:
            completion = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                # Nobody waits for this answer any more: a caller arriving now starts a new flight, not this dying one.
                self._forget(key, flight)
                flight.task.cancel()
        if not flight.claim():
            return _from_cached(_to_cached(completion), request), True, key
        if flight.how != SENT:  # with leases: already in the table (this process wrote it, or another did)
            return completion, flight.how == ELSEWHERE, key
        # The first caller to receive a new answer stores it.
        row = self._row(backend, request, completion, identity, summary, key)
        await self._store(row, defer)
        return completion, False, key if row is None else row.key

    def scope(self, backend: Backend) -> str:
        """The scope of `backend`'s answers for the call being served: SHARED_SCOPE for a configured backend when the
        operator shares the cache, else the call's tenant (always for a backend whose answers are private: sampling)."""
        if self.shared and not backend.private_answers:
            return SHARED_SCOPE
        return f"tenant:{tenancy.current()}"

    def _row(
        self, backend: Backend, request: ChatRequest, completion: Completion, identity: str | None, summary: dict[str, Any] | None, key: str | None = None
    ) -> CacheRow | None:
        """The cache row of a new answer, under the identity the backend gives the answer (the lookup's own, but for
        the sampling backend's); None when it is not stored: no store, or an empty answer (a glitch worth asking again
        later, not an answer to replay)."""
        if self.store is None or not completion.text.strip():
            return None
        kept = backend.answer_identity(completion, identity)
        if kept is None:
            return None
        if kept != identity or key is None:
            key = scoped_key(request.cache_key(kept), self.scope(backend))
        return CacheRow(key, kept, completion.model, summary or request.summary(), _to_cached(completion))

    async def _store(self, row: CacheRow | None, defer: list[CacheRow] | None) -> None:
        """Write `row` now, or append it to `defer` for the caller to write (answered from memory until then)."""
        if row is None or self.store is None:
            return
        if defer is None:
            await self.store.writes.run(CacheTable(self.store).put_many, [row])
        else:
            self._unwritten[row.key] = row.response
            defer.append(row)

    async def _once(self, flight: _Flight, backend: Backend, request: ChatRequest, key: str, summary: dict[str, Any] | None) -> Completion:
        """A flight's task where the store offers leases: one backend call per request across every process on the
        database (calls/leased.py); the answer is written as soon as it comes back, since others wait for it."""

        identity = backend.identity()

        def row_of(completion: Completion) -> CacheRow | None:
            return self._row(backend, request, completion, identity, summary, key)

        answer, flight.how = await complete_once(self.store, backend, request, key, row_of, lambda row: self.written([row], stored=True))
        return _from_cached(answer, request) if isinstance(answer, dict) else answer

    def written(self, rows: Iterable[CacheRow], *, stored: bool = False) -> None:
        """Deferred rows that are now in the table (`stored`) or were dropped: later lookups read the table again.
        Stored rows' answers are also kept among the recent ones, for a read that was under way while they were
        written. (Called in the store's write lane; it alone adds to the recent answers.)"""
        for row in rows:
            if stored:
                self._recent[row.key] = row.response  # before leaving _unwritten: a lookup always finds one of them
                if len(self._recent) > RECENTLY_WRITTEN:
                    self._recent.pop(next(iter(self._recent)), None)
            self._unwritten.pop(row.key, None)

    async def _stored(self, key: str) -> dict[str, Any] | None:
        """The stored answer for `key`, read together with every other key asked for in the same loop iteration."""
        loop = asyncio.get_running_loop()
        lookup = self._lookup
        if lookup is None or lookup.loop is not loop:  # another loop's: that loop ended before its read was sent
            lookup = self._lookup = _Lookup(loop)
            loop.call_soon(self._send, lookup)
        lookup.keys.append(key)
        found = loop.create_future()
        lookup.waiting.append(found)
        return (await found).get(key)

    def _send(self, lookup: _Lookup) -> None:
        if self._lookup is lookup:
            self._lookup = None
        assert self.store is not None
        try:
            self.store.reads.submit(partial(CacheTable(self.store).get_many, lookup.keys), lookup.settle)
        except Exception as exc:  # the lane could not take it (no thread): every waiter gets the error
            lookup.settle(None, exc)

    def _forget(self, key: str, flight: _Flight, _task: object = None) -> None:
        if self._inflight.get(key) is flight:
            del self._inflight[key]
        if flight.task.done() and not flight.task.cancelled():
            flight.task.exception()  # retrieved, so asyncio does not log it as never retrieved when nobody waited
