"""The call cache: temperature-0 requests answered from SQLite, and identical requests in flight sharing one call.

Keyed by `ChatRequest.cache_key(backend.identity())`: a hash of the exact request and the backend's kind, endpoint
and model (never its key). Requests with temperature > 0 are samples and always go to the backend. Completions with
empty text are not stored (a later identical request goes to the backend again).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio

from judge_mcp.backends.base import Backend, ChatRequest, Completion, Usage
from judge_mcp.store import Store


class _Flight:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Completion | None = None
        self.error: BaseException | None = None


def _to_cached(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "model": completion.model,
        "finish_reason": completion.finish_reason,
        "structured": completion.structured,
        "usage": asdict(completion.usage),
    }


def _from_cached(data: dict[str, Any], request: ChatRequest) -> Completion:
    return Completion(
        text=data["text"],
        model=data["model"],
        usage=Usage(**data["usage"]),
        finish_reason=data.get("finish_reason"),
        structured=bool(data.get("structured")),
        attempts=0,
        raw={"request": request.to_record(), "cached": True},
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
            hit = self.store.cache_get(key)
            if hit is not None:
                return _from_cached(hit, request), True
        flight = self._inflight.get(key)
        if flight is not None:
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.result is not None
            return _from_cached(_to_cached(flight.result), request), True
        flight = self._inflight[key] = _Flight()
        try:
            completion = await backend.complete(request)
            flight.result = completion
            # An empty answer is a glitch worth asking again later, not an answer to replay: it is not stored.
            if self.store is not None and completion.text.strip():
                self.store.cache_put(key, backend.identity(), completion.model, request.to_record(), _to_cached(completion))
            return completion, False
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            del self._inflight[key]
            flight.done.set()
