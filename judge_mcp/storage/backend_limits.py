"""The backend_limits table (made by migrations.m011_backend_limits): the concurrency limit each backend was left at
by a process in which it refused calls, with how seldom the limiter had come to probe above it (limiter.probe),
keyed by the backend's identity (kind, endpoint, model; never a key). App reads the table once at start and writes
it when it closes; backends/limiter.py decides what is worth keeping."""

from __future__ import annotations

import time

from judge_mcp.storage.engine import Engine


class BackendLimits:
    def __init__(self, store: Engine):
        self.store = store

    def all(self) -> dict[str, tuple[int, int]]:
        """Every remembered (limit, probe), by backend identity."""
        rows = self.store.query("SELECT backend, concurrency, probe FROM backend_limits")
        return {row["backend"]: (int(row["concurrency"]), int(row["probe"])) for row in rows}

    def put(self, limits: dict[str, tuple[int, int]]) -> None:
        """Remember these (limit, probe) pairs (one transaction), replacing what was kept for the same backends."""
        if not limits:
            return
        now = time.time()
        with self.store.transaction() as tx:
            for backend, (concurrency, probe) in limits.items():
                tx.execute(
                    "INSERT INTO backend_limits (backend, concurrency, probe, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (backend)"
                    " DO UPDATE SET concurrency = excluded.concurrency, probe = excluded.probe, updated_at = excluded.updated_at",
                    [backend, concurrency, probe, now],
                )
