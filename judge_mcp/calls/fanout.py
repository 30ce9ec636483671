"""The concurrent fan-out of one judgment: every trial (order, rotation, response) at once, as structured tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from judge_mcp.calls.context import CallContext

T = TypeVar("T")


def first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (concurrent trials raise groups); `exc` itself when it is no group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def run_each(
    judge: CallContext, count: int, one: Callable[[int], Awaitable[T]], done_message: Callable[[int, T], str] | None = None,
    *, warm: bool = False,
) -> list[T]:
    """`one(k)` for every k in 0..count-1, all at once (the backend's concurrency limit applies); the results in k
    order. With `done_message`, progress is reported as each finishes (done, count, done_message(k, result)). One
    failure cancels the rest and is raised as itself (a BackendError, say), not as an exception group; the first to
    fail is raised. Cancelled from outside, it cancels every one and waits for them to end before it stops, so none
    outlives the call (structured, as a task group). Plain asyncio tasks rather than an anyio task group: the group
    cost ~0.4 ms of CPU per compare_pair in process.

    `warm` (the calls share a prefix a prompt cache can serve: backends/prompt_cache.warm_up): `one(0)` starts alone, and the rest
    start once the judgment's first backend call has been answered (or `one(0)` has ended), so they find the prefix
    in the provider's cache instead of all computing it at once. At most one backend latency more per judgment."""
    results: list[T | None] = [None] * count
    finished = 0

    async def run(k: int) -> None:
        nonlocal finished
        results[k] = result = await one(k)
        finished += 1
        if done_message is not None:
            await judge.progress(finished, count, done_message(k, result))

    loop = asyncio.get_running_loop()
    over = loop.create_future()  # set when every one has ended, or at the first failure
    errors: list[BaseException] = []
    running = count  # counts down as each ends (`tasks` holds those started so far)

    def ended(task: asyncio.Task[None]) -> None:
        nonlocal running
        running -= 1
        error: BaseException | None
        if task.cancelled():  # by _cancel_and_wait, after the first failure; else from elsewhere, which is a failure
            error = None if over.done() else asyncio.CancelledError()
        else:
            error = task.exception()
        if error is not None:
            errors.append(error)
        if (errors or (running == 0 and len(tasks) == count)) and not over.done():
            over.set_result(None)

    tasks: list[asyncio.Task[None]] = []
    try:
        tasks += _started(loop, run, ended, range(1 if warm and count > 1 else count))
        if len(tasks) < count and await _first_answered(judge, tasks[0], over):
            tasks += _started(loop, run, ended, range(1, count))
        if count:
            await over
    finally:
        if running:  # a failure, or this call was cancelled: the rest are cancelled, and waited for
            await _cancel_and_wait(tasks)
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]  # every slot is filled when none failed


def _started(loop: asyncio.AbstractEventLoop, run: Callable[[int], Coroutine[Any, Any, None]], ended: Callable[[asyncio.Task[None]], None],
             ks: range) -> list[asyncio.Task[None]]:
    """A task of `run(k)` for each k, `ended` called as each ends."""
    tasks: list[asyncio.Task[None]] = [loop.create_task(run(k)) for k in ks]
    for task in tasks:
        task.add_done_callback(ended)
    return tasks


async def _first_answered(judge: CallContext, first: asyncio.Task[None], over: asyncio.Future[None]) -> bool:
    """Wait until the judgment has its first answer, or `first` has ended; True unless something failed meanwhile
    (then `over` is done, and the rest are not started)."""
    answered = judge.next_answer()
    try:
        await asyncio.wait([first, answered, over], return_when=asyncio.FIRST_COMPLETED)
    finally:
        answered.cancel()
    return not over.done()


async def _cancel_and_wait(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait until each has ended, even if the caller is cancelled meanwhile (re-raised after)."""
    for task in tasks:
        task.cancel()
    cancelled = False
    while pending := [task for task in tasks if not task.done()]:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
