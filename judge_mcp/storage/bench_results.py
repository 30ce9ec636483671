"""The bench's two tables (made by the bench's own migrations, bench/schema.py's m101_bench_tables and m102_bench_fingerprint,
in the databases the bench opens): `bench_results`, one row per (dataset, method, backend, item, placement), written as soon as that judgment
finishes, and `bench_runs`, each run's metadata and accumulated wall time. Every read and write of them; what they
mean to a run is in bench/stored_runs.py."""

from __future__ import annotations

import json
import time
from typing import Any

from judge_mcp.redaction import scrub
from judge_mcp.storage.engine import Engine

RunKey = tuple[str, str, str]  # (dataset, method key, backend key)


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    row["options"] = json.loads(row["options"])
    return row


class BenchResults:
    """The bench_results and bench_runs tables."""

    def __init__(self, store: Engine):
        self.store = store

    def finished(self, run: RunKey) -> set[tuple[str, str]]:
        """(item_id, placement) pairs that need no more work: done, or skipped as degenerate."""
        rows = self.store.query(
            "SELECT item_id, placement FROM bench_results WHERE dataset = ? AND method = ? AND backend = ? AND status IN ('done', 'skipped')",
            list(run),
        )
        return {(r["item_id"], r["placement"]) for r in rows}

    def put(
        self, run: RunKey, item_id: str, placement: str, seq: int, category: str, status: str,
        record: dict[str, Any] | None = None, error: str | None = None,
    ) -> None:
        """One judgment's row (a row already stored for the item and placement is replaced)."""
        with self.store.transaction() as tx:
            tx.execute(
                "INSERT INTO bench_results (dataset, method, backend, item_id, placement, seq, category, status, record, error, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, method, backend, item_id, placement) DO UPDATE SET"
                " seq = excluded.seq, category = excluded.category, status = excluded.status, record = excluded.record,"
                " error = excluded.error, created_at = excluded.created_at",
                [*run, item_id, placement, seq, category, status, json.dumps(scrub(record)) if record is not None else None, error, time.time()],
            )

    def rows(self, run: RunKey, item_ids: set[str] | None = None) -> list[dict[str, Any]]:
        """The run's rows (of these items), in item order, with their records decoded."""
        rows = self.store.query(
            "SELECT item_id, placement, seq, category, status, record, error FROM bench_results"
            " WHERE dataset = ? AND method = ? AND backend = ? ORDER BY seq, placement",
            list(run),
        )
        out = []
        for row in rows:
            if item_ids is not None and row["item_id"] not in item_ids:
                continue
            row["record"] = json.loads(row["record"]) if row["record"] else None
            out.append(row)
        return out

    def start(
        self, run: RunKey, *, backend_name: str, model: str, dataset_path: str, kind: str, options: dict[str, Any], fingerprint: str | None = None
    ) -> str | None:
        """Record (or update) the run's metadata and count one more invocation; the methods fingerprint the run was
        started with (None for runs stored before fingerprints were kept)."""
        now = time.time()
        with self.store.transaction() as tx:
            tx.execute(
                "INSERT INTO bench_runs (dataset, method, backend, backend_name, model, dataset_path, kind, options, created_at, updated_at, fingerprint)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, method, backend) DO UPDATE SET"
                " backend_name = excluded.backend_name, model = excluded.model, dataset_path = excluded.dataset_path,"
                " options = excluded.options, updated_at = excluded.updated_at, invocations = bench_runs.invocations + 1",
                [*run, backend_name, model, dataset_path, kind, json.dumps(options, sort_keys=True), now, now, fingerprint],
            )
            tx.execute(
                "UPDATE bench_runs SET invocations = 1 WHERE dataset = ? AND method = ? AND backend = ? AND invocations < 1", list(run)
            )
            row = tx.query("SELECT fingerprint FROM bench_runs WHERE dataset = ? AND method = ? AND backend = ?", list(run))
        return row[0]["fingerprint"] if row else None

    def add_time(self, run: RunKey, seconds: float, judged: int) -> None:
        with self.store.transaction() as tx:
            tx.execute(
                "UPDATE bench_runs SET wall_seconds = wall_seconds + ?, judged = judged + ?, updated_at = ? WHERE dataset = ? AND method = ? AND backend = ?",
                [seconds, judged, time.time(), *run],
            )

    def run_info(self, run: RunKey) -> dict[str, Any] | None:
        """The run's bench_runs row, its options decoded; None before its first start."""
        rows = self.store.query("SELECT * FROM bench_runs WHERE dataset = ? AND method = ? AND backend = ?", list(run))
        return _decode_run(rows[0]) if rows else None

    def runs(self) -> list[dict[str, Any]]:
        """Every run's bench_runs row, its options decoded."""
        return [_decode_run(r) for r in self.store.query("SELECT * FROM bench_runs ORDER BY dataset, method, backend")]
