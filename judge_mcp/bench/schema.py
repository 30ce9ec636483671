"""The bench's own migrations list, beside the bench: the product's list (storage/migrations.py's MIGRATIONS) and
then the bench's tables, in the databases the bench opens (`BENCH_MIGRATIONS`; bench/stored_runs.py, the bench
command). Frozen like the product's: each migration carries its own SQL, runs once per database and is never edited
once released; the product's list knows only their names (migrations.OTHER_LISTS), so a judge-mcp opening a bench
database keeps them."""

from __future__ import annotations

from judge_mcp.storage.engine import Migration, Tx
from judge_mcp.storage.migrations import MIGRATIONS


def m101_bench_tables(tx: Tx) -> None:
    """The bench's results (one row per dataset, method, backend, item and placement) and runs (each run's
    metadata and accumulated wall time). IF NOT EXISTS: bench databases made before the migrations have them."""
    real = tx.dialect.real
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS bench_results (
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
        created_at {real} NOT NULL,
        PRIMARY KEY (dataset, method, backend, item_id, placement)
    )"""
    )
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS bench_runs (
        dataset TEXT NOT NULL,
        method TEXT NOT NULL,
        backend TEXT NOT NULL,
        backend_name TEXT NOT NULL,
        model TEXT NOT NULL,
        dataset_path TEXT NOT NULL,
        kind TEXT NOT NULL,
        options TEXT NOT NULL,
        wall_seconds {real} NOT NULL DEFAULT 0,
        judged INTEGER NOT NULL DEFAULT 0,
        invocations INTEGER NOT NULL DEFAULT 0,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL,
        PRIMARY KEY (dataset, method, backend)
    )"""
    )


def m102_bench_fingerprint(tx: Tx) -> None:
    """The methods fingerprint of each run (bench databases written before it was kept lack the column)."""
    if "fingerprint" not in tx.columns("bench_runs"):
        tx.execute("ALTER TABLE bench_runs ADD COLUMN fingerprint TEXT")


def m103_bench_batches(tx: Tx) -> None:
    """The provider batches a bench has submitted (batch = true backends): the provider's batch id, the backend's
    identity, the custom ids (call-cache keys) it holds and whether it has ended, so a killed bench polls the
    batches it submitted instead of submitting their requests again."""
    real = tx.dialect.real
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS bench_batches (
        id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        custom_ids TEXT NOT NULL,
        status TEXT NOT NULL,
        detail TEXT,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL
    )"""
    )
    tx.execute("CREATE INDEX IF NOT EXISTS bench_batches_open ON bench_batches(backend, status)")


BENCH_TABLES: tuple[Migration, ...] = (m101_bench_tables, m102_bench_fingerprint, m103_bench_batches)
BENCH_MIGRATIONS: tuple[Migration, ...] = (*MIGRATIONS, *BENCH_TABLES)
