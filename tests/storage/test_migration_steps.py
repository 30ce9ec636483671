"""A database written by the oldest schema, upgraded through every step of the one migrations list, one start per
step, ends with the schema a fresh database gets in one go (tables, columns, indexes), on both engines; and the
migration code imports nothing of judge_mcp but the engine seam (each migration is frozen as it shipped)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import judge_mcp
from judge_mcp.bench.schema import BENCH_MIGRATIONS, BENCH_TABLES
from judge_mcp.storage import migrations, open_store
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.migrations import MIGRATIONS
from tests.storage.test_migrations import BEFORE, BEFORE_NAMES
from tools import check_imports

ENGINES = ["sqlite", "postgresql"]


def _schema(store: Engine) -> dict[str, Any]:
    """Every table with its columns (name, type, not null, default) and every index (name, table, definition)."""
    if store.dialect.name == "sqlite":
        tables = [r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        columns = {t: [(c["name"], c["type"], c["notnull"], c["dflt_value"], c["pk"]) for c in store.query(f"PRAGMA table_info({t})")] for t in tables}
        indexes = {}
        for t in tables:
            for index in store.query(f"PRAGMA index_list({t})"):
                cols = [c["name"] for c in store.query(f"PRAGMA index_info({index['name']})")]
                indexes[index["name"]] = (t, index["unique"], index["partial"], cols)
        return {"columns": columns, "indexes": {k: v for k, v in indexes.items() if not k.startswith("sqlite_autoindex")},
                "unique": sorted((v[0], tuple(v[3])) for k, v in indexes.items() if v[1])}
    rows = store.query(
        "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    )
    columns: dict[str, list[Any]] = {}
    for r in rows:
        columns.setdefault(r["table_name"], []).append((r["column_name"], r["data_type"], r["is_nullable"], r["column_default"]))
    indexes = {r["indexname"]: (r["tablename"], r["indexdef"]) for r in store.query(
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()")}
    return {"columns": columns, "indexes": indexes}


def _location(engine: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> Any:
    return request.getfixturevalue("postgres_url") if engine == "postgresql" else tmp_path / f"{name}.db"


def _some_rows(store: Engine) -> None:
    """Rows of the first tables (a verdict, a cache row, an LWE session, an option), as the oldest code wrote them."""
    with store.transaction() as tx:
        tx.execute("INSERT INTO call_cache (key, backend, model, request, response, created_at) VALUES ('k', 'b', 'm', '{}', '{\"text\": \"t\"}', 1.0)")


def _step_by_step(location: Any, start: int) -> Engine:
    store = None
    for k in range(start, len(MIGRATIONS) + 1):
        if store is not None:
            store.close()
        store = open_store(location, MIGRATIONS[:k])  # one start per step: each migration in a transaction of its own
        if k == 4:  # the first tables are all there: rows the later steps must carry
            with store.transaction() as tx:
                tx.execute("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at)"
                           " VALUES ('compare_pair', 'b', 'm', '{\"response_a\": \"aa\", \"response_b\": \"b\"}', '{\"winner\": \"A\"}', '{}', '[]', 1.0)")
                tx.execute("INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at) VALUES ('s', 1, 2, 1.0, 1.0)")
                tx.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'Q', 'Red', 1.0)")
    assert store is not None
    return store


@pytest.mark.parametrize("engine", ENGINES)
def test_the_oldest_schema_upgraded_step_by_step_equals_a_fresh_database(engine, tmp_path, request):
    stepped = _step_by_step(_location(engine, tmp_path, request, "stepped"), 1)
    fresh = open_store(_location(engine, tmp_path, request, "fresh"), MIGRATIONS)
    try:
        assert [r["name"] for r in stepped.query("SELECT name FROM _migrations ORDER BY name")] == sorted(migrations.names(MIGRATIONS))
        schema = _schema(fresh)
        assert {"verdicts", "verdict_facts", "stats_groups", "labels", "texts"} <= set(schema["columns"]) and len(schema["indexes"]) >= 10
        assert _schema(stepped) == schema
        assert stepped.query("SELECT tenant, backend, logged FROM stats_groups") == [
            {"tenant": "default" if engine == "postgresql" else "local", "backend": "b", "logged": 1}]  # m012 backfilled, m013 owned
        assert stepped.query("SELECT longer_answer FROM verdict_facts") == [{"longer_answer": "A"}]  # m015 backfilled
        assert [r["name"] for r in stepped.query("SELECT name FROM lwe_sessions")] == [("default" if engine == "postgresql" else "local") + "/s"]
    finally:
        stepped.close()
        fresh.close()


def test_a_database_from_before_the_list_upgraded_equals_a_fresh_database(tmp_path):
    """SQLite only (the list is older than the PostgreSQL engine): the schema the modules before the list wrote, under
    their former names (migrations.FORMER_NAMES)."""
    old = tmp_path / "before.db"
    with sqlite3.connect(old) as conn:
        for sql in BEFORE:
            conn.execute(sql)
        conn.executemany("INSERT INTO _migrations VALUES (?, 1.0)", [[name] for name in BEFORE_NAMES])
    conn.close()
    stepped = _step_by_step(old, 5)
    fresh = open_store(tmp_path / "fresh.db", MIGRATIONS)
    try:
        assert _schema(stepped) == _schema(fresh)
    finally:
        stepped.close()
        fresh.close()


def test_the_bench_keeps_its_own_list_and_the_product_list_knows_only_its_names(tmp_path):
    assert not set(BENCH_TABLES) & set(MIGRATIONS)
    assert BENCH_MIGRATIONS == (*MIGRATIONS, *BENCH_TABLES)
    assert migrations.OTHER_LISTS == {fn.__name__ for fn in BENCH_TABLES}  # a bench database opens with the product's list
    store = open_store(tmp_path / "bench.db", BENCH_MIGRATIONS)
    store.close()
    assert open_store(tmp_path / "bench.db", MIGRATIONS).migrate(MIGRATIONS) == []


def test_migration_code_imports_no_live_module():
    """tools/check_imports.py's FROZEN rule over the package as it is (tests/tools/ shows it refusing a live import)."""
    edges, _ = check_imports.graph(Path(judge_mcp.__file__).resolve().parent)
    assert set(check_imports.FROZEN) <= set(edges)
    assert [line for line in check_imports.layering(edges) if line.startswith("frozen")] == []
