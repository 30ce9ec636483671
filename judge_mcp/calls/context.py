"""`CallContext`: what a method gets to talk to a model. One per tool call.

It sends requests through the shared call cache, counts usage (calls sent vs answered from cache, tokens),
keeps a typed record of every call for the verdict log (`call_records`; `records` is their log form), and forwards
progress. Given a `cache_rows` list (runtime/run.py), new answers' cache rows are appended to it for the run to write in
the verdict's transaction. Methods never see the backend's transport, the database layout, or MCP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from judge_mcp.telemetry import hooks as telemetry
from judge_mcp.backends.base import Backend, ChatRequest, Completion
from judge_mcp.calls.cache import CacheRow, CallCache
from judge_mcp.calls.record import CallRecord
from judge_mcp.storage.engine import Engine
from judge_mcp.calls.usage import UsageTotals

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class Sampling:
    """How a repeated judgment samples (`judge-mcp bench --repeats`): every request at `temperature` (None: the
    method's own), and, `fresh`, never answered from the call cache nor stored in it, so a repeat is a new draw."""

    temperature: float | None = None
    fresh: bool = False


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
        self.totals = UsageTotals()
        self.call_records: list[CallRecord] = []
        self.cache_rows = cache_rows  # None: new answers are written to the cache at once
        self.answer_models: set[str] = set()  # the models the answers came from, as the backend reported them
        self.sampling: Sampling | None = None  # a repeated judgment's sampling (runtime/run.py sets it)
        # what the judgment's result must say about its answers, each once (a temperature the model cannot honour,
        # an answer cut off after reasoning): runtime/run.py adds them to the result's warnings
        self.notes: list[str] = []
        self._started = time.perf_counter()
        self._answer_waiters: list[asyncio.Future[None]] = []  # next_answer()

    def next_answer(self) -> asyncio.Future[None]:
        """A future done when this context next gets an answer (from the backend or the call cache): run_each's
        warm-up waits on it before it sends a judgment's other calls."""
        future = asyncio.get_running_loop().create_future()
        self._answer_waiters.append(future)
        return future

    def _answered(self) -> None:
        waiters, self._answer_waiters = self._answer_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

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
        sampling = self.sampling
        if sampling is not None and sampling.temperature is not None:
            request = replace(request, temperature=sampling.temperature)
        summary = request.summary()  # built once: for the call record and, for a new answer, the cache row
        with telemetry.model_call(self.backend, request) as traced:  # a no-op unless OpenTelemetry is on
            if sampling is not None and sampling.fresh:
                completion, cached, key = await self.backend.complete(request), False, None
            else:
                completion, cached, key = await self.cache.lookup(self.backend, request, summary=summary, defer=self.cache_rows)
            traced.answered(completion, cached)
        self._answered()
        self.answer_models.add(completion.model)
        if cached:
            self.totals.cached_calls += 1
        else:
            self.totals.add_call(completion.usage)
        self.call_records.append(CallRecord.of(request, summary, completion, cached=cached, cache_key=key))
        for note in completion.notes + ([self.backend.cut_note(completion)] if completion.cut_in_reasoning else []):
            if note not in self.notes:
                self.notes.append(note)
        return completion

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress is not None:
            await self._progress(done, total, message)

    @property
    def calls(self) -> int:
        return self.totals.calls

    @property
    def cached_calls(self) -> int:
        return self.totals.cached_calls

    @property
    def prompt_tokens(self) -> int:
        return self.totals.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.totals.completion_tokens

    def usage(self) -> UsageTotals:
        """The judgment's usage so far, its latency the time since this context began (shown as `UsageOut`)."""
        return replace(self.totals, latency_ms=round((time.perf_counter() - self._started) * 1000.0, 1))
