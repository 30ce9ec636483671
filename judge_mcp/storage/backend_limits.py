"""The backend_limits table (made by migrations.m008_backend_limits): the concurrency limit each backend was left at
by a process in which it refused calls, keyed by the backend's identity (kind, endpoint, model; never a key). App
reads the table once at start and writes it when it closes; backends/limiter.py decides what is worth keeping."""

from __future__ import annotations

import time

from judge_mcp.storage.engine import Engine


class BackendLimits:
    def __init__(self, store: Engine):
        self.store = store

    def all(self) -> dict[str, int]:
        """Every remembered limit, by backend identity."""
        return {row["backend"]: int(row["concurrency"]) for row in self.store.query("SELECT backend, concurrency FROM backend_limits")}

    def put(self, limits: dict[str, int]) -> None:
        """Remember these limits (one transaction), replacing what was kept for the same backends."""
        if not limits:
            return
        now = time.time()
        with self.store.transaction() as tx:
            for backend, concurrency in limits.items():
                tx.execute(
                    "INSERT INTO backend_limits (backend, concurrency, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (backend) DO UPDATE SET concurrency = excluded.concurrency, updated_at = excluded.updated_at",
                    [backend, concurrency, now],
                )
