"""All state, under one seam (engine.py: what an engine implements) with two engines (sqlite.py, the default; postgres.py
for replicas sharing one database, with pg_leases.py and pg_url.py), one ordered list
of migrations (migrations.py), one repository per table (call_cache.py, verdict_log.py, lwe_sessions.py,
option_pool.py, bench_results.py; verdict_stats.py for the bias telemetry's aggregates, with verdict_facts.py computing
what one verdict adds), retention across them (retention.py), and the threads that keep the store off
the event loop (lanes.py). Storage imports no method, no call layer and no bench."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from judge_mcp.storage.engine import Engine, Migration


def open_store(location: str | Path, migrations: Sequence[Migration], *, busy_timeout_s: float = 30.0) -> Engine:
    """The store at `location` (a `postgresql://` URL: that PostgreSQL database; else a path: an SQLite file, made if
    missing), brought to the schema `migrations` describes (migrations.MIGRATIONS; bench/schema.py's BENCH_MIGRATIONS
    for a bench database). The one place an engine is chosen."""
    # lazy: only the engine the database names loads (psycopg only for PostgreSQL)
    from judge_mcp.storage.pg_url import is_postgres_url

    if is_postgres_url(location):
        # lazy: only the engine the database names loads (psycopg only for PostgreSQL)
        from judge_mcp.storage.postgres import PostgresEngine

        return PostgresEngine(str(location), migrations)
    # lazy: only the engine the database names loads (psycopg only for PostgreSQL)
    from judge_mcp.storage.sqlite import SqliteEngine

    return SqliteEngine(location, migrations, busy_timeout_s=busy_timeout_s)
