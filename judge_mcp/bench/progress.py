"""`judge-mcp bench`'s progress on stderr: a line at the start, a bar redrawn in place on a terminal (a line every
`every_s` seconds otherwise), and a line every `every_s` while no item has finished, so a slow first item (a minute on
a CPU) is never silence."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import anyio


class Progress:
    """A plain progress bar on stderr: redrawn in place on a terminal, one line every `every_s` seconds otherwise."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, every_s: float = 15.0, width: int = 28):
        self.total, self.label, self.width, self.every_s = total, label, width, every_s
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = self.right = self.errors = 0
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, *, right: bool | None = None, error: bool = False) -> None:
        self.done += 1
        self.right += bool(right)
        self.errors += error
        now = time.monotonic()
        if self.tty or now - self._last >= self.every_s or self.done == self.total:
            self._last = now
            self.draw()

    def begin(self, in_flight: int) -> None:
        """The line at the start, before any item has finished (the first can take a minute on a CPU)."""
        self.started = self._last = time.monotonic()
        if not self.total:
            self.stream.write(f"{self.label}: nothing to judge, every selected item is stored (a new --db judges them again)\n")
        else:
            self.stream.write(f"{self.label}: judging {self.total} item(s), {in_flight} at a time; a line every "
                              f"{self.every_s:.0f} s until the first finishes\n")
        self.stream.flush()

    async def tick_while_waiting(self) -> None:
        """Every `every_s` with no item finished since the last line: a line saying the run is still going."""
        while True:
            await anyio.sleep(self.every_s)
            if time.monotonic() - self._last >= self.every_s and self.done < self.total:
                self._last = time.monotonic()
                waiting = " (waiting for the first item)" if not self.done else ""
                self.stream.write(("\r" if self.tty else "") + self.line() + waiting + ("\x1b[K" if self.tty else "\n"))
                self.stream.flush()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        share = self.done / self.total if self.total else 1.0
        filled = int(round(share * self.width))
        rate = elapsed / self.done if self.done else 0.0
        eta = rate * (self.total - self.done)
        acc = f" pair acc {self.right / max(1, self.done - self.errors):.2f}" if self.done > self.errors else ""
        err = f" errors {self.errors}" if self.errors else ""
        pace = f", {rate:.1f}s/item (wall), eta {eta:,.0f}s" if self.done else ""  # nothing to estimate from yet
        return f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {elapsed:,.0f}s elapsed{pace}{acc}{err}"

    def draw(self) -> None:
        text = self.line()
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K" + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
