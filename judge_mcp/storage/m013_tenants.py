"""Migration m013: tenants (in a module of its own, listed in migrations.MIGRATIONS like every other)."""

from __future__ import annotations

from judge_mcp.storage.engine import Tx


def m013_tenants(tx: Tx) -> None:
    """Who owns what (tenants.py): the verdict log, its labels, the bias telemetry's facts and groups, the option pool
    and LWE sessions carry their tenant. Rows from before belong to `tenants.legacy(engine)`: `local` in SQLite (the
    per-user database stdio clients write), `default` in PostgreSQL (HTTP replicas, which had the one token of
    tenant `default`). A group's counters are per tenant (its unique key gains the tenant); an LWE session's key
    becomes `TENANT/NAME` (storage/lwe_sessions.session_key); an option pool row's instruction hash includes its
    tenant (storage/option_pool.instruction_hash), so each tenant's pool keeps its own options once."""
    # lazy: loaded only where this migration runs
    from judge_mcp.storage import tenancy as tenants
    from judge_mcp.storage import verdict_stats
    from judge_mcp.storage.lwe_sessions import session_key
    from judge_mcp.storage.option_pool import instruction_hash

    owner = tenants.legacy(tx.dialect.name)
    assert tenants.NAME.fullmatch(owner)  # spelled into the DDL below
    for table in ("verdicts", "labels", "verdict_facts", "option_pool", "lwe_sessions"):
        if "tenant" not in tx.columns(table):
            tx.execute(f"ALTER TABLE {table} ADD COLUMN tenant TEXT NOT NULL DEFAULT '{owner}'")
    tx.execute("CREATE INDEX IF NOT EXISTS verdicts_tenant ON verdicts(tenant, id)")
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_tenant ON verdict_facts(tenant, verdict_id)")  # judge_stats' last-N window
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_tenant_created ON verdict_facts(tenant, created_at)")
    tx.execute("CREATE INDEX IF NOT EXISTS option_pool_tenant ON option_pool(tenant, id)")
    tx.execute("CREATE INDEX IF NOT EXISTS lwe_sessions_tenant ON lwe_sessions(tenant, name)")
    verdict_stats.key_groups_by_tenant(tx, owner)
    for row in tx.query("SELECT id, instruction FROM option_pool ORDER BY id"):
        tx.execute("UPDATE option_pool SET instruction_hash = ? WHERE id = ?", [instruction_hash(row["instruction"], owner), row["id"]])
    # each session under its new key: the new row first, its versions and feedback moved to it, then the old row gone
    # (PostgreSQL checks the versions' and feedback's references to the session at every statement)
    for row in tx.query("SELECT name FROM lwe_sessions WHERE name NOT LIKE '%/%' ORDER BY name"):
        old, new = row["name"], session_key(owner, row["name"])
        tx.execute(
            "INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at, tenant)"
            " SELECT ?, current_version, batch_size, created_at, updated_at, ? FROM lwe_sessions WHERE name = ?",
            [new, owner, old],
        )
        tx.execute("UPDATE lwe_versions SET session = ? WHERE session = ?", [new, old])
        tx.execute("UPDATE lwe_feedback SET session = ? WHERE session = ?", [new, old])
        tx.execute("DELETE FROM lwe_sessions WHERE name = ?", [old])
