"""Migration m017: judge_stats' mean reasoning tokens per verdict (in a module of its own, listed in
migrations.MIGRATIONS like every other)."""

from __future__ import annotations

from judge_mcp.storage.engine import Tx

# a verdict row `v`'s usage.reasoning_tokens when it is a number, else NULL (usage is JSON text; PostgreSQL reads it
# with judge_mcp_json, migrations' m007, which gives NULL for text that is not JSON)
_REASONING = {
    "sqlite": "(SELECT CASE WHEN json_valid(v.usage) AND json_type(v.usage, '$.reasoning_tokens') IN ('integer', 'real')"
    " THEN json_extract(v.usage, '$.reasoning_tokens') END FROM verdicts v WHERE v.id = verdict_facts.verdict_id)",
    "postgresql": "(SELECT CASE WHEN jsonb_typeof(judge_mcp_json(v.usage) -> 'reasoning_tokens') = 'number'"
    " THEN (judge_mcp_json(v.usage) ->> 'reasoning_tokens')::double precision END FROM verdicts v WHERE v.id = verdict_facts.verdict_id)",
}
_COLUMNS = (("reasoning_tokens_sum", "real"), ("reasoning_tokens_n", "INTEGER"))


def m017_reasoning_tokens(tx: Tx) -> None:
    """The counters' two new columns (`reasoning_tokens_sum`, `reasoning_tokens_n`: the hidden reasoning a group's
    verdicts reported, and how many reported it) on `stats_groups` and `verdict_facts`, written by each verdict's own
    transaction from now on (verdict_facts.Counts); the verdicts already logged are backfilled here from their
    stored usage (part 0 of each verdict, then each group's sums of its facts rows), inside the migration's
    transaction. A panel member's own reasoning, logged before, stays uncounted."""
    for table in ("stats_groups", "verdict_facts"):
        have = tx.columns(table)
        for name, kind in _COLUMNS:
            if name not in have:
                sql_kind = tx.dialect.real if kind == "real" else kind
                tx.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_kind} NOT NULL DEFAULT 0")
    reasoning = _REASONING[tx.dialect.name]
    tx.execute(
        f"UPDATE verdict_facts SET reasoning_tokens_sum = COALESCE({reasoning}, 0),"
        f" reasoning_tokens_n = CASE WHEN {reasoning} IS NULL THEN 0 ELSE 1 END WHERE part = 0"
    )
    for name, _ in _COLUMNS:
        tx.execute(
            f"UPDATE stats_groups SET {name} = COALESCE((SELECT SUM(f.{name}) FROM verdict_facts f WHERE f.group_id = stats_groups.id), 0)"
        )
