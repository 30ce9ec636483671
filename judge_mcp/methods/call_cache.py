"""The call cache: temperature-0 requests answered from SQLite, and identical requests in flight sharing one call.

Keyed by `ChatRequest.cache_key(backend.identity())`: a hash of the exact request and the backend's kind, endpoint
and model (never its key); a request asking for log-probabilities has its own key, and its cached completion keeps
them (a hit answers with the same probabilities as the call did). Requests with temperature > 0 are samples and always go to the backend. Completions with
empty text are not stored (a later identical request goes to the backend again).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion, TokenLogprob, Usage
from judge_mcp.store import Store


class _Flight:
    """One backend call shared by every caller of an identical request. It runs in a task of its own, so a caller
    that is cancelled (a client's `notifications/cancelled`, a timeout) stops waiting without cancelling it for the
    others; it is cancelled only when no caller waits any more."""

    def __init__(self, task: asyncio.Task[Completion]) -> None:
        self.task = task
        self.waiters = 0
        self.claimed = False  # one caller, the first to receive the answer, counts the call as sent

    def claim(self) -> bool:
        first, self.claimed = not self.claimed, True
        return first


def _to_cached(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "model": completion.model,
        "finish_reason": completion.finish_reason,
        "structured": completion.structured,
        "usage": asdict(completion.usage),
        "logprobs": None if completion.logprobs is None else [t.to_list() for t in completion.logprobs],
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
    )


class CallCache:
    """One per store; shared by every tool call so that identical requests anywhere share one backend call."""

    def __init__(self, store: Store | None):
        self.store = store
        self._inflight: dict[str, _Flight] = {}

    async def complete(self, backend: Backend, request: ChatRequest) -> tuple[Completion, bool]:
        """(completion, answered_without_a_backend_call)."""
        if request.temperature != 0:
            return await backend.complete(request), False
        key = request.cache_key(backend.identity())
        if self.store is not None:
            hit = await self.store.aio.cache_get(key)
            if hit is not None:
                completion = _from_cached(hit, request)
                completion.raw["cache_key"] = key
                return completion, True
        flight = self._inflight.get(key)
        if flight is None:
            flight = self._inflight[key] = _Flight(asyncio.get_running_loop().create_task(self._call(backend, request, key)))
            flight.task.add_done_callback(lambda _, f=flight: self._forget(key, f))
        flight.waiters += 1
        try:
            completion = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                # Nobody waits for this answer any more: a caller arriving now starts a new flight, not this dying one.
                self._forget(key, flight)
                flight.task.cancel()
        if flight.claim():
            completion.raw["cache_key"] = key
            return completion, False
        shared = _from_cached(_to_cached(completion), request)
        shared.raw["cache_key"] = key
        return shared, True

    async def _call(self, backend: Backend, request: ChatRequest, key: str) -> Completion:
        completion = await backend.complete(request)
        # An empty answer is a glitch worth asking again later, not an answer to replay: it is not stored.
        if self.store is not None and completion.text.strip():
            await self.store.aio.cache_put(key, backend.identity(), completion.model, request.summary(), _to_cached(completion))
        return completion

    def _forget(self, key: str, flight: _Flight) -> None:
        if self._inflight.get(key) is flight:
            del self._inflight[key]
        if flight.task.done() and not flight.task.cancelled():
            flight.task.exception()  # retrieved, so asyncio does not log it as never retrieved when nobody waited
