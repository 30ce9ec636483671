"""The one ordered list of migrations (judge_mcp/storage/migrations.py), given to the store by whoever opens it: each
runs once per database, all of them in one transaction, and databases made before the list keep their rows."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from judge_mcp.bench.stored_runs import Results, all_runs
from judge_mcp.storage import migrations, sqlite as sqlite_engine
from judge_mcp.calls.cache import scoped_key
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.bench.schema import BENCH_MIGRATIONS
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.option_pool import OptionPool
from judge_mcp.storage.sqlite import APPLICATION_ID, SqliteEngine
from judge_mcp.storage.verdict_log import VerdictLog

NAMES = [
    "m001_call_cache", "m002_verdicts", "m003_lwe", "m004_option_pool", "m005_call_cache_without_hits", "m006_call_leases",
    "m007_json_or_null", "m008_verdict_ids", "m009_labels", "m010_texts", "m011_backend_limits",
    "m012_verdict_stats", "m013_tenants", "m014_label_feedback", "m015_longer_answers", "m016_labels_by_tenant", "m017_reasoning_tokens", "m018_prompt_cache_stats", "m019_candidates", "m020_cache_keys_by_tenant",
]

# The schema as judge-mcp wrote it before the list existed (each table's migration in its own module, ordered by
# name), with the names those migrations were recorded under.
BEFORE = [
    """CREATE TABLE call_cache (key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, request TEXT NOT NULL,
        response TEXT NOT NULL, created_at REAL NOT NULL, hits INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE verdicts (id INTEGER PRIMARY KEY, tool TEXT NOT NULL, backend TEXT NOT NULL, model TEXT NOT NULL,
        inputs TEXT NOT NULL, output TEXT NOT NULL, usage TEXT NOT NULL, calls TEXT NOT NULL, created_at REAL NOT NULL)""",
    "CREATE INDEX verdicts_tool ON verdicts(tool, created_at)",
    """CREATE TABLE lwe_sessions (name TEXT PRIMARY KEY, current_version INTEGER NOT NULL,
        batch_size INTEGER NOT NULL CHECK (batch_size BETWEEN 1 AND 64), created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    """CREATE TABLE lwe_versions (session TEXT NOT NULL REFERENCES lwe_sessions(name), version INTEGER NOT NULL CHECK (version >= 1),
        parent INTEGER, reason TEXT NOT NULL CHECK (reason IN ('initial', 'refine', 'condense', 'reset', 'rollback')), text TEXT NOT NULL,
        restored_from INTEGER, feedback_ids TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL, PRIMARY KEY (session, version))""",
    """CREATE TABLE lwe_feedback (id INTEGER PRIMARY KEY, session TEXT NOT NULL REFERENCES lwe_sessions(name), meta_version INTEGER NOT NULL,
        prompt TEXT NOT NULL, response_a TEXT NOT NULL, response_b TEXT NOT NULL, eval_prompt TEXT NOT NULL, judgment TEXT NOT NULL,
        winner TEXT CHECK (winner IN ('A', 'B')), feedback TEXT NOT NULL, feedback_parse_ok INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'used', 'discarded')), used_in_version INTEGER,
        created_at REAL NOT NULL, used_at REAL)""",
    "CREATE INDEX lwe_feedback_status ON lwe_feedback(session, status, id)",
    """CREATE TABLE option_pool (id INTEGER PRIMARY KEY, instruction_hash TEXT NOT NULL, instruction TEXT NOT NULL,
        option TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE(instruction_hash, option))""",
    "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)",
]
BEFORE_NAMES = ["m001_call_cache", "m001_verdicts", "m002_lwe", "m003_option_pool"]


def _applied(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(row[0] for row in conn.execute("SELECT name FROM _migrations"))


def _tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _database_from_before(path, names: list[str] = BEFORE_NAMES) -> None:
    """A database as the code before the list left it, with one row in every table."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for sql in BEFORE:
            conn.execute(sql)
        conn.executemany("INSERT INTO _migrations VALUES (?, 1.0)", [[name] for name in names])
        conn.execute("INSERT INTO call_cache VALUES ('k', 'b', 'm', '{\"r\": 1}', '{\"text\": \"kept\"}', 1.0, 3)")
        conn.execute("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at)"
                     " VALUES ('compare_pair', 'b', 'm', '{\"prompt\": \"p\"}', '{\"winner\": \"A\"}', '{}', '[]', 1.0)")
        conn.execute("INSERT INTO lwe_sessions VALUES ('s', 1, 2, 1.0, 1.0)")
        conn.execute("INSERT INTO lwe_versions (session, version, reason, text, created_at) VALUES ('s', 1, 'initial', 'M0', 1.0)")
        conn.execute("INSERT INTO lwe_feedback (session, meta_version, prompt, response_a, response_b, eval_prompt, judgment, winner,"
                     " feedback, feedback_parse_ok, created_at) VALUES ('s', 1, 'q', 'a', 'b', 'e', 'j', 'A', 'f', 1, 1.0)")
        conn.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('h', 'Name a colour.', 'Red', 1.0)")
    conn.close()


def _rows_are_all_there(store: SqliteEngine) -> None:
    old = scoped_key("k", "tenant:local")  # m020: a row from before scoped keys is the local tenant's
    assert CacheTable(store).get_many(["k", old]) == {old: {"text": "kept"}}
    assert [(v["tool"], v["output"]) for v in VerdictLog(store).recent()] == [("compare_pair", {"winner": "A"})]
    lwe = LweRepository(store)
    assert (lwe.session_row("s")["text"], [f["feedback"] for f in lwe.pending("s")]) == ("M0", ["f"])
    assert [r["option"] for r in OptionPool(store).others("Another instruction.")] == ["Red"]


def test_a_store_opened_alone_has_the_judges_tables_and_storage_imports_no_layer_above_it(tmp_path):
    """In a fresh interpreter that imports only the store (as `judge-mcp gc` does), every table of MIGRATIONS is
    made and recorded in list order, the bench's are not, and nothing above storage/ was imported."""
    db = tmp_path / "alone.db"
    code = (
        "import sys\n"
        "from judge_mcp.storage import bench_results, call_cache, lwe_sessions, option_pool, retention, verdict_log\n"
        "from judge_mcp.storage.sqlite import SqliteEngine\n"
        "SqliteEngine(sys.argv[1]).close()\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('judge_mcp.')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(db)], check=True, capture_output=True, text=True)
    # the package face loads its version leaf; storage scrubs keys out of every write (redaction.py, a leaf); nothing else
    assert done.stdout.strip() == "['_version', 'redaction', 'storage']"
    tables = _tables(db)
    assert {"call_cache", "verdicts", "option_pool", "lwe_sessions", "lwe_versions", "lwe_feedback"} <= tables
    assert not {"bench_results", "bench_runs"} & tables
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY applied_at, rowid")] == NAMES
    assert "hits" not in _columns(db, "call_cache")


def test_the_list_is_in_order_with_unique_names():
    assert [fn.__name__ for fn in MIGRATIONS] == NAMES
    assert [fn.__name__ for fn in BENCH_MIGRATIONS] == [*NAMES, "m101_bench_tables", "m102_bench_fingerprint", "m103_bench_batches"]
    assert migrations.names(BENCH_MIGRATIONS) == [fn.__name__ for fn in BENCH_MIGRATIONS]


def test_the_bench_migrations_run_once_on_first_use_and_record_themselves(tmp_path):
    db = tmp_path / "bench.db"
    store = SqliteEngine(db)
    Results(store, "ds", "grp", "local")
    assert {"bench_results", "bench_runs"} <= _tables(db)
    assert _applied(db) == sorted([*NAMES, "m101_bench_tables", "m102_bench_fingerprint", "m103_bench_batches"])
    store.close()
    reopened = SqliteEngine(db, BENCH_MIGRATIONS)
    assert reopened.migrate(BENCH_MIGRATIONS) == [] and reopened.migrate(MIGRATIONS) == []  # nothing left to apply
    reopened.close()


def test_a_bench_database_from_before_the_migrations_gains_the_fingerprint_column_and_keeps_its_rows(tmp_path):
    """Bench databases written before fingerprints (and before the migrations) have bench_runs without the column and
    no m101/m102 rows: the migrations add the column and keep every row."""
    db = tmp_path / "old.db"
    SqliteEngine(db).close()
    with sqlite3.connect(db) as conn:  # as such a database was: no bench migrations recorded, the old bench_runs
        conn.execute(
            "CREATE TABLE bench_runs (dataset TEXT NOT NULL, method TEXT NOT NULL, backend TEXT NOT NULL, backend_name TEXT NOT NULL,"
            " model TEXT NOT NULL, dataset_path TEXT NOT NULL, kind TEXT NOT NULL, options TEXT NOT NULL, wall_seconds REAL NOT NULL DEFAULT 0,"
            " judged INTEGER NOT NULL DEFAULT 0, invocations INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,"
            " PRIMARY KEY (dataset, method, backend))"
        )
        conn.execute("INSERT INTO bench_runs VALUES ('ds', 'grp', 'local', 'local', 'm', 'p', 'pairs', ?, 3.5, 2, 1, 0, 0)", [json.dumps({})])
    store = SqliteEngine(db)
    runs = all_runs(store)
    assert [(r["dataset"], r["judged"], r["fingerprint"]) for r in runs] == [("ds", 2, None)]
    assert "m102_bench_fingerprint" in _applied(db)
    store.close()


def m900_test_half_done(tx) -> None:
    tx.execute("CREATE TABLE half_done (x INTEGER)")
    raise RuntimeError("boom")


def test_a_failing_migration_leaves_no_record_and_no_half_schema(tmp_path):
    db = tmp_path / "fail.db"
    SqliteEngine(db).close()
    with pytest.raises(RuntimeError, match="boom"):
        SqliteEngine(db, [*MIGRATIONS, m900_test_half_done])
    assert "half_done" not in _tables(db)
    assert _applied(db) == sorted(NAMES)


def test_a_failing_migration_undoes_the_migrations_before_it_in_the_same_run(tmp_path):
    """On a new database the whole list runs in one transaction: a failure at its end leaves no table at all."""
    db = tmp_path / "new.db"
    with pytest.raises(RuntimeError, match="boom"):
        SqliteEngine(db, [*MIGRATIONS, m900_test_half_done])
    assert _tables(db) == set()
    store = SqliteEngine(db)  # a later start with a list that works migrates the file from the beginning
    assert _applied(db) == sorted(NAMES) and "call_cache" in _tables(db)
    store.close()


def test_two_migrations_with_one_name_are_refused(tmp_path):
    def m003_lwe(tx) -> None:  # the same name as LWE's migration, another function
        pass

    with pytest.raises(ValueError, match="m003_lwe"):
        SqliteEngine(tmp_path / "twice.db", [*MIGRATIONS, m003_lwe])


@pytest.mark.parametrize("drop_column", [True, False], ids=["alter-table-drop-column", "table-rebuilt-before-sqlite-3.35"])
def test_a_database_made_before_the_list_opens_keeps_its_rows_and_gets_the_new_migration_once(tmp_path, monkeypatch, drop_column):
    """Its migrations were recorded under the names of their old modules: they are renamed, not run again; only the
    new migration runs, once. Every row is kept and reachable through the repositories; `hits` is gone."""
    monkeypatch.setattr(sqlite_engine, "DROP_COLUMN", drop_column)
    db = tmp_path / "before.db"
    _database_from_before(db)
    store = SqliteEngine(db)
    assert _applied(db) == sorted(NAMES)
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT name FROM _migrations WHERE applied_at > 1.0")] == NAMES[4:]
    assert _columns(db, "call_cache") == ["key", "backend", "model", "request", "response", "created_at"]
    _rows_are_all_there(store)
    CacheTable(store).put_many([CacheRow("k", "b", "m", {"r": 1}, {"text": "replaced"}), CacheRow("k2", "b", "m", {}, {"text": "new"})])
    assert CacheTable(store).get_many(["k", "k2"]) == {"k": {"text": "replaced"}, "k2": {"text": "new"}}  # the key is still unique
    with pytest.raises(Exception, match="NOT NULL"):
        with store.transaction() as tx:
            tx.execute("INSERT INTO call_cache (key, backend, model, request, response, created_at) VALUES ('k3', 'b', NULL, '{}', '{}', 0)")
    store.close()
    reopened = SqliteEngine(db)
    assert reopened.migrate(MIGRATIONS) == [] and _applied(db) == sorted(NAMES)
    assert CacheTable(reopened).get_many(["k"]) == {"k": {"text": "replaced"}}
    reopened.close()


def test_a_database_from_the_single_core_migration_keeps_its_rows(tmp_path):
    """Databases made when one migration (m001_core) created the cache, the verdict log and the option pool: the
    tables' own migrations find them (IF NOT EXISTS) and keep every row."""
    db = tmp_path / "core.db"
    _database_from_before(db, names=["m001_core"])
    store = SqliteEngine(db)
    assert _applied(db) == sorted(["m001_core", *NAMES])
    _rows_are_all_there(store)
    store.close()


def test_a_database_opened_by_older_code_after_the_renames_keeps_one_record_per_migration(tmp_path):
    """Older code re-records its names (its migrations find their tables and change nothing); the next start with the
    list drops the old records instead of running anything twice."""
    db = tmp_path / "both.db"
    _database_from_before(db, names=[*BEFORE_NAMES, "m002_verdicts", "m003_lwe", "m004_option_pool"])
    store = SqliteEngine(db)
    assert _applied(db) == sorted(NAMES)
    _rows_are_all_there(store)
    store.close()
