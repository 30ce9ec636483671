"""`CallContext`: what a method gets to talk to a model. One per tool call.

It sends requests through the shared call cache, counts usage (calls sent vs answered from cache, tokens),
keeps a typed record of every call for the verdict log (`call_records`; `records` is their log form), and forwards
progress. Given a `cache_rows` list (App.run, App.run_panel), new answers' cache rows are appended to it for the App
to write in the verdict's transaction. Methods never see the backend's transport, the database layout, or MCP.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.backends.base import Backend, ChatRequest, Completion
from judge_mcp.calls.cache import CacheRow, CallCache
from judge_mcp.calls.record import CallRecord
from judge_mcp.storage.engine import Engine
from judge_mcp.contract.results import UsageOut

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


class CallContext:
    def __init__(
        self,
        backend: Backend,
        cache: CallCache,
        store: Engine | None = None,
        *,
        progress: ProgressFn | None = None,
        no_reask: bool = False,
        cache_rows: list[CacheRow] | None = None,
        shared_option_pool: bool = False,
    ):
        self.backend = backend
        # The papers' strict rule: an answer that does not parse counts as it is (wrong); `ask` sends no re-ask.
        self.no_reask = no_reask
        self.cache = cache
        self.store = store
        # Settings.shared_option_pool: grade_score_options may draw its unrelated option from other calls' options
        self.shared_option_pool = shared_option_pool
        self._progress = progress
        self.calls = 0
        self.cached_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.call_records: list[CallRecord] = []
        self.cache_rows = cache_rows  # None: new answers are written to the cache at once
        self.answer_models: set[str] = set()  # the models the answers came from, as the backend reported them
        self._started = time.perf_counter()

    @property
    def model_id(self) -> str:
        """`backend/model`; for the sampling backend, the models the client reported for this judgment's answers."""
        return self.backend.answered_model_id(self.answer_models)

    @property
    def structured(self) -> bool:
        """Whether this backend decodes under a JSON schema (else methods use the papers' text grammars)."""
        return self.backend.supports_json_schema

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every call so far as the verdict log stores it."""
        return [record.to_log() for record in self.call_records]

    @property
    def logprobs(self) -> bool:
        """Whether this backend may return token log-probabilities (methods ask for them only then)."""
        return self.backend.supports_logprobs

    async def complete(self, request: ChatRequest) -> Completion:
        summary = request.summary()  # built once: for the call record and, for a new answer, the cache row
        with telemetry.model_call(self.backend, request) as traced:  # a no-op unless OpenTelemetry is on
            completion, cached, key = await self.cache.lookup(self.backend, request, summary=summary, defer=self.cache_rows)
            traced.answered(completion, cached)
        self.answer_models.add(completion.model)
        if cached:
            self.cached_calls += 1
        else:
            self.calls += 1
            self.prompt_tokens += completion.usage.prompt_tokens
            self.completion_tokens += completion.usage.completion_tokens
        self.call_records.append(CallRecord.of(request, summary, completion, cached=cached, cache_key=key))
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
