"""The migration registry: each module that owns tables registers its migrations; a Store applies each once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from judge_mcp.bench.results import Results, all_runs
from judge_mcp.storage.sqlite import MIGRATIONS, Store, migration


def _applied(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY name")]


def _tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_a_store_opened_alone_has_the_core_and_lwe_tables_and_not_the_bench_tables(tmp_path):
    """In a fresh interpreter that imports only the store (as `judge-mcp gc` does), the LWE repository's migration
    still runs (store.SCHEMA_MODULES), while the bench's tables appear only where the bench opens the database."""
    db = tmp_path / "alone.db"
    code = "import sys; from judge_mcp.storage.sqlite import Store; Store(sys.argv[1]).close()"
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)
    tables = _tables(db)
    assert {"call_cache", "verdicts", "option_pool", "lwe_sessions", "lwe_versions", "lwe_feedback"} <= tables
    assert not {"bench_results", "bench_runs"} & tables
    assert _applied(db) == ["m001_call_cache", "m001_verdicts", "m002_lwe", "m003_option_pool"]


def test_the_bench_migrations_run_once_on_first_use_and_record_themselves(tmp_path):
    db = tmp_path / "bench.db"
    store = Store(db)
    Results(store, "ds", "grp", "local")
    assert {"bench_results", "bench_runs"} <= _tables(db)
    assert _applied(db) == ["m001_call_cache", "m001_verdicts", "m002_lwe", "m003_option_pool", "m101_bench_tables", "m102_bench_fingerprint"]
    store.close()
    reopened = Store(db)
    assert reopened.migrate() == []  # nothing left to apply
    reopened.close()


def test_a_bench_database_from_before_the_registry_gains_the_fingerprint_column_and_keeps_its_rows(tmp_path):
    """Bench databases written before fingerprints (and before the registry) have bench_runs without the column and
    no m101/m102 rows: the migrations add the column and keep every row."""
    db = tmp_path / "old.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:  # as such a database was: no bench migrations recorded, the old bench_runs
        conn.execute("DROP TABLE IF EXISTS bench_runs")
        conn.execute("DELETE FROM _migrations WHERE name LIKE 'm1%'")
        conn.execute(
            "CREATE TABLE bench_runs (dataset TEXT NOT NULL, method TEXT NOT NULL, backend TEXT NOT NULL, backend_name TEXT NOT NULL,"
            " model TEXT NOT NULL, dataset_path TEXT NOT NULL, kind TEXT NOT NULL, options TEXT NOT NULL, wall_seconds REAL NOT NULL DEFAULT 0,"
            " judged INTEGER NOT NULL DEFAULT 0, invocations INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,"
            " PRIMARY KEY (dataset, method, backend))"
        )
        conn.execute("INSERT INTO bench_runs VALUES ('ds', 'grp', 'local', 'local', 'm', 'p', 'pairs', ?, 3.5, 2, 1, 0, 0)", [json.dumps({})])
    store = Store(db)
    runs = all_runs(store)
    assert [(r["dataset"], r["judged"], r["fingerprint"]) for r in runs] == [("ds", 2, None)]
    assert "m102_bench_fingerprint" in _applied(db)
    store.close()


def test_a_failing_migration_leaves_no_record_and_no_half_schema(tmp_path):
    db = tmp_path / "fail.db"
    Store(db).close()

    @migration
    def m900_test_half_done(conn) -> None:
        conn.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("boom")

    try:
        with pytest.raises(RuntimeError, match="boom"):
            Store(db)
        assert "half_done" not in _tables(db)
        assert "m900_test_half_done" not in _applied(db)
    finally:
        del MIGRATIONS["m900_test_half_done"]


def test_two_migrations_with_one_name_are_refused():
    def m002_lwe(db) -> None:  # the same name as LWE's migration, another function
        pass

    with pytest.raises(ValueError, match="m002_lwe"):
        migration(m002_lwe)


def test_a_database_whose_option_pool_came_from_m001_core_keeps_its_options(tmp_path):
    """Before the option pool had its own migration, m001_core made the table: m003 finds it and keeps its rows."""
    from judge_mcp.methods.unrelated_pool import OptionPool

    db = tmp_path / "pool.db"
    store = Store(db)
    OptionPool(store).add("Name a colour.", ["Red", "Blue"])
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM _migrations WHERE name = 'm003_option_pool'")
    reopened = Store(db)
    assert "m003_option_pool" in _applied(db)
    assert {r["option"] for r in OptionPool(reopened).others("Another instruction.")} == {"Red", "Blue"}
    assert OptionPool(reopened).others("Name a colour.") == []
    reopened.close()


def test_a_database_from_the_single_core_migration_keeps_its_cache_and_verdicts(tmp_path):
    """Databases made when one migration (m001_core) created the cache and the verdict log: the tables' own
    migrations find them (IF NOT EXISTS) and keep every row."""
    from judge_mcp.calls.cache import CacheRow, CacheTable
    from judge_mcp.storage.verdict_log import VerdictLog

    db = tmp_path / "core.db"
    store = Store(db)
    CacheTable(store).put_many([CacheRow("k", "b", "m", {"r": 1}, {"text": "kept"})])
    VerdictLog(store).log("compare_pair", "b", "m", {"prompt": "p"}, {"winner": "A"}, {}, [])
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM _migrations WHERE name IN ('m001_call_cache', 'm001_verdicts')")
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m001_core', 0)")
    reopened = Store(db)
    assert {"m001_core", "m001_call_cache", "m001_verdicts"} <= set(_applied(db))
    assert CacheTable(reopened).get_many(["k"]).get("k") == {"text": "kept"}
    assert [v["output"]["winner"] for v in VerdictLog(reopened).recent()] == ["A"]
    reopened.close()
