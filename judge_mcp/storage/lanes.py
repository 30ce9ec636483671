"""Running a store's blocking calls off the event loop, whatever the engine.

The two trips of every tool call (the call cache's read, the verdict's write) take the cheaper road: each store has
two persistent threads of its own, `store.reads` and `store.writes` (`Lane`), which run their jobs in order. A read
never queues behind a write (a write waiting for another process's lock holds up only later writes, which would
wait for the writing connection's lock anyway). A job that has been handed to a lane runs to its end even if its
caller stops waiting: a write transaction is committed or rolled back whole, never cut off.

Everything else (LWE, the option pool) is awaited in one of anyio's worker threads (`in_thread`), through each
repository's typed async methods (`LweRepository.aio`, `OptionPool.aio`), so a write waiting for another process's
lock stalls only the call that needs it, never other clients.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread

P = ParamSpec("P")
R = TypeVar("R")


async def in_thread(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` awaited in a worker thread (anyio's); its result, or its exception raised here."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the caller stopped waiting; the job ran to its end all the same
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _serve(jobs: queue.SimpleQueue[Any]) -> None:
    """A lane's thread: run each job, hand its outcome to the caller's event loop; None stops the thread."""
    while (job := jobs.get()) is not None:
        fn, loop, then = job
        try:
            result, error = fn(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(then, result, error)
        except RuntimeError:  # the caller's event loop has closed: nobody is left to tell
            pass
        del job, fn, loop, then, result, error


class Lane:
    """One persistent worker thread that runs a store's jobs in order, off the event loop: a cheaper trip than a
    worker thread borrowed per call (anyio.to_thread): the caller's side is a queue entry and a future, the thread
    answers through `loop.call_soon_threadsafe`. Started on first use; stopped by `close()` (after the jobs handed to
    it before) or by `stop_when_collected` once its store is garbage collected. A job runs to its end even if its
    caller is cancelled, so a write transaction is never cut off: it commits or rolls back whole."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    async def run(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """`fn(*args, **kwargs)` in the lane's thread; its result, or its exception raised here. A caller cancelled
        while it waits stops waiting; the job still runs to its end."""
        return await self.future(fn, *args, **kwargs)

    def future(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> asyncio.Future[R]:
        """`run` without the coroutine: `fn(*args, **kwargs)` handed to the lane's thread now, its outcome the
        returned future's (call it on the event loop's thread). What awaits it with a timeout needs no task."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.submit(partial(fn, *args, **kwargs) if args or kwargs else fn, partial(_settle, future))
        return future

    def submit(self, fn: Callable[[], Any], then: Callable[[Any, BaseException | None], None]) -> None:
        """Hand `fn()` to the lane's thread; `then(result, None)` or `then(None, exception)` is called on this event
        loop once it has run (call it on the event loop's thread)."""
        if self._thread is None:
            self._started()
        self._jobs.put((fn, asyncio.get_running_loop(), then))

    def stop_when_collected(self, owner: object) -> None:
        """End an idle lane's thread when `owner` (its store) is garbage collected, even if close() is never called."""
        weakref.finalize(owner, self._jobs.put, None)

    def _started(self) -> None:
        with self._start:
            if self._thread is None:
                thread = threading.Thread(target=_serve, args=(self._jobs,), name=self.name, daemon=True)
                thread.start()
                self._thread = thread

    def close(self) -> None:
        """Stop the thread once the jobs handed to it so far are done (waits for them)."""
        with self._start:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            if thread is not threading.current_thread():
                thread.join()
