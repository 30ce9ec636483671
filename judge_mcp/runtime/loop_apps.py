"""The Python API's Judge on several event loops at once (threads each running their own `asyncio.run`).

What a call holds on to belongs to one event loop: a backend's HTTP session and concurrency limiter, the call cache's
calls in flight, the verdict rows being written. So each event loop that uses a Judge gets its own App over the
Judge's one settings and database (`App.sibling`), made at its first call; nothing of one loop is ever awaited on
another. A loop's App is closed when the loop ends (`asyncio.run` finalizes the loop's async generators before it
closes the loop, and one generator per loop here closes that loop's App), or by `Judge.aclose()` on that loop; so no
session is left unclosed and none piles up, however many loops come and go.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from judge_mcp.runtime.app import App

NOT_ASYNCIO = "the Python API runs on asyncio (asyncio.run, or an asyncio event loop): no asyncio event loop is running"


@dataclass
class _Loop:
    app: App
    closer: AsyncGenerator[None, None]


async def _closing(app: App) -> AsyncGenerator[None, None]:
    """Yields once, at the loop's first call; closes `app` when finalized (the loop's end) or closed (aclose)."""
    try:
        yield
    finally:
        await app.close_loop()


class LoopApps:
    """The App of each running event loop, siblings of `holder` (which keeps the settings and the database)."""

    def __init__(self, holder: App) -> None:
        self.holder = holder
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = weakref.WeakKeyDictionary()

    async def current(self) -> App:
        """The running loop's App, made at the loop's first call. Raises RuntimeError outside asyncio."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(NOT_ASYNCIO) from None
        with self._lock:
            entry = self._loops.get(loop)
            made = entry is None
            if entry is None:
                app = self.holder.sibling()
                entry = self._loops[loop] = _Loop(app, _closing(app))
        if made:
            await anext(entry.closer)  # started on this loop: the loop finalizes it (and closes the App) at its end
        return entry.app

    async def close_current(self) -> None:
        """Close the running loop's App now, if it has one (the loop's end would have)."""
        with self._lock:
            entry = self._loops.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry.closer.aclose()
