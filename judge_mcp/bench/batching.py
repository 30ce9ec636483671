"""The bench's side of `batch = true` backends (backends/batch.py): while a run judges, each batch backend it uses
gets a `BatchPool` whose batches are recorded in the bench database (table `bench_batches`) and whose answers are
written to the call cache as soon as their batch ends (custom id = the request's key, stored under the run's tenant
scope: calls/cache.scoped_key), so a re-run answers from the
cache and a killed run polls the batches it had submitted instead of submitting their requests again.

The run itself is unchanged: its methods ask for calls as they always do; with a batch backend every item is in
flight at once (each call waits for its batch), so one batch carries every item's first calls, the next one their
re-asks and follow-up calls, and so on until every method has finished.

Pricing: OpenAI's Batch API and Anthropic's Message Batches bill every token at half the price of the same call
made one at a time. The bench prints no prices; a run with a batch backend says so in its summary (`batch`), with the
token counts to multiply by half the provider's per-token prices.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio

from judge_mcp.runtime.app import App
from judge_mcp.backends.batch import Answer, BatchBackend, BatchPool
from judge_mcp.calls.cache import _to_cached, scoped_key
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.engine import Engine

DEFAULT_POLL_S = 30.0
SETTLE_S = 0.5  # a batch goes out once no call has added a request for this long
SEQUENTIAL_NOTE = (
    "lwe and selective-lwe judge one item at a time and each step needs the one before, so through a batch API every "
    "step is a batch of its own (about 5 per item on the meta-prompt path), each taking up to 24 hours at the provider"
)
PRICING = "batch API: every token billed at half the provider's price for the same call made one at a time (OpenAI and Anthropic)"


class BatchJobs:
    """The `bench_batches` table: each submitted batch, its custom ids, and whether it has ended."""

    def __init__(self, store: Engine):
        self.store = store

    def open_batches(self, backend: str) -> dict[str, list[str]]:
        rows = self.store.query("SELECT id, custom_ids FROM bench_batches WHERE backend = ? AND status = 'open' ORDER BY created_at, id", [backend])
        return {row["id"]: json.loads(row["custom_ids"]) for row in rows}

    def add(self, batch_id: str, backend: str, custom_ids: list[str]) -> None:
        now = time.time()
        with self.store.transaction() as tx:
            tx.execute(
                "INSERT INTO bench_batches (id, backend, custom_ids, status, created_at, updated_at) VALUES (?, ?, ?, 'open', ?, ?)",
                [batch_id, backend, json.dumps(custom_ids), now, now],
            )

    def ended(self, batch_id: str, status: str, detail: str) -> None:
        with self.store.transaction() as tx:
            tx.execute(
                "UPDATE bench_batches SET status = ?, detail = ?, updated_at = ? WHERE id = ?", [status or "ended", detail or None, time.time(), batch_id]
            )

    def all(self) -> list[dict[str, Any]]:
        return self.store.query("SELECT id, backend, custom_ids, status, detail FROM bench_batches ORDER BY created_at, id")


def cache_writer(store: Engine, identity: str, scope: str) -> Callable[[list[Answer]], Awaitable[None]]:
    """Write a batch's answers to the call cache in one transaction (rows the calls' own writes later replace with the
    same answers), under the keys the run's lookups use (`scope`: CallCache.scope). As in calls/cache.py, only
    temperature-0 answers are cached, and an empty answer is not."""

    async def write(answers: list[Answer]) -> None:
        kept = [a for a in answers if a.completion.text.strip() and a.request.temperature == 0]
        rows = [CacheRow(scoped_key(a.key, scope), identity, a.completion.model, a.request.summary(), _to_cached(a.completion)) for a in kept]
        if rows:
            await store.writes.run(CacheTable(store).put_many, rows)

    return write


def batch_backends(app: App, names: Sequence[str | None]) -> list[BatchBackend]:
    found = []
    for name in names:
        backend = app.backend(name)
        if isinstance(backend, BatchBackend) and backend not in found:
            found.append(backend)
    return found


@asynccontextmanager
async def attached(
    app: App, names: Sequence[str | None], poll_s: float | None = None, stream: TextIO | None = None
) -> AsyncIterator[list[BatchPool]]:
    """While inside: a running BatchPool on each batch backend among `names`; the pools (none: nothing to do). Each
    batch submitted, resumed and ended gets a line on `stream`."""
    backends = batch_backends(app, names)
    if not backends:
        yield []
        return
    jobs = BatchJobs(app.store)
    pools = []
    async with anyio.create_task_group() as tg:
        for backend in backends:
            writer = cache_writer(app.store, backend.identity(), app.cache.scope(backend))
            pool = BatchPool(
                backend, jobs, poll_s=poll_s or DEFAULT_POLL_S, settle_s=SETTLE_S, on_results=writer,
                say=_say(stream, backend.name),
            )
            backend.pool = pool
            pools.append(pool)
            tg.start_soon(pool.run)
        try:
            yield pools
        finally:
            for backend in backends:
                backend.pool = None
            tg.cancel_scope.cancel()


def _say(stream: TextIO | None, name: str) -> Callable[[str], None] | None:
    if stream is None:
        return None

    def say(text: str) -> None:
        stream.write(f"bench: backend {name}: {text}\n")
        stream.flush()

    return say


def summary_of(pools: list[BatchPool], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's `batch` block: what this invocation submitted, and the stored judgments' tokens (sent calls only)."""
    records = [r["record"] for r in rows if r.get("status") == "done" and r.get("record")]
    return {
        "backends": [p.backend.name for p in pools],
        "pricing": PRICING,
        "batches_submitted": sum(len(p.stats.submitted) for p in pools),
        "batches_resumed": sum(len(p.stats.resumed) for p in pools),
        "requests_submitted": sum(p.stats.requests for p in pools),
        "requests_resubmitted": sum(p.stats.resubmitted for p in pools),
        "requests_failed": sum(p.stats.failed for p in pools),
        "calls": sum(int(r.get("calls") or 0) for r in records),
        "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in records),
        "completion_tokens": sum(int(r.get("completion_tokens") or 0) for r in records),
    }


def summary_line(b: dict[str, Any]) -> str:
    """The `batch` block in one line for the terminal."""
    return (
        f"batch = true ({', '.join(b['backends'])}): {b['batches_submitted']} batch(es) submitted, {b['batches_resumed']} resumed, "
        f"{b['requests_submitted']} request(s) sent ({b['requests_resubmitted']} again after an error, {b['requests_failed']} failed); "
        f"tokens of the stored judgments: {b['prompt_tokens']:,} prompt + {b['completion_tokens']:,} completion over {b['calls']:,} calls; "
        f"cost = those tokens at half the provider's per-token prices ({b['pricing']})"
    )
