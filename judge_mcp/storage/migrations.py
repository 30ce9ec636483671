"""Every table's schema, as one ordered list of forward-only migrations.

`MIGRATIONS` is the schema of every judge-mcp database; the bench keeps its own list beside it
(bench/schema.py: `BENCH_MIGRATIONS`, this list and then the bench's tables, in the databases the bench opens).
Whoever opens a store passes the list (`storage.open_store(path, MIGRATIONS)`: App, the CLI, the bench);
`Engine.migrate` applies, in list order, each migration the database has not had yet and records its name in
`_migrations`, all in one transaction: a migration that fails leaves neither its record nor any of its
changes, nor anything of the migrations after it.

A migration is a function of an open transaction (`engine.Tx`) named `mNNN_what_it_does`; it runs once per
database, is never edited once released (a change is a new migration at the end), and finds its SQL's
engine-specific column types in `tx.dialect`. A migration is frozen as it shipped: it carries its own SQL, and the
pure helpers it runs are copies in migration_helpers.py, never the live repositories' code, so editing a repository
never changes how an old database is upgraded (this module and that one import nothing of judge_mcp but the
engine seam: `tools/check_imports.py` refuses anything else). Creating migrations say IF NOT EXISTS: databases made before a
table had its own migration already have it (an earlier `m001_core` made the call cache, the verdict log and the
option pool), and keep their rows.

Three migrations were recorded under other names before this list existed (the list was then ordered by name,
and two began with m001); `FORMER_NAMES` maps them, and a database that has them is given the new names in the
same transaction, so nothing runs twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from judge_mcp.storage.engine import Migration, StoreError, Tx


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
    page's facts computed as the write path computed them when this shipped (migration_helpers.contributions), and
    its groups' counters added once."""
    from judge_mcp.storage import migration_helpers as shipped  # lazy: loaded only where this migration runs

    shipped.create_stats_tables(tx)
    before: int | None = None
    while True:
        rows = shipped.stats_page(tx, before, BACKFILL_PAGE)
        verdicts = []
        for raw in rows:
            row = shipped.row_from_json(raw)
            verdicts.append((int(row["id"]), float(row["created_at"]), shipped.contributions(row)))
        shipped.add_many(tx, verdicts)
        if len(rows) < BACKFILL_PAGE:
            return
        before = rows[-1]["id"]


def m013_tenants(tx: Tx) -> None:
    """Who owns what (tenants.py): the verdict log, its labels, the bias telemetry's facts and groups, the option pool
    and LWE sessions carry their tenant. Rows from before belong to `tenants.legacy(engine)`: `local` in SQLite (the
    per-user database stdio clients write), `default` in PostgreSQL (HTTP replicas, which had the one token of
    tenant `default`). A group's counters are per tenant (its unique key gains the tenant); an LWE session's key
    becomes `TENANT/NAME` (storage/lwe_sessions.py's session_key); an option pool row's instruction hash includes its
    tenant (storage/option_pool.py's instruction_hash), so each tenant's pool keeps its own options once."""
    from judge_mcp.storage import migration_helpers as shipped  # lazy: loaded only where this migration runs

    owner = shipped.legacy_tenant(tx.dialect.name)
    assert shipped.TENANT_NAME.fullmatch(owner)  # spelled into the DDL below
    for table in ("verdicts", "labels", "verdict_facts", "option_pool", "lwe_sessions"):
        if "tenant" not in tx.columns(table):
            tx.execute(f"ALTER TABLE {table} ADD COLUMN tenant TEXT NOT NULL DEFAULT '{owner}'")
    tx.execute("CREATE INDEX IF NOT EXISTS verdicts_tenant ON verdicts(tenant, id)")
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_tenant ON verdict_facts(tenant, verdict_id)")  # judge_stats' last-N window
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_tenant_created ON verdict_facts(tenant, created_at)")
    tx.execute("CREATE INDEX IF NOT EXISTS option_pool_tenant ON option_pool(tenant, id)")
    tx.execute("CREATE INDEX IF NOT EXISTS lwe_sessions_tenant ON lwe_sessions(tenant, name)")
    shipped.key_groups_by_tenant(tx, owner)
    for row in tx.query("SELECT id, instruction FROM option_pool ORDER BY id"):
        tx.execute("UPDATE option_pool SET instruction_hash = ? WHERE id = ?", [shipped.instruction_hash(row["instruction"], owner), row["id"]])
    # each session under its new key: the new row first, its versions and feedback moved to it, then the old row gone
    # (PostgreSQL checks the versions' and feedback's references to the session at every statement)
    for row in tx.query("SELECT name FROM lwe_sessions WHERE name NOT LIKE '%/%' ORDER BY name"):
        old, new = row["name"], shipped.session_key(owner, row["name"])
        tx.execute(
            "INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at, tenant)"
            " SELECT ?, current_version, batch_size, created_at, updated_at, ? FROM lwe_sessions WHERE name = ?",
            [new, owner, old],
        )
        tx.execute("UPDATE lwe_versions SET session = ? WHERE session = ?", [new, old])
        tx.execute("UPDATE lwe_feedback SET session = ? WHERE session = ?", [new, old])
        tx.execute("DELETE FROM lwe_sessions WHERE name = ?", [old])


def m014_label_feedback(tx: Tx) -> None:
    """LWE learns from labels: a session may opt out (`learn_from_labels`, 1 unless created with false); a feedback
    item says where it came from (`source`: the judge's own feedback, or a human label of the verdict `verdict_id`).
    At most one label item of a verdict is pending at a time (a replaced label discards the earlier one's)."""
    tx.execute("ALTER TABLE lwe_sessions ADD COLUMN learn_from_labels INTEGER NOT NULL DEFAULT 1")
    tx.execute("ALTER TABLE lwe_feedback ADD COLUMN source TEXT NOT NULL DEFAULT 'self' CHECK (source IN ('self', 'label'))")
    tx.execute("ALTER TABLE lwe_feedback ADD COLUMN verdict_id TEXT")
    tx.execute("CREATE UNIQUE INDEX IF NOT EXISTS lwe_feedback_label ON lwe_feedback(verdict_id) WHERE status = 'pending'")


def m015_longer_answers(tx: Tx) -> None:
    """Part 0 of each verdict's facts row says which of a pairwise verdict's two answers (compare_pair, lwe_judge) is
    longer in characters (`longer_answer`: "A", "B"; NULL for equal lengths, answers that are not texts and other
    tools), so judge_stats can set the labels' share of longer answers beside the verdicts' (stats/agreement.py).
    Written by the verdict's own transaction from now on (verdict_stats.add); the verdicts already logged are
    backfilled here from their stored inputs, in one statement inside the migration's transaction (all or nothing)."""
    from judge_mcp.storage import migration_helpers as shipped  # lazy: loaded only where this migration runs

    assert all(name.isidentifier() for name in (*shipped.PAIR_TOOLS, *shipped.ANSWERS))  # spelled into the SQL
    if "longer_answer" not in tx.columns("verdict_facts"):
        tx.execute("ALTER TABLE verdict_facts ADD COLUMN longer_answer TEXT")
    tx.execute(shipped.longer_answers_sql(tx.dialect.name))


def m016_labels_by_tenant(tx: Tx) -> None:
    """judge_stats reads a tenant's labels in verdict_id order (label_rows.page): from this index, so the read costs
    the tenant's labels, not a probe per verdict of the tenant's log."""
    tx.execute("CREATE INDEX IF NOT EXISTS labels_tenant ON labels(tenant, verdict_id)")


# a verdict row `v`'s usage.reasoning_tokens when it is a number, else NULL (usage is JSON text; PostgreSQL reads it
# with judge_mcp_json, migrations' m007, which gives NULL for text that is not JSON)
_M017_REASONING = {
    "sqlite": "(SELECT CASE WHEN json_valid(v.usage) AND json_type(v.usage, '$.reasoning_tokens') IN ('integer', 'real')"
    " THEN json_extract(v.usage, '$.reasoning_tokens') END FROM verdicts v WHERE v.id = verdict_facts.verdict_id)",
    "postgresql": "(SELECT CASE WHEN jsonb_typeof(judge_mcp_json(v.usage) -> 'reasoning_tokens') = 'number'"
    " THEN (judge_mcp_json(v.usage) ->> 'reasoning_tokens')::double precision END FROM verdicts v WHERE v.id = verdict_facts.verdict_id)",
}
_M017_COLUMNS = (("reasoning_tokens_sum", "real"), ("reasoning_tokens_n", "INTEGER"))


def m017_reasoning_tokens(tx: Tx) -> None:
    """The counters' two new columns (`reasoning_tokens_sum`, `reasoning_tokens_n`: the hidden reasoning a group's
    verdicts reported, and how many reported it) on `stats_groups` and `verdict_facts`, written by each verdict's own
    transaction from now on (verdict_facts.Counts); the verdicts already logged are backfilled here from their
    stored usage (part 0 of each verdict, then each group's sums of its facts rows), inside the migration's
    transaction. A panel member's own reasoning, logged before, stays uncounted."""
    for table in ("stats_groups", "verdict_facts"):
        have = tx.columns(table)
        for name, kind in _M017_COLUMNS:
            if name not in have:
                sql_kind = tx.dialect.real if kind == "real" else kind
                tx.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_kind} NOT NULL DEFAULT 0")
    reasoning = _M017_REASONING[tx.dialect.name]
    tx.execute(
        f"UPDATE verdict_facts SET reasoning_tokens_sum = COALESCE({reasoning}, 0),"
        f" reasoning_tokens_n = CASE WHEN {reasoning} IS NULL THEN 0 ELSE 1 END WHERE part = 0"
    )
    for name, _ in _M017_COLUMNS:
        tx.execute(
            f"UPDATE stats_groups SET {name} = COALESCE((SELECT SUM(f.{name}) FROM verdict_facts f WHERE f.group_id = stats_groups.id), 0)"
        )


def m018_prompt_cache_stats(tx: Tx) -> None:
    """judge_stats' billed-equivalent input: each group's and each verdict's sums (and counts) of prompt tokens, of
    prompt tokens read from the provider's prompt cache and of those written to it. Verdicts logged before count
    toward none of them (their `_n` stays 0). A database whose stats tables were made after the counts existed
    (m012 builds them from the live column list) has them already."""
    sums = ("prompt_tokens", "cached_prompt_tokens", "cache_write_tokens")
    for table in ("stats_groups", "verdict_facts"):
        have = tx.columns(table)
        for name in sums:
            if f"{name}_sum" not in have:
                tx.execute(f"ALTER TABLE {table} ADD COLUMN {name}_sum {tx.dialect.real} NOT NULL DEFAULT 0")
            if f"{name}_n" not in have:
                tx.execute(f"ALTER TABLE {table} ADD COLUMN {name}_n INTEGER NOT NULL DEFAULT 0")


def m019_candidates(tx: Tx) -> None:
    """Pairwise verdicts name their candidates (compare_pair / lwe_judge `candidates`): `candidate_a`, `candidate_b`,
    and `battle`, the verdict as one Bradley-Terry battle ('A', 'B', 'tie' when its two orders disagreed; NULL without
    candidates or without both orders parsed), read by judge_stats' ranking (storage/battles.py) through the partial
    index. Verdicts logged before had no candidates: nothing to backfill."""
    for column in ("candidate_a", "candidate_b", "battle"):
        tx.execute(f"ALTER TABLE verdicts ADD COLUMN {column} TEXT")
    tx.execute("CREATE INDEX IF NOT EXISTS verdicts_battles ON verdicts(tenant, id) WHERE battle IS NOT NULL")


def m020_cache_keys_by_tenant(tx: Tx) -> None:
    """The call cache's keys name their scope (calls/cache.py, scoped_key: the tenant, or "shared" when the operator
    shares the cache). A row cached before had no owner in its key and could be any tenant's answer: it is given to
    tenant `local` (stdio, the Python API, the bench: whoever runs the server on this database, who can read its rows
    anyway), so it is never served to an HTTP tenant, and a local user's or bench's cache stays warm. Leases held by
    old keys are dropped (a running call of an earlier version writes its row under an old key, which nobody reads)."""
    rows = tx.query("SELECT key FROM call_cache")
    for row in rows:
        old = row["key"]
        new = hashlib.sha256(f"tenant:local\n{old}".encode()).hexdigest()
        tx.execute("UPDATE call_cache SET key = ? WHERE key = ?", [new, old])
    tx.execute("DELETE FROM call_leases")


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
    m018_prompt_cache_stats,
    m019_candidates,
    m020_cache_keys_by_tenant,
)

# name recorded before the list existed -> the migration's name now
FORMER_NAMES = {"m001_verdicts": "m002_verdicts", "m002_lwe": "m003_lwe", "m003_option_pool": "m004_option_pool"}
# names recorded by earlier versions that are kept as they are (the one migration that once made three tables)
RETIRED_NAMES = {"m001_core"}
# names another list records in the databases it shares with this one (the bench's, bench/schema.py): kept, never run
OTHER_LISTS = {"m101_bench_tables", "m102_bench_fingerprint", "m103_bench_batches"}


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
    unknown = sorted(done - set(order) - OTHER_LISTS - FORMER_NAMES.keys() - RETIRED_NAMES)
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
