"""Where bench results live: two tables of their own in the bench database (default bench.db in the per-user data
directory, config.default_bench_db_path).

The bench database is an ordinary judge-mcp Store (its two tables come from the migrations m101/m102 below), so the call cache, the verdict log and the LWE sessions of a
run live beside its results. `bench_results` holds one row per (dataset, method, backend, item, placement),
written as soon as that judgment finishes, so a killed run loses at most the judgments in flight and a re-run
skips every finished one. `bench_runs` holds each run's metadata and its accumulated wall time.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import sqlite_utils

from judge_mcp.storage.sqlite import Store, migration


@migration
def m101_bench_tables(db: sqlite_utils.Database) -> None:
    """The bench's two tables (IF NOT EXISTS: bench databases made before the registry already have them)."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS bench_results (
        dataset TEXT NOT NULL,
        method TEXT NOT NULL,
        backend TEXT NOT NULL,
        item_id TEXT NOT NULL,
        placement TEXT NOT NULL,
        seq INTEGER NOT NULL,
        category TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('done', 'error', 'skipped')),
        record TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        PRIMARY KEY (dataset, method, backend, item_id, placement)
    )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS bench_runs (
        dataset TEXT NOT NULL,
        method TEXT NOT NULL,
        backend TEXT NOT NULL,
        backend_name TEXT NOT NULL,
        model TEXT NOT NULL,
        dataset_path TEXT NOT NULL,
        kind TEXT NOT NULL,
        options TEXT NOT NULL,
        wall_seconds REAL NOT NULL DEFAULT 0,
        judged INTEGER NOT NULL DEFAULT 0,
        invocations INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (dataset, method, backend)
    )"""
    )


@migration
def m102_bench_fingerprint(db: sqlite_utils.Database) -> None:
    """The methods fingerprint of each run (bench databases written before it was kept lack the column)."""
    columns = {row["name"] for row in db.query("PRAGMA table_info(bench_runs)")}
    if "fingerprint" not in columns:
        db.execute("ALTER TABLE bench_runs ADD COLUMN fingerprint TEXT")


def methods_fingerprint() -> str:
    """A short hash of what decides a judgment besides the model: the prompt files and the judging code
    (judge_mcp/methods). A run resumed after either changed mixes two versions of its method; the harness warns."""
    root = Path(__file__).resolve().parent.parent.parent
    files = sorted((root / "judge_mcp" / "prompts").glob("*.txt")) + sorted((root / "judge_mcp" / "methods").glob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


class Results:
    """The results of one run (dataset, method, backend) inside a bench Store."""

    def __init__(self, store: Store, dataset: str, method: str, backend: str):
        self.store = store
        self.key = (dataset, method, backend)
        ensure_schema(store)

    def finished(self) -> set[tuple[str, str]]:
        """(item_id, placement) pairs that need no more work: done, or skipped as degenerate."""
        rows = self.store.query(
            "SELECT item_id, placement FROM bench_results WHERE dataset = ? AND method = ? AND backend = ? AND status IN ('done', 'skipped')",
            list(self.key),
        )
        return {(r["item_id"], r["placement"]) for r in rows}

    def put(self, item_id: str, placement: str, seq: int, category: str, status: str, record: dict[str, Any] | None = None, error: str | None = None) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO bench_results (dataset, method, backend, item_id, placement, seq, category, status, record, error, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [*self.key, item_id, placement, seq, category, status, json.dumps(record) if record is not None else None, error, time.time()],
            )

    def rows(self, item_ids: set[str] | None = None) -> list[dict[str, Any]]:
        return run_rows(self.store, *self.key, item_ids=item_ids)

    def start(self, *, backend_name: str, model: str, dataset_path: str, kind: str, options: dict[str, Any], fingerprint: str | None = None) -> str | None:
        """Record (or update) the run's metadata; returns the methods fingerprint the run was started with (None
        for runs stored before fingerprints were kept)."""
        now = time.time()
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO bench_runs (dataset, method, backend, backend_name, model, dataset_path, kind, options, created_at, updated_at, fingerprint)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, method, backend) DO UPDATE SET"
                " backend_name = excluded.backend_name, model = excluded.model, dataset_path = excluded.dataset_path,"
                " options = excluded.options, updated_at = excluded.updated_at, invocations = invocations + 1",
                [*self.key, backend_name, model, dataset_path, kind, json.dumps(options, sort_keys=True), now, now, fingerprint],
            )
            db.execute("UPDATE bench_runs SET invocations = MAX(invocations, 1) WHERE dataset = ? AND method = ? AND backend = ?", list(self.key))
            row = list(db.query("SELECT fingerprint FROM bench_runs WHERE dataset = ? AND method = ? AND backend = ?", list(self.key)))
        return row[0]["fingerprint"] if row else None

    def add_time(self, seconds: float, judged: int) -> None:
        with self.store.transaction() as db:
            db.execute(
                "UPDATE bench_runs SET wall_seconds = wall_seconds + ?, judged = judged + ?, updated_at = ? WHERE dataset = ? AND method = ? AND backend = ?",
                [seconds, judged, time.time(), *self.key],
            )

    def run_info(self) -> dict[str, Any] | None:
        rows = self.store.query("SELECT * FROM bench_runs WHERE dataset = ? AND method = ? AND backend = ?", list(self.key))
        return _decode_run(rows[0]) if rows else None


def run_totals(info: dict[str, Any]) -> dict[str, Any]:
    """Wall time and judged items summed over every invocation of a run (its `bench_runs` row)."""
    wall, judged = info["wall_seconds"], info["judged"]
    return {
        "wall_seconds_total": round(wall, 1),
        "judged_total": judged,
        "wall_seconds_per_judged_item": round(wall / judged, 2) if judged else None,
    }


def ensure_schema(store: Store) -> None:
    """The bench tables in `store`: applies this module's migrations if the database has not had them (a no-op,
    without a transaction, once it has)."""
    store.migrate()


def _decode_run(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    row["options"] = json.loads(row["options"])
    return row


def run_rows(store: Store, dataset: str, method: str, backend: str, item_ids: set[str] | None = None) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT item_id, placement, seq, category, status, record, error FROM bench_results"
        " WHERE dataset = ? AND method = ? AND backend = ? ORDER BY seq, placement",
        [dataset, method, backend],
    )
    out = []
    for row in rows:
        if item_ids is not None and row["item_id"] not in item_ids:
            continue
        row["record"] = json.loads(row["record"]) if row["record"] else None
        out.append(row)
    return out


def all_runs(store: Store) -> list[dict[str, Any]]:
    ensure_schema(store)
    return [_decode_run(r) for r in store.query("SELECT * FROM bench_runs ORDER BY dataset, method, backend")]
