"""Bounds on the PostgreSQL engine's waits when the server is gone or frozen (storage/postgres.py uses both).

A server that is stopped refuses connections at once; one that is frozen (SIGSTOP) or cut off by a network
partition accepts them (the kernel answers) and then never replies, so a statement on it waits for ever and its
thread with it: the server's statement_timeout cannot fire, TCP keepalives are answered by the kernel. Two guards
bound that:

- `Watchdog`: a connection held longer than its bound makes the watchdog prove the server with a new connection of
  its own (bounded by its connect timeout): a server that answers it is alive, and the slow statement goes on (its
  own statement_timeout ends it at the server); one that does not has the held connection's socket shut down from
  the watchdog's thread, so the statement waiting on it fails at once (the driver reads end-of-file) and the
  thread holding it is free.
- `Outage`: after the server could not be reached or a connection was cut, statements fail at once with the reason
  for RETRY_AFTER_S; after that one of them (one at a time) proves the server with a new connection, bounded by its
  connect timeout, before the others go on. So a queue of statements drains in milliseconds instead of each waiting
  out its bound, and the first one after a restart (or the end of a freeze) finds the server within a second.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

TICK_S = 0.2  # how often the watchdog looks at the connections held
RETRY_AFTER_S = 1.0  # how long statements fail at once after the server could not be reached
REFILL_S = 30.0  # after the server is back, a statement that finds no idle pooled connection makes its own at once


def cut(conn: Any) -> None:
    """Shut the connection's socket down (both ways): whatever waits on it gets end-of-file now."""
    try:
        fd = conn.pgconn.socket
    except Exception:  # noqa: BLE001 - already closed or broken: nothing waits on it
        return
    try:
        with socket.socket(fileno=os.dup(fd)) as dup:  # shutdown acts on the socket, closing the duplicate leaves it
            dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Watchdog:
    """Proves the server when a connection is held longer than its bound; cuts the late connections when it does not
    answer (see the module docstring). `alive()` is the proof: a new connection made and closed, bounded. Its thread
    starts on first use and ends with `stop()` or when nothing was held for a while."""

    def __init__(self, name: str, alive: Callable[[], bool]):
        self.name = name
        self.alive = alive
        self._held: dict[int, tuple[float, float, Any]] = {}  # id(conn) -> (deadline, bound, conn)
        self._cut: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def hold(self, conn: Any, bound_s: float | None) -> None:
        """`conn` is in use from now, for at most `bound_s` (None: no bound)."""
        if bound_s is None:
            return
        with self._lock:
            self._held[id(conn)] = (time.monotonic() + bound_s, bound_s, conn)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)
                self._thread.start()

    def release(self, conn: Any) -> bool:
        """`conn` is no longer in use; whether it was cut meanwhile."""
        with self._lock:
            self._held.pop(id(conn), None)
            if id(conn) in self._cut:
                self._cut.discard(id(conn))
                return True
        return False

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:
                late = [conn for deadline, _, conn in self._held.values() if deadline <= now]
                if self._held:
                    idle_since = now
                elif self._stopped or now - idle_since > 30 * TICK_S:  # nothing held for a while: end; hold() restarts
                    self._thread = None
                    return
            if late:
                self._settle(late, self.alive())

    def _settle(self, late: list[Any], alive: bool) -> None:
        """The server answered: give the late connections another bound each; it did not: cut them."""
        now = time.monotonic()
        with self._lock:
            for conn in late:
                held = self._held.get(id(conn))
                if held is None or held[2] is not conn:  # released meanwhile
                    continue
                if alive:
                    self._held[id(conn)] = (now + held[1], held[1], conn)
                else:
                    del self._held[id(conn)]
                    self._cut.add(id(conn))
        if not alive:
            for conn in late:
                if id(conn) in self._cut:
                    cut(conn)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True


class Outage:
    """Whether the server was found unreachable lately, and who proves it is back (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0  # statements fail at once before this (monotonic)
        self._reason = ""
        self._since = 0.0
        self._down = False
        self._probing = False
        self.recovered_at = -1e9  # when a statement last found the server back (monotonic)

    def failed(self, reason: str, *, quick: bool = False) -> None:
        """The server could not be reached. `quick`: it said so at once (a refused connection: nothing listens, as
        while it restarts), so proving it again costs nothing and the next statement may (no RETRY_AFTER_S wait, which
        would fail the first calls after a restart with the outage's reason); a slow failure (a timeout: frozen or
        partitioned) holds statements off for RETRY_AFTER_S."""
        with self._lock:
            if not self._down:
                self._since = time.monotonic()
            self._down, self._reason = True, reason
            self._until = time.monotonic() + (0.0 if quick else RETRY_AFTER_S)
            self._probing = False

    def recovered(self) -> None:
        with self._lock:
            if self._down:
                self.recovered_at = time.monotonic()
            self._down = self._probing = False

    def probe_ended(self) -> None:
        """The proving statement ended without proving the server back or down (an error other than the driver's):
        the next statement proves it. Without this, no statement would ever prove it again, and every one would fail
        with the outage's reason until the process restarts."""
        with self._lock:
            self._probing = False

    def lately_recovered(self, within_s: float = REFILL_S) -> bool:
        """Whether the server came back within the last `within_s` (the pool is still refilling, slowly)."""
        return time.monotonic() - self.recovered_at < within_s

    def enter(self) -> tuple[str | None, bool]:
        """(why a statement must fail now, or None; whether it is to prove the server with a new connection)."""
        with self._lock:
            if not self._down:
                return None, False
            now = time.monotonic()
            if now < self._until or self._probing:
                return f"{self._reason} ({now - self._since:.0f} s ago; tried again every {RETRY_AFTER_S:g} s)", False
            self._probing = True
            return None, True


STATEMENT_TIMEOUT_S = 60.0  # the server ends a statement running longer (statement_timeout); migrations and VACUUM are exempt
SUSPECT_AFTER_S = 3.0  # a connection held longer makes the watchdog prove the server (and cut it if that fails)
TCP_USER_TIMEOUT_S = 10.0  # data the peer has not acknowledged for this long: the connection is dead (a partition)
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2", "keepalives_count": "3"}


def bounded(params: dict[str, str]) -> dict[str, str]:
    """The connection keywords with the bounds added where the connection string does not set them: TCP keepalives
    and tcp_user_timeout (a peer gone without a word), the server's statement_timeout (via `options`)."""
    out = {**KEEPALIVES, "tcp_user_timeout": str(int(TCP_USER_TIMEOUT_S * 1000)), **params}
    options = out.get("options", "")
    if "statement_timeout" not in options:
        out["options"] = f"{options} -c statement_timeout={int(STATEMENT_TIMEOUT_S * 1000)}".strip()
    return out
