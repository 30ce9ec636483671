"""One cancel scope per backend attempt, whatever clocks run inside it.

An HTTP attempt runs under three limits: the attempt's own (`Backend._attempt`: its share of the call's bound), the
reply's first byte (`timeout_s`) and the rest of the reply once it has started (`body_timeout_s`). Each used to be a
scope of its own (`anyio.fail_after`, ~10 µs to enter and leave, three per request). Here they are one scope whose
deadline moves: the attempt opens it (`AttemptClock.scope`) and the HTTP plumbing narrows it for a phase
(`phase`) and widens it back (`end_phase`). When the scope's deadline passes, leaving it raises what the scope
that ran out used to raise: the phase's `AttemptTimeout` (naming the phase) when a phase's deadline was the
earlier, else a bare TimeoutError (the attempt's own limit), as `anyio.fail_after` does. The clock of the running attempt is found through a
context variable, so a backend's `_send` (which may post more than once: a refused parameter is dropped and the
request sent again) needs no extra argument.
"""

from __future__ import annotations

import math
from contextvars import ContextVar

import anyio

from judge_mcp.backends.errors import AttemptTimeout

FIRST_BYTE = "first byte"
BODY = "body"

_CURRENT: ContextVar[AttemptClock | None] = ContextVar("judge_mcp_attempt_clock", default=None)


class AttemptClock:
    """The deadlines of one attempt, kept by one cancel scope (see the module doc). Use it as a context manager: a
    block cut off by a deadline ends in the error `_expired` names."""

    __slots__ = ("scope", "bound", "_phase", "_token")

    def __init__(self, limit_s: float | None = None) -> None:
        """`limit_s`: the attempt's own limit from now (None: no limit of its own; only phases bound it)."""
        self.bound = math.inf if limit_s is None else anyio.current_time() + limit_s
        self.scope = anyio.CancelScope(deadline=self.bound)
        self._phase: tuple[str, float] | None = None  # (phase, its seconds) while a phase's deadline is the scope's

    def __enter__(self) -> AttemptClock:
        self.scope.__enter__()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> bool:
        _CURRENT.reset(self._token)
        swallowed = bool(self.scope.__exit__(*exc))  # type: ignore[arg-type]
        expired = self._expired()
        if expired is not None:
            raise expired from None
        return swallowed

    def phase(self, name: str, seconds: float | None) -> None:
        """From now, `name` must end within `seconds` (None: no limit of its own), and within the attempt's bound."""
        deadline = math.inf if seconds is None else anyio.current_time() + seconds
        if deadline < self.bound:
            self._phase = (name, seconds or 0.0)
            self.scope.deadline = deadline
        elif self._phase is not None:
            self.end_phase()

    def end_phase(self) -> None:
        """The phase is over: only the attempt's bound is left. Not once the scope is cancelled: the phase that ran
        out stays recorded for `_expired`."""
        if self._phase is not None and not self.scope.cancel_called:
            self._phase = None
            self.scope.deadline = self.bound

    def _expired(self) -> TimeoutError | None:
        """Leaving the block: None when it was not cut off; else the phase's AttemptTimeout, or a bare TimeoutError
        for the attempt's own limit."""
        if not self.scope.cancelled_caught:
            return None
        if self._phase is None:
            return TimeoutError()
        name, seconds = self._phase
        if name == FIRST_BYTE:
            return AttemptTimeout(f"timed out after {seconds:g}s waiting for the reply to start (no first byte)")
        return AttemptTimeout(f"timed out: the reply started but had not arrived whole {seconds:g}s later")


def current_clock() -> AttemptClock | None:
    """The clock of the attempt running in this task, if any."""
    return _CURRENT.get()
