"""Leases on call-cache keys, shared by every process on one PostgreSQL database (`PostgresEngine.leases`): single-flight
across replicas. The table is `call_leases` (migrations.m006_call_leases).

A process about to send a request that no replica has answered claims the key's lease row
(`INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE call_leases.lease_until < now`): the claim succeeds when no row
exists or the row's lease has run out (its holder died, or stopped renewing). The holder renews its leases every
`ttl_s / 3` seconds from a thread of its own while its calls run; when an answer comes back it writes the cache row,
deletes its lease and NOTIFYs the key on one channel, all in one transaction. Every other replica waiting for the
key LISTENs on that channel (one connection per process, in a thread) and reads the answer when told, or, if a
notification is lost (the listening connection was down), when its poll interval passes. A holder that fails
deletes its lease (with a notification), so a waiter claims the key and sends the request itself.

Times are the database server's clock (`clock_timestamp()`), never a replica's, so replicas with skewed clocks
agree on when a lease runs out. Each claim carries a token of its own (this process's id and a counter), so a
release that arrives after the key was claimed again by a newer call of the same process cannot delete that claim.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from judge_mcp.storage.call_cache import CacheRow, CacheTable

log = logging.getLogger("judge_mcp.leases")

CHANNEL = "judge_mcp_call_cache"
LEASE_TTL_S = 6.0  # a lease not renewed for this long runs out (its holder is taken to be dead)
POLL_S = 1.0  # a waiter re-reads this often even without a notification
NOW = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"  # the server's clock, in seconds

STORED, MINE, THEIRS = "stored", "mine", "theirs"


class PgLeases:
    """Claims, renewals, releases and notifications for one PostgresEngine (`store.leases`). The claim/finish/release
    methods block (run them in the store's write lane); `watch` / `unwatch` are called on the event loop."""

    def __init__(self, store: Any, *, ttl_s: float = LEASE_TTL_S, poll_s: float = POLL_S):
        self.store = store
        self.ttl_s = ttl_s
        self.poll_s = min(poll_s, ttl_s)
        self._prefix = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # token -> key, of the leases this process holds
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._listener: threading.Thread | None = None
        self.listening = threading.Event()  # set while the LISTEN connection is up

    def token(self) -> str:
        """A claim's own token (this process, a counter)."""
        return f"{self._prefix}:{next(self._counter)}"

    # ---- in the write lane --------------------------------------------------------------------------------------
    def claim(self, key: str, token: str) -> tuple[str, dict[str, Any] | None]:
        """(STORED, answer) when the key is answered; (MINE, None) when this call now holds its lease; (THEIRS, None)
        while another live call holds it. Each statement commits on its own (no BEGIN/COMMIT round trips)."""
        claimed = self.store.run(
            f"INSERT INTO call_leases (key, owner, lease_until) VALUES (?, ?, {NOW} + ?)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until"
            f" WHERE call_leases.lease_until < {NOW} RETURNING owner",
            [key, token, self.ttl_s],
        )
        if not claimed:
            return THEIRS, None
        with self._lock:
            self._held[token] = key
            self._start_renewing()
        # Read after the claim committed, in a statement of its own (a snapshot taken now): a holder writes its answer
        # and deletes its lease in one commit, so an answer written before this claim succeeded is seen here.
        rows = self.store.run("SELECT response FROM call_cache WHERE key = ?", [key])
        answer = CacheTable.complete(self.store, {key: json.loads(rows[0]["response"])}).get(key) if rows else None
        if answer is not None:
            self.release(key, token, notify=False)
            return STORED, answer
        return MINE, None

    def finish(self, key: str, token: str, row: CacheRow | None, *, notify: bool = True) -> None:
        """The answer's cache row (None: nothing to store), the lease deleted and the key notified: one statement, so
        one commit."""
        parts, params = [], []
        if row is not None:  # the row's long text first (storage/texts.py), then the row
            for n, (sql, values) in enumerate(CacheTable.statements(row, time.time())):
                parts.append(f"cached{n} AS ({sql})")
                params += values
        parts.append("dropped AS (DELETE FROM call_leases WHERE key = ? AND owner = ?)")
        params += [key, token]
        tail = "SELECT pg_notify(?, ?)" if notify else "SELECT 1"
        params += [CHANNEL, key] if notify else []
        try:
            self.store.run("WITH " + ", ".join(parts) + " " + tail, params)
        finally:
            with self._lock:
                self._held.pop(token, None)

    def release(self, key: str, token: str, *, notify: bool = True) -> None:
        """Give the lease up without an answer (the call failed or nobody waits for it any more); waiters are told."""
        self.finish(key, token, None, notify=notify)

    def renew(self) -> int:
        """Push back the end of every lease this process holds; how many rows."""
        with self._lock:
            tokens = list(self._held)
        if not tokens:
            return 0
        marks = ",".join("?" * len(tokens))
        rows = self.store.run(f"UPDATE call_leases SET lease_until = {NOW} + ? WHERE owner IN ({marks}) RETURNING key", [self.ttl_s, *tokens])
        return len(rows)

    # ---- threads ------------------------------------------------------------------------------------------------
    def _start_renewing(self) -> None:
        if self._renewer is None and not self._stop.is_set():
            self._renewer = threading.Thread(target=self._renew_loop, name="judge-mcp lease renewals", daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except Exception as exc:  # noqa: BLE001 - the database is down: the leases may run out; try again
                log.warning("could not renew call leases: %s", exc)

    def watch(self, key: str, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future set when `key` is notified (register before claiming, so no notification falls in between)."""
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiters.setdefault(key, []).append((loop, future))
            if self._listener is None and not self._stop.is_set():
                self._listener = threading.Thread(target=self._listen_loop, name="judge-mcp lease notifications", daemon=True)
                self._listener.start()
        return future

    def unwatch(self, key: str, future: asyncio.Future[None]) -> None:
        with self._lock:
            waiting = [w for w in self._waiters.get(key, []) if w[1] is not future]
            if waiting:
                self._waiters[key] = waiting
            else:
                self._waiters.pop(key, None)

    def _notified(self, key: str) -> None:
        with self._lock:
            waiting = self._waiters.pop(key, [])
        for loop, future in waiting:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # that loop has closed
                pass

    def _listen_loop(self) -> None:
        """LISTEN on a connection of its own; reconnect after a failure (the waiters poll meanwhile)."""
        while not self._stop.is_set():
            conn = None
            try:
                conn = self.store.connect()
                conn.execute(f"LISTEN {CHANNEL}")
                self.listening.set()
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self._notified(note.payload)
            except Exception as exc:  # noqa: BLE001 - the server went away; waiters poll until it is back
                self.listening.clear()
                if not self._stop.is_set():
                    log.info("lease notifications interrupted (%s); reconnecting", type(exc).__name__)
                    self._stop.wait(1.0)
            finally:
                self.listening.clear()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass

    def close(self) -> None:
        self._stop.set()
        for thread in (self._renewer, self._listener):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=5)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
