"""How many calls a backend has in flight: a limit that adapts to the backend's answers, under a ceiling.

The limit starts low and moves with what the backend says (a slow start, then additive increase and multiplicative
decrease, as TCP's congestion control), never above the ceiling (the configured `concurrency`, or the kind's default):

- Slow start: a backend that has taught this process nothing starts at SLOW_START (or its ceiling, if lower), and
  every call it accepts adds SLOW_START_GROWTH slots (the limit quadruples per round), until the ceiling or the
  first overload answer. A call counts as accepted when it succeeds or when it has been in flight SLOW_START_GRACE_S
  without a refusal (an overload answer comes back in a round trip; a judgment takes seconds), so a burst to a
  backend that takes everything is all in flight after two grace periods, not after two latencies; one that takes
  16 refuses the first round's SLOW_START - 16 and a few retries racing the settling (12 of 200 in perf/burst.py;
  187 when the limit started at its ceiling).

- An overload answer (429, 503, Anthropic's 529) or a timed-out attempt lowers it, at once, to the number of other
  calls still in flight (what the backend was holding when it refused one more), but by at most half per answer
  (so one stray 503 on a quiet backend does not drop it to 1). A burst of 200 against a server that takes 16 thus
  settles at about 16 as the refusals come back, and the refused calls are retried (after their backoff or the
  server's Retry-After) under the lowered limit.
- A success while every slot is taken counts towards growth: one more slot per `limit × probe` such successes, up to
  the ceiling. `probe` doubles (up to PROBE_MAX) each time a slot just grown is taken back, so a backend that keeps
  refusing at the same level is probed less and less often; a Retry-After also holds growth until it has passed.

What a process learns is kept for the next (App stores it in the database when it closes): a limit lowered by the
backend's 429s ("too many requests": the account's or the server's capacity, which outlives a process) is where
the next process starts (`resume`), growing from there as above (probing as seldom as the last process had come to), so only the first burst a backend ever gets
overshoots. Refusals for a passing overload (503, 529) and timeouts lower the limit for this process only.

`history` keeps the limit's recent trajectory (time, event, limit) for tests and diagnostics.
"""

from __future__ import annotations

import math
from collections import deque

import anyio

OVERLOAD_STATUS = frozenset({429, 503, 529})
SLOW_START = 24  # the first limit of a backend nothing was learned about
SLOW_START_GROWTH = 3  # slots added per accepted call during slow start: x4 per round
SLOW_START_GRACE_S = 0.1  # in flight this long without a refusal: accepted (a refusal's round trip, with room)
TOO_MANY_REQUESTS = 429
PROBE_MAX = 64
HISTORY = 256


class AdaptiveLimit:
    """An anyio CapacityLimiter whose total follows the backend's answers (see the module doc)."""

    def __init__(self, ceiling: int, *, slow_start: bool = True):
        if ceiling < 1:
            raise ValueError(f"concurrency ceiling must be >= 1, got {ceiling}")
        self.ceiling = ceiling
        self.slow_start = slow_start and ceiling > SLOW_START  # until the ceiling, the first overload, or a resume
        self.limiter = anyio.CapacityLimiter(min(ceiling, SLOW_START) if self.slow_start else ceiling)
        self.probe = 1
        self.overloads = 0  # overload answers seen (429/503/529 and timeouts)
        self._successes = 0  # saturated successes since the last change
        self._hold_until = -math.inf
        self._last_event = ""
        self._learned = False  # lowered by a 429 in this process, or resumed from a limit a process learned so
        self.history: deque[tuple[float, str, int]] = deque(maxlen=HISTORY)

    @property
    def limit(self) -> int:
        return int(self.limiter.total_tokens)

    @property
    def in_flight(self) -> int:
        return self.limiter.borrowed_tokens

    def _set(self, value: int, event: str) -> None:
        value = max(1, min(self.ceiling, value))
        if value != self.limit:
            self.limiter.total_tokens = value
        self._successes = 0
        self._last_event = event
        self.history.append((anyio.current_time(), event, value))

    def resume(self, limit: int, probe: int = 1) -> None:
        """Start from the limit (and the probing interval) an earlier process learned, under this ceiling, which may
        have changed since."""
        self._learned = True
        self.slow_start = False
        self.probe = max(1, min(PROBE_MAX, probe))
        self._set(limit, "resume")

    @property
    def learned(self) -> tuple[int, int] | None:
        """(limit, probe) worth remembering for the next process, once a 429 (in this process or an earlier one) has
        taught them; None when nothing was learned (the next process starts at the ceiling)."""
        return (self.limit, self.probe) if self._learned else None

    def accepted(self) -> None:
        """During slow start: a call was accepted (it succeeded, or has been in flight SLOW_START_GRACE_S without a
        refusal); counted once per call (backends/base.py)."""
        if not self.slow_start:
            return
        self._set(self.limit + SLOW_START_GROWTH, "slow start")
        self.slow_start = self.limit < self.ceiling

    def success(self) -> None:
        """A call holding a slot succeeded (call before releasing the slot)."""
        if self.slow_start or self.limit >= self.ceiling or self.in_flight < self.limit or anyio.current_time() < self._hold_until:
            return
        self._successes += 1
        if self._successes >= self.limit * self.probe:
            self._set(self.limit + 1, "grow")

    def overloaded(self, retry_after: float | None = None, event: str = "overload", status: int | None = None) -> None:
        """The backend refused a call for load (`status`), or it timed out (call while the refused call still holds
        its slot)."""
        self.overloads += 1
        self.slow_start = False
        self._learned = self._learned or status == TOO_MANY_REQUESTS
        others = self.in_flight - 1
        lowered = max(others, math.ceil(self.limit / 2))
        if lowered < self.limit:
            if self._last_event == "grow":  # the last probe above the settled limit failed: probe less often
                self.probe = min(PROBE_MAX, self.probe * 2)
            self._set(lowered, event)
        else:
            self._successes = 0
        if retry_after:
            self._hold_until = max(self._hold_until, anyio.current_time() + retry_after)
