"""A backend with `batch = true`: its calls go through the provider's batch API (batch_wire.py), at half the price.

`BatchBackend` wraps the OpenAI-compatible or Anthropic backend of the same settings (same identity, so the same
call-cache keys). Only `judge-mcp bench` attaches a `BatchPool` to it; without one every call fails at once with an
error saying why (an MCP tool call needs its answer now, a batch answers within up to 24 hours).

The pool: a call adds its request (keyed by its call-cache key, which is the batch's `custom_id`) and waits. Once no
new request has arrived for `settle_s`, every waiting request goes out as one batch (split at the provider's limits),
recorded in the database (`jobs`) before it is polled, every `poll_s`. When it ends, each answer resolves its call
(and `on_result` writes it to the call cache at once); a request that failed in a way worth another try
(a server error, a rate limit, a line missing from the results) is sent again in a later batch, at most
`max_submissions` times in all; a request that cannot succeed (an invalid request, or one in a batch that failed,
expired or was cancelled) fails its call with a BackendError. A method's later calls (re-asks, LWE's steps) simply
wait for the next batch.

At start the pool follows the batches the database records as still open for this backend (a bench killed after
submitting), so their requests are polled, not sent again: a call for one of their custom ids waits for that batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import anyio

from judge_mcp.backends.base import Backend, ChatRequest, Completion
from judge_mcp.backends.batch_wire import Outcome, Status, batches_for
from judge_mcp.backends.client import HTTPBackend
from judge_mcp.backends.request_body import encode_json
from judge_mcp.backends.errors import BackendError, FatalError, RetryableError

log = logging.getLogger("judge_mcp.batch")

NOT_FOR_TOOLS = (
    "this backend has batch = true: its answers come through the provider's batch API, within up to 24 hours, so only "
    "`judge-mcp bench` uses it; a tool call needs its answer now: name a backend without batch = true for tool calls"
)
MAX_REQUESTS = {"openai": 50_000, "anthropic": 100_000}  # requests per batch the providers take
MAX_BATCH_BYTES = 190 * 1024 * 1024  # under OpenAI's 200 MB input file and Anthropic's 256 MB request
CONTROL_TRIES = 5  # a submission or a results download failing with retryable errors this many times in a row fails


class Jobs(Protocol):
    """Where the pool records its batches (the bench's database)."""

    def open_batches(self, backend: str) -> dict[str, list[str]]: ...
    def add(self, batch_id: str, backend: str, custom_ids: list[str]) -> None: ...
    def ended(self, batch_id: str, status: str, detail: str) -> None: ...


class BatchBackend(Backend):
    def __init__(self, inner: HTTPBackend):
        super().__init__(inner.name, inner.model, concurrency=inner.concurrency, timeout_s=inner.timeout_s)
        self.inner = inner
        self.kind = inner.kind
        self.supports_json_schema = inner.supports_json_schema
        self.supports_logprobs = inner.supports_logprobs
        self.wire = batches_for(inner)
        self.pool: BatchPool | None = None  # attached by the bench while it runs

    def identity(self) -> str:
        return self.inner.identity()

    def describe(self) -> str:
        return f"{self.inner.describe()}, batch API"

    async def complete(self, request: ChatRequest) -> Completion:
        if self.pool is None:
            raise BackendError(self.name, NOT_FOR_TOOLS, where=self.describe())
        return await self.pool.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _Entry:
    request: ChatRequest
    body: dict[str, Any]  # as sent
    waiters: list[asyncio.Future[Completion]] = field(default_factory=list)
    submissions: int = 0


class Answer(NamedTuple):
    key: str  # the call-cache key (the batch's custom id)
    request: ChatRequest
    completion: Completion
    waiters: list[asyncio.Future[Completion]]


@dataclass
class PoolStats:
    submitted: list[str] = field(default_factory=list)  # batch ids submitted by this pool
    resumed: list[str] = field(default_factory=list)  # batch ids found open in the database and followed
    requests: int = 0  # requests submitted (a re-submission counts again)
    resubmitted: int = 0
    answered: int = 0
    failed: int = 0


class BatchPool:
    def __init__(
        self, backend: BatchBackend, jobs: Jobs, *, poll_s: float = 30.0, settle_s: float = 0.5, max_submissions: int = 3,
        on_results: Callable[[list[Answer]], Awaitable[None]] | None = None, say: Callable[[str], None] | None = None,
    ):
        self.backend, self.jobs, self.poll_s, self.settle_s = backend, jobs, poll_s, settle_s
        self.max_submissions, self.on_results, self.say = max_submissions, on_results, say or (lambda text: None)
        self.identity = backend.identity()
        self.entries: dict[str, _Entry] = {}  # asked for, not yet answered or failed
        self.unsent: list[str] = []
        self.in_batch: dict[str, str] = {}  # custom id -> the open batch that holds it
        self.unclaimed: dict[str, tuple[Outcome, str]] = {}  # outcomes of resumed batches nobody had asked for yet
        self.stats = PoolStats()
        self._wake = anyio.Event()
        self._last_add = 0.0

    # ---- the calls ------------------------------------------------------------------------------------------------
    async def complete(self, request: ChatRequest) -> Completion:
        key = request.cache_key(self.identity)
        entry = self.entries.get(key)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        if entry is None:
            entry = self.entries[key] = _Entry(request, self.backend.wire.body(request))
            entry.waiters.append(future)
            if key in self.unclaimed:
                outcome, batch_id = self.unclaimed.pop(key)
                await self._answer([answer] if (answer := self._settle(key, outcome, batch_id)) else [])
            elif key not in self.in_batch:
                self._queue(key)
        else:
            entry.waiters.append(future)
        return await future

    def _queue(self, key: str) -> None:
        self.unsent.append(key)
        self._last_add = time.monotonic()
        self._wake.set()

    # ---- the pool's task ------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow the open batches recorded for this backend, then submit what the calls ask for, until cancelled."""
        async with anyio.create_task_group() as tg:
            for batch_id, keys in self.jobs.open_batches(self.identity).items():
                self.stats.resumed.append(batch_id)
                self.say(f"batch {batch_id} ({len(keys)} requests), submitted by an earlier run: polling it again")
                self.in_batch.update((key, batch_id) for key in keys)
                tg.start_soon(self._follow, batch_id, keys)
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                while (left := self.settle_s - (time.monotonic() - self._last_add)) > 0:
                    await anyio.sleep(left)
                keys, self.unsent = [k for k in dict.fromkeys(self.unsent) if k in self.entries], []
                for chunk in self._chunks(keys):
                    await self._submit(tg, chunk)

    def _chunks(self, keys: list[str]) -> list[list[str]]:
        """`keys` cut at the provider's limits on requests and bytes per batch."""
        limit = MAX_REQUESTS.get(self.backend.kind, 50_000)
        chunks: list[list[str]] = [[]]
        size = 0
        for key in keys:
            length = len(encode_json(self.entries[key].body)) + 200
            if chunks[-1] and (len(chunks[-1]) >= limit or size + length > MAX_BATCH_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(key)
            size += length
        return [c for c in chunks if c]

    async def _submit(self, tg: Any, keys: list[str]) -> None:
        for key in keys:
            self.entries[key].submissions += 1
        try:
            batch_id = await self._control(lambda: self.backend.wire.submit({k: self.entries[k].body for k in keys}))
        except (RetryableError, FatalError) as exc:
            for key in keys:
                self._fail(key, f"the batch could not be submitted: {exc}")
            return
        self.jobs.add(batch_id, self.identity, keys)
        self.stats.submitted.append(batch_id)
        self.stats.requests += len(keys)
        self.in_batch.update((key, batch_id) for key in keys)
        self.say(f"batch {batch_id} submitted ({len(keys)} requests); polling every {self.poll_s:g}s")
        tg.start_soon(self._follow, batch_id, keys)

    async def _control(self, call: Callable[[], Any]) -> Any:
        """A submission or download, tried again after retryable failures (CONTROL_TRIES in all)."""
        for attempt in range(1, CONTROL_TRIES + 1):
            try:
                return await call()
            except RetryableError as exc:
                if attempt == CONTROL_TRIES:
                    raise
                log.warning("backend %s: %s; trying again in %gs", self.backend.name, exc, self.poll_s)
                await anyio.sleep(self.poll_s)

    async def _follow(self, batch_id: str, keys: list[str]) -> None:
        """Poll the batch until it ends, then settle each of its requests."""
        status, info = await self._poll(batch_id)
        outcomes: dict[str, Outcome] = {}
        if status.usable or status.partial:
            try:
                outcomes = await self._control(lambda: self.backend.wire.results(info))
            except (RetryableError, FatalError) as exc:
                status = Status(True, False, "unreadable", f"its results could not be read: {exc}")
        lost = Outcome("fail", cause=f"batch {batch_id} {status.state}" + (f": {status.detail}" if status.detail else ""))
        answers = []
        for key in keys:
            self.in_batch.pop(key, None)
            outcome = outcomes.get(key)
            if status.usable:
                outcome = outcome or Outcome("retry", cause="missing from the batch's results")
            elif outcome is None or outcome.kind != "ok":  # a batch that ended badly: only its finished answers stand
                outcome = lost
            answer = self._settle(key, outcome, batch_id)
            if answer is not None:
                answers.append(answer)
        await self._answer(answers)  # in the call cache before the batch is marked ended: a kill in between polls it again
        self.jobs.ended(batch_id, status.state, status.detail)
        self.say(f"batch {batch_id} {status.state}: {len(answers)} answered" + (f" ({status.detail})" if status.detail else ""))

    async def _poll(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        while True:
            try:
                status, info = await self.backend.wire.status(batch_id)
            except RetryableError as exc:  # the provider is busy or the network down: the batch goes on meanwhile
                log.warning("backend %s: polling batch %s: %s", self.backend.name, batch_id, exc)
            except FatalError as exc:  # unknown to the provider (deleted, another account): its requests fail
                return Status(True, False, "unknown", str(exc)), {}
            else:
                if status.ended:
                    return status, info
            await anyio.sleep(self.poll_s)

    # ---- settling one request ---------------------------------------------------------------------------------------
    def _settle(self, key: str, outcome: Outcome, batch_id: str) -> Answer | None:
        """Settle one request's outcome: the answer to hand to its calls, or None (sent again, failed, or unclaimed)."""
        entry = self.entries.get(key)
        if entry is None:  # a resumed batch's request that no call has asked for (yet)
            self.unclaimed[key] = (outcome, batch_id)
            return None
        if outcome.kind == "ok" and outcome.body is not None:
            try:
                completion = self.backend.wire.completion(outcome.body, entry.body)
            except RetryableError as exc:
                outcome = Outcome("retry", cause=exc.cause)
            else:
                del self.entries[key]
                completion = Backend._finished(completion, entry.request, max(1, entry.submissions), [])
                completion.raw["batch_id"] = batch_id
                return Answer(key, entry.request, completion, entry.waiters)
        if outcome.kind == "retry" and entry.submissions < self.max_submissions:
            log.info("backend %s: request %s… in batch %s: %s; sending it again", self.backend.name, key[:12], batch_id, outcome.cause)
            self.stats.resubmitted += 1
            self._queue(key)
            return None
        self._fail(key, f"in batch {batch_id}: {outcome.cause}")
        return None

    async def _answer(self, answers: list[Answer]) -> None:
        """Hand answers to their calls, after `on_results` has stored them (one write for a whole batch)."""
        if not answers:
            return
        self.stats.answered += len(answers)
        if self.on_results is not None:
            try:
                await self.on_results(answers)
            except Exception:  # the answers still go to their calls, which cache them with their verdicts
                log.warning("backend %s: could not write %d batch answer(s) to the call cache", self.backend.name, len(answers), exc_info=True)
        for answer in answers:
            for waiter in answer.waiters:
                if not waiter.done():
                    waiter.set_result(answer.completion)

    def _fail(self, key: str, cause: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        self.stats.failed += 1
        error = BackendError(self.backend.name, cause, attempts=max(1, entry.submissions), where=self.backend.describe())
        for waiter in entry.waiters:
            if not waiter.done():
                waiter.set_exception(error)
