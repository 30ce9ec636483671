"""Human labels of verdicts (the record_label tool) and every read and write of their table (made by
migrations.m009_labels): at most one label per verdict, found by the verdict's `verdict_id`. A label is written
only for a verdict row that exists; retention deletes a verdict's label with it (`delete_with_verdicts_before`), and
judge_stats reads labels joined with their verdicts, a page at a time (`page`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage.engine import Engine, Tx


# A verdict's output without what the agreement figures never read (trials, FLIP's per-response results, LWE's long
# texts), by engine: JSON functions have no form SQLite and PostgreSQL share (judge_mcp_json: migrations.m007).
_DROPPED = ("trials", "results", "eval_prompt", "judgment", "feedback")
SHORT_OUTPUT = {
    "sqlite": "CASE WHEN json_valid(v.output) THEN json_remove(v.output, " + ", ".join(f"'$.{k}'" for k in _DROPPED) + ") END",
    "postgresql": "CASE WHEN jsonb_typeof(judge_mcp_json(v.output)) = 'object' THEN (judge_mcp_json(v.output) - "
    + " - ".join(f"'{k}'" for k in _DROPPED) + ")::text END",
}


class LabelTable:
    """The labels of one tenant's verdicts (`tenant`; None: the call's, tenants.current()): a verdict of another tenant
    is not found, as if it did not exist. Synchronous: async code runs it in the store's lanes or a worker thread."""

    def __init__(self, store: Engine, tenant: str | None = None):
        self.store = store
        self.tenant = tenant or tenants.current()

    def verdict(self, verdict_id: str) -> dict[str, Any] | None:
        """The tenant's verdict row with this id (tool, inputs and output as JSON text), or None."""
        rows = self.store.query("SELECT id, tool, inputs, output FROM verdicts WHERE verdict_id = ? AND tenant = ?", [verdict_id, self.tenant])
        return rows[0] if rows else None

    def put(
        self, verdict_id: str, tool: str, label: str, inputs: str, note: str | None, also: Callable[[Tx, str | None], Any] | None = None
    ) -> bool | None:
        """Record the label of a verdict, replacing any earlier one, in one transaction that also checks the tenant's
        verdict row is there. True: an earlier label was replaced; False: the first; None: the tenant has no verdict
        with this id. `also(tx, earlier label or None)` runs in the same transaction after the write (LWE's label
        feedback)."""
        now = time.time()
        with self.store.transaction() as tx:
            if not tx.query("SELECT 1 AS found FROM verdicts WHERE verdict_id = ? AND tenant = ?", [verdict_id, self.tenant]):
                return None
            earlier = tx.query("SELECT label FROM labels WHERE verdict_id = ?", [verdict_id])
            replaced = bool(earlier)
            tx.execute(
                "INSERT INTO labels (verdict_id, tool, label, inputs, note, created_at, updated_at, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (verdict_id) DO UPDATE SET label = excluded.label, note = excluded.note, updated_at = excluded.updated_at",
                [verdict_id, tool, label, inputs, note, now, now, self.tenant],
            )
            if also is not None:
                also(tx, earlier[0]["label"] if earlier else None)
        return replaced

    def page(self, *, after: str = "", limit: int = 500) -> list[dict[str, Any]]:
        """The tenant's labels joined with their verdicts, in verdict_id order after `after`: the label, the group's
        inputs, the verdict's row id, tool, backend, model and output (JSON text without its per-trial and long text
        parts; None when it is not valid JSON), and which of a pair's answers is longer (`longer`: "A", "B" or None;
        the verdict's facts row, verdict_stats.py). A read."""
        return self.store.query(
            f"SELECT l.verdict_id, l.label, l.inputs, v.id, v.tool, v.backend, v.model, {SHORT_OUTPUT[self.store.dialect.name]} AS output,"
            " f.longer_answer AS longer"
            " FROM labels l JOIN verdicts v ON v.verdict_id = l.verdict_id"
            " LEFT JOIN verdict_facts f ON f.verdict_id = v.id AND f.part = 0"
            " WHERE l.tenant = ? AND l.verdict_id > ? AND v.tenant = l.tenant ORDER BY l.verdict_id LIMIT ?",
            [self.tenant, after, limit],
        )

    def first_of_newest(self, n: int) -> int | None:
        """The row id of the oldest of the tenant's newest `n` verdicts (the judge_stats `last` window starts there)."""
        rows = self.store.query("SELECT id FROM verdicts WHERE tenant = ? ORDER BY id DESC LIMIT 1 OFFSET ?", [self.tenant, max(n - 1, 0)])
        return rows[0]["id"] if rows else None

    @staticmethod
    def delete_with_verdicts_before(tx: Tx, cutoff: float) -> int:
        """Inside the caller's transaction: delete the labels of the verdicts logged before `cutoff` (retention deletes
        those verdicts next); how many."""
        return tx.execute(
            "DELETE FROM labels WHERE verdict_id IN (SELECT verdict_id FROM verdicts WHERE created_at < ? AND verdict_id IS NOT NULL)",
            [cutoff],
        )
