"""The seam a second engine implements (judge_mcp/storage/engine.py): the repositories and the migrations hold no
SQLite-only SQL, and the SQLite engine's transaction object does what the protocol promises."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from judge_mcp.storage import (
    bench_results, call_cache, label_rows as labels, lwe_sessions, migrations, open_store, option_pool, retention,
    texts, verdict_log,
)
from judge_mcp.storage.engine import StoreError
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.postgres import POSTGRES
from judge_mcp.storage.sqlite import SQLITE, SqliteEngine
from tests.engines import on_both_engines

ENGINE_NEUTRAL = (bench_results, call_cache, labels, lwe_sessions, migrations, option_pool, retention, texts, verdict_log)
SQLITE_ONLY = re.compile(r"INSERT OR (IGNORE|REPLACE)|\bPRAGMA\b|lastrowid|application_id|import sqlite|sqlite_master", re.IGNORECASE)


@pytest.mark.parametrize("module", ENGINE_NEUTRAL, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_repositories_and_migrations_hold_no_sqlite_only_sql(module) -> None:
    source = inspect.getsource(module)
    assert not SQLITE_ONLY.findall(source)


def test_a_statement_without_a_shared_form_is_kept_per_engine() -> None:
    assert set(verdict_log.STATS_PAGE) == {SQLITE.name, POSTGRES.name}


def test_open_store_brings_the_database_to_the_list_it_is_given(tmp_path: Path) -> None:
    store = open_store(tmp_path / "judge.db", MIGRATIONS[:2])
    try:
        assert isinstance(store, SqliteEngine)
        assert {r["name"] for r in store.query("SELECT name FROM _migrations")} == {"m001_call_cache", "m002_verdicts"}
        assert store.query("SELECT name FROM sqlite_master WHERE name = 'lwe_sessions'") == []
        assert store.migrate(MIGRATIONS) == [
            "m003_lwe", "m004_option_pool", "m005_call_cache_without_hits", "m006_call_leases", "m007_json_or_null",
            "m008_verdict_ids", "m009_labels", "m010_texts", "m011_backend_limits", "m012_verdict_stats", "m013_tenants",
            "m014_label_feedback", "m015_longer_answers", "m016_labels_by_tenant", "m017_reasoning_tokens", "m018_prompt_cache_stats", "m019_candidates", "m020_cache_keys_by_tenant",
        ]
    finally:
        store.close()


@on_both_engines
def test_the_transaction_object_counts_rows_returns_new_ids_and_sees_its_own_writes(store: SqliteEngine) -> None:
    with store.transaction() as tx:
        first = tx.insert("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'i', 'a', 0)")
        second = tx.insert("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'i', 'b', 0)")
        assert second == first + 1
        assert [r["option"] for r in store.query("SELECT option FROM option_pool ORDER BY id")] == ["a", "b"]  # inside: sees them
        assert tx.execute("UPDATE option_pool SET created_at = 1 WHERE instruction_hash = 'h'") == 2
        assert {"id", "instruction_hash", "instruction", "option", "created_at", "tenant"} == tx.columns("option_pool")
    with pytest.raises(StoreError, match="(?i)unique"):
        with store.transaction() as tx:
            tx.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'i', 'c', 0)")
            tx.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'i', 'a', 0)")
    assert [r["option"] for r in store.query("SELECT option FROM option_pool ORDER BY id")] == ["a", "b"]  # c rolled back
