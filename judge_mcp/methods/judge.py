"""`Judge`: what a method gets to talk to a model. One per tool call.

It sends requests through the shared call cache, counts usage (calls sent vs answered from cache, tokens),
keeps every raw call record for the verdict log, and forwards progress. Methods never see the backend's
transport, the database layout, or MCP.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion, response_summary
from judge_mcp.methods.call_cache import CallCache
from judge_mcp.store import Store
from judge_mcp.verdicts import UsageOut

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


class Judge:
    def __init__(
        self,
        backend: Backend,
        cache: CallCache,
        store: Store | None = None,
        *,
        progress: ProgressFn | None = None,
        no_reask: bool = False,
    ):
        self.backend = backend
        # The papers' strict rule: an answer that does not parse counts as it is (wrong); `ask` sends no re-ask.
        self.no_reask = no_reask
        self.cache = cache
        self.store = store
        self._progress = progress
        self.calls = 0
        self.cached_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.records: list[dict[str, Any]] = []
        self._started = time.perf_counter()

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    @property
    def structured(self) -> bool:
        """Whether this backend decodes under a JSON schema (else methods use the papers' text grammars)."""
        return self.backend.supports_json_schema

    @property
    def logprobs(self) -> bool:
        """Whether this backend may return token log-probabilities (methods ask for them only then)."""
        return self.backend.supports_logprobs

    async def complete(self, request: ChatRequest) -> Completion:
        completion, cached = await self.cache.complete(self.backend, request)
        if cached:
            self.cached_calls += 1
        else:
            self.calls += 1
            self.prompt_tokens += completion.usage.prompt_tokens
            self.completion_tokens += completion.usage.completion_tokens
        # The record keeps the request's shape and the reply's metadata, not their texts: the judged texts are in the
        # verdict's inputs, the answer in `text` (issue 14: each text stored once).
        record = {key: value for key, value in completion.raw.items() if key not in ("request", "response")}
        record.update(
            request=request.summary(),
            response=response_summary(completion.raw.get("response")),
            purpose=request.purpose,
            cached=cached,
            text=completion.text,
            finish_reason=completion.finish_reason,
            structured=completion.structured,
            latency_ms=round(completion.usage.latency_ms, 1),
            # characters sent and received, as the LWE paper counts cost (bench: LWE cost relative to vanilla)
            prompt_chars=len(request.system or "") + sum(len(m.content) for m in request.messages),
            completion_chars=len(completion.text),
        )
        self.records.append(record)
        return completion

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress is not None:
            await self._progress(done, total, message)

    def usage(self) -> UsageOut:
        return UsageOut(
            calls=self.calls,
            cached_calls=self.cached_calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_ms=round((time.perf_counter() - self._started) * 1000.0, 1),
        )
