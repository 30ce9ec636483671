"""Every table's schema, as one ordered list of forward-only migrations.

`MIGRATIONS` is the schema of every judge-mcp database; `BENCH_MIGRATIONS` adds the bench's two tables, in the
databases the bench opens. Whoever opens a store passes the list (`storage.open_store(path, MIGRATIONS)`: App, the
CLI, the bench); `Engine.migrate` applies, in list order, each migration the database has not had yet and records
its name in `_migrations`, all in one transaction: a migration that fails leaves neither its record nor any of its
changes, nor anything of the migrations after it.

A migration is a function of an open transaction (`engine.Tx`) named `mNNN_what_it_does`; it runs once per
database, is never edited once released (a change is a new migration at the end), and finds its SQL's
engine-specific column types in `tx.dialect`. Creating migrations say IF NOT EXISTS: databases made before a
table had its own migration already have it (an earlier `m001_core` made the call cache, the verdict log and the
option pool), and keep their rows.

Three migrations were recorded under other names before this list existed (the list was then ordered by name,
and two began with m001); `FORMER_NAMES` maps them, and a database that has them is given the new names in the
same transaction, so nothing runs twice.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from judge_mcp.storage.engine import Migration, StoreError, Tx
from judge_mcp.storage.m013_tenants import m013_tenants
from judge_mcp.storage.m015_longer_answers import m015_longer_answers
from judge_mcp.storage.m017_reasoning_tokens import m017_reasoning_tokens
from judge_mcp.storage.verdict_log import stats_page


def m001_call_cache(tx: Tx) -> None:
    """The call cache: one temperature-0 answer per request key (`hits` was a counter; m005 drops it)."""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS call_cache (
            key TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            request TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at {tx.dialect.real} NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0
        )"""
    )


def m002_verdicts(tx: Tx) -> None:
    """The verdict log: one row per judgment, with its inputs, output, usage and call records (JSON text)."""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS verdicts (
            id {tx.dialect.auto_id},
            tool TEXT NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            inputs TEXT NOT NULL,
            output TEXT NOT NULL,
            usage TEXT NOT NULL,
            calls TEXT NOT NULL,
            created_at {tx.dialect.real} NOT NULL
        )"""
    )
    tx.execute("CREATE INDEX IF NOT EXISTS verdicts_tool ON verdicts(tool, created_at)")


def m003_lwe(tx: Tx) -> None:
    """LWE sessions: one row per session, every meta-prompt version ever made, and the feedback buffer.

    A version's `parent` is the version that was current when it was made (the one it replaced); a rollback also
    records `restored_from`. Feedback rows are `pending` until one refinement uses them (`used`, with the version
    they produced) or a reset drops them (`discarded`, with the reset version); they are never deleted.
    """
    real = tx.dialect.real
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS lwe_sessions (
            name TEXT PRIMARY KEY,
            current_version INTEGER NOT NULL,
            batch_size INTEGER NOT NULL CHECK (batch_size BETWEEN 1 AND 64),
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL
        )"""
    )
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS lwe_versions (
            session TEXT NOT NULL REFERENCES lwe_sessions(name),
            version INTEGER NOT NULL CHECK (version >= 1),
            parent INTEGER,
            reason TEXT NOT NULL CHECK (reason IN ('initial', 'refine', 'condense', 'reset', 'rollback')),
            text TEXT NOT NULL,
            restored_from INTEGER,
            feedback_ids TEXT NOT NULL DEFAULT '[]',
            created_at {real} NOT NULL,
            PRIMARY KEY (session, version)
        )"""
    )
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS lwe_feedback (
            id {tx.dialect.auto_id},
            session TEXT NOT NULL REFERENCES lwe_sessions(name),
            meta_version INTEGER NOT NULL,
            prompt TEXT NOT NULL,
            response_a TEXT NOT NULL,
            response_b TEXT NOT NULL,
            eval_prompt TEXT NOT NULL,
            judgment TEXT NOT NULL,
            winner TEXT CHECK (winner IN ('A', 'B')),
            feedback TEXT NOT NULL,
            feedback_parse_ok INTEGER NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'used', 'discarded')),
            used_in_version INTEGER,
            created_at {real} NOT NULL,
            used_at {real}
        )"""
    )
    tx.execute("CREATE INDEX IF NOT EXISTS lwe_feedback_status ON lwe_feedback(session, status, id)")


def m004_option_pool(tx: Tx) -> None:
    """The option pool: each grade_score_options call's options under its instruction's hash."""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS option_pool (
            id {tx.dialect.auto_id},
            instruction_hash TEXT NOT NULL,
            instruction TEXT NOT NULL,
            option TEXT NOT NULL,
            created_at {tx.dialect.real} NOT NULL,
            UNIQUE(instruction_hash, option)
        )"""
    )


def m005_call_cache_without_hits(tx: Tx) -> None:
    """The call cache's `hits` column goes: a hit is a pure read and writes nothing, so nothing ever counted it."""
    if "hits" in tx.columns("call_cache"):
        tx.drop_column("call_cache", "hits")


def m006_call_leases(tx: Tx) -> None:
    """Leases on call-cache keys: the replica sending a request holds its key's row until the answer is written
    (storage/pg_leases.py; used by engines that offer `leases`, PostgreSQL's). `lease_until` is in seconds of the
    database server's clock."""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS call_leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            lease_until {tx.dialect.real} NOT NULL
        )"""
    )


def m007_json_or_null(tx: Tx) -> None:
    """PostgreSQL: `judge_mcp_json(text)`, the text as jsonb or NULL when it is not valid JSON (the verdict log's
    telemetry skips such rows, as SQLite's json_valid lets it). SQLite has json_valid built in: nothing to do."""
    if tx.dialect.name != "postgresql":
        return
    tx.execute(
        "CREATE OR REPLACE FUNCTION judge_mcp_json(t text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $fn$"
        " BEGIN RETURN t::jsonb; EXCEPTION WHEN others THEN RETURN NULL; END $fn$"
    )


def m008_verdict_ids(tx: Tx) -> None:
    """Each verdict's `verdict_id`: the text id its tool call returned (made when the call starts, since the row is
    written after the answer), unique and indexed; rows logged before it have none (null: no caller ever saw one)."""
    if "verdict_id" not in tx.columns("verdicts"):
        tx.execute("ALTER TABLE verdicts ADD COLUMN verdict_id TEXT")
    tx.execute("CREATE UNIQUE INDEX IF NOT EXISTS verdicts_verdict_id ON verdicts(verdict_id)")


def m009_labels(tx: Tx) -> None:
    """Human labels (record_label): at most one per verdict, its correct answer in the verdict's own terms ("A", "B",
    "tie"; an option or response index), an optional note, and which inputs the verdict's caller brought (the
    judge_stats group). Deleted with their verdict by retention."""
    real = tx.dialect.real
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS labels (
            verdict_id TEXT PRIMARY KEY,
            tool TEXT NOT NULL,
            label TEXT NOT NULL,
            inputs TEXT NOT NULL,
            note TEXT,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL
        )"""
    )


def m010_texts(tx: Tx) -> None:
    """Long texts stored once (storage/texts.py): under its SHA-256, a text's length in characters and when a cache
    row, a verdict and an LWE session last took it (`texts`; retention deletes texts no row refers to), and its
    zlib-compressed UTF-8 (`text_bodies`, apart, so recording a use never rewrites it); LWE feedback rows list the
    texts they keep there (`text_refs`). Rows written before keep their inline texts."""
    blob = "BYTEA" if tx.dialect.name == "postgresql" else "BLOB"
    real = tx.dialect.real
    # SQLite: the small rows of `texts` live in their key's b-tree (no second index holding the hash again)
    keyed = " WITHOUT ROWID" if tx.dialect.name == "sqlite" else ""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS texts (
            sha256 TEXT PRIMARY KEY,
            chars INTEGER NOT NULL,
            cache_used_at {real},
            verdict_used_at {real},
            lwe_used_at {real}
        ){keyed}"""
    )
    tx.execute(f"CREATE TABLE IF NOT EXISTS text_bodies (sha256 TEXT PRIMARY KEY, body {blob} NOT NULL)")
    if "text_refs" not in tx.columns("lwe_feedback"):
        tx.execute("ALTER TABLE lwe_feedback ADD COLUMN text_refs TEXT")


def m011_backend_limits(tx: Tx) -> None:
    """Each backend's concurrency limit (and probing interval) as the last process left it after the backend refused
    calls (429), so the next process starts there instead of at the ceiling (storage/backend_limits.py)."""
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS backend_limits (
        backend TEXT PRIMARY KEY,
        concurrency INTEGER NOT NULL,
        probe INTEGER NOT NULL DEFAULT 1,
        updated_at {tx.dialect.real} NOT NULL
    )"""
    )


BACKFILL_PAGE = 1000  # verdict rows read per page by m012's backfill


def m012_verdict_stats(tx: Tx) -> None:
    """The bias telemetry's aggregates (storage/verdict_stats.py: per-group counters, per-verdict facts, the skipped
    total), backfilled from the verdicts already logged: read BACKFILL_PAGE rows at a time, newest first, each
    page's facts computed by verdict_facts.py as the write path computes them, and its groups' counters added once."""
    from judge_mcp.storage import verdict_facts, verdict_stats  # lazy: loaded only where this migration runs

    verdict_stats.create_tables(tx)
    before: int | None = None
    while True:
        rows = stats_page(tx, before_id=before, limit=BACKFILL_PAGE, pair_tools=verdict_facts.PAIR_TOOLS, answers=verdict_facts.ANSWERS)
        verdicts = []
        for raw in rows:
            row = verdict_facts.row_from_json(raw)
            verdicts.append((int(row["id"]), float(row["created_at"]), verdict_facts.contributions(row)))
        verdict_stats.add_many(tx, verdicts)
        if len(rows) < BACKFILL_PAGE:
            return
        before = rows[-1]["id"]


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


def m014_label_feedback(tx: Tx) -> None:
    """LWE learns from labels: a session may opt out (`learn_from_labels`, 1 unless created with false); a feedback
    item says where it came from (`source`: the judge's own feedback, or a human label of the verdict `verdict_id`).
    At most one label item of a verdict is pending at a time (a replaced label discards the earlier one's)."""
    tx.execute("ALTER TABLE lwe_sessions ADD COLUMN learn_from_labels INTEGER NOT NULL DEFAULT 1")
    tx.execute("ALTER TABLE lwe_feedback ADD COLUMN source TEXT NOT NULL DEFAULT 'self' CHECK (source IN ('self', 'label'))")
    tx.execute("ALTER TABLE lwe_feedback ADD COLUMN verdict_id TEXT")
    tx.execute("CREATE UNIQUE INDEX IF NOT EXISTS lwe_feedback_label ON lwe_feedback(verdict_id) WHERE status = 'pending'")


def m016_labels_by_tenant(tx: Tx) -> None:
    """judge_stats reads a tenant's labels in verdict_id order (label_rows.page): from this index, so the read costs
    the tenant's labels, not a probe per verdict of the tenant's log."""
    tx.execute("CREATE INDEX IF NOT EXISTS labels_tenant ON labels(tenant, verdict_id)")


MIGRATIONS: tuple[Migration, ...] = (
    m001_call_cache,
    m002_verdicts,
    m003_lwe,
    m004_option_pool,
    m005_call_cache_without_hits,
    m006_call_leases,
    m007_json_or_null,
    m008_verdict_ids,
    m009_labels,
    m010_texts,
    m011_backend_limits,
    m012_verdict_stats,
    m013_tenants,
    m014_label_feedback,
    m015_longer_answers,
    m016_labels_by_tenant,
    m017_reasoning_tokens,
)
BENCH_MIGRATIONS: tuple[Migration, ...] = (*MIGRATIONS, m101_bench_tables, m102_bench_fingerprint, m103_bench_batches)

# name recorded before the list existed -> the migration's name now
FORMER_NAMES = {"m001_verdicts": "m002_verdicts", "m002_lwe": "m003_lwe", "m003_option_pool": "m004_option_pool"}
# names recorded by earlier versions that are kept as they are (the one migration that once made three tables)
RETIRED_NAMES = {"m001_core"}


def names(migrations: Sequence[Migration]) -> list[str]:
    """The migrations' names, in order; two with one name are refused (the second would never run)."""
    seen: list[str] = []
    for fn in migrations:
        if fn.__name__ in seen:
            raise ValueError(f"two migrations are named {fn.__name__!r}")
        seen.append(fn.__name__)
    return seen


def apply(tx: Tx, migrations: Sequence[Migration]) -> list[str]:
    """Inside the caller's transaction: record the table of applied migrations if it is new, refuse a database that
    records a migration this version does not know (a newer judge-mcp's: StoreError), rename the records of
    FORMER_NAMES, then run each migration not yet recorded, in order, and record it. The names applied."""
    order = names(migrations)
    tx.execute(f"CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at {tx.dialect.real} NOT NULL)")
    done = {row["name"] for row in tx.query("SELECT name FROM _migrations")}
    unknown = sorted(done - set(order) - set(names(BENCH_MIGRATIONS)) - FORMER_NAMES.keys() - RETIRED_NAMES)
    if unknown:
        raise StoreError(
            f"it was migrated by a newer judge-mcp (migrations this version does not know: {', '.join(unknown)}); "
            "upgrade judge-mcp, or point JUDGE_MCP_DB at another database"
        )
    for old in sorted(done & FORMER_NAMES.keys()):
        new = FORMER_NAMES[old]
        if new in done:
            tx.execute("DELETE FROM _migrations WHERE name = ?", [old])
        else:
            tx.execute("UPDATE _migrations SET name = ? WHERE name = ?", [new, old])
        done = (done - {old}) | {new}
    applied = []
    for fn, name in zip(migrations, order):
        if name not in done:
            fn(tx)
            tx.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", [name, time.time()])
            applied.append(name)
    return applied
