"""Progress while a call runs: a client that sent a progress token hears from the server at least every EVERY_S
seconds, whether or not the method has finished a step, so a client that resets its timeout on progress (the MCP
Inspector's `resetTimeoutOnProgress`, the TypeScript SDK's option of that name) keeps waiting for a slow verdict.

MCP asks that the progress value increase with every notification: a beat between two of the method's own steps
sends the last step plus a part of a half step that shrinks with each beat (never reaching the next whole step), and
a step of the method's that would not be above what was sent is sent just above it."""

from __future__ import annotations

import time

import anyio

from judge_mcp.calls.context import ProgressFn

EVERY_S = 5.0  # under the 10 s that some clients wait between progress notifications (the Inspector's default request timeout)


class Heartbeat:
    def __init__(self, progress: ProgressFn, every_s: float | None = None) -> None:
        self._progress = progress
        self.every_s = EVERY_S if every_s is None else every_s
        self.started = self.last = time.monotonic()
        self.step, self.beats = 0.0, 0
        self.total: float | None = None
        self.sent: float | None = None
        self.stopped = False

    async def report(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """The method's own progress, passed on (kept increasing)."""
        self.step, self.total, self.beats = done, total, 0
        await self._send(done, total, message)

    async def _send(self, value: float, total: float | None, message: str | None) -> None:
        if self.sent is not None and value <= self.sent:
            value = self.sent + 1e-6
        if total is not None and value > total:
            total = None  # never a value past its total: the beat says no total instead
        self.sent, self.last = value, time.monotonic()
        await self._progress(value, total, message)

    async def beat_until_stopped(self) -> None:
        """Send a beat whenever EVERY_S passed without a notification, until `stopped`."""
        while not self.stopped:
            await anyio.sleep(max(0.05, self.last + self.every_s - time.monotonic()))
            if self.stopped or time.monotonic() - self.last < self.every_s:
                continue
            self.beats += 1
            value = self.step + 0.5 * (1 - 0.5 ** self.beats)
            await self._send(value, self.total, f"still judging ({time.monotonic() - self.started:.0f} s)")
