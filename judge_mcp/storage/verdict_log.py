"""The verdict log: one row per judgment (tool, backend, model, inputs, output, usage, the call records) and every
read and write of its table (made by migrations.m002_verdicts). App writes a tool call's row together with the
call's new cache rows in one transaction (its only write); stats.py reads it in pages; retention.py trims it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.engine import Engine, Tx, dumps

# One page of the log for the bias telemetry, by engine: JSON functions have no form SQLite and PostgreSQL share.
STATS_PAGE = {
    "sqlite": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN json_valid(usage) THEN usage END AS usage,"
        " CASE WHEN json_valid(output) THEN json_remove(output, '$.eval_prompt', '$.judgment', '$.feedback') END AS output,"
        " CASE WHEN tool IN ('compare_pair', 'lwe_judge') AND json_valid(inputs)"
        "  THEN length(json_extract(inputs, '$.response_a')) END AS len_a,"
        " CASE WHEN tool IN ('compare_pair', 'lwe_judge') AND json_valid(inputs)"
        "  THEN length(json_extract(inputs, '$.response_b')) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND json_valid(calls) THEN"
        "  (SELECT json_group_array(json_extract(c.value, '$.purpose')) FROM json_each(verdicts.calls) AS c"
        "   WHERE json_extract(c.value, '$.purpose') LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
}


class VerdictLog:
    """The verdicts table. Synchronous: async code runs `log` in the store's write lane (App._logged) and the
    telemetry's reads in a worker thread (the judge_stats tool)."""

    def __init__(self, store: Engine):
        self.store = store

    def log(
        self,
        tool: str,
        backend: str,
        model: str,
        inputs: dict[str, Any],
        output: dict[str, Any],
        usage: dict[str, Any],
        calls: list[dict[str, Any]],
        cache_rows: Iterable[CacheRow] = (),
    ) -> int:
        """The verdict row, and the tool call's new cache rows, in one transaction; the row's id."""
        with self.store.transaction() as tx:
            CacheTable.insert(tx, cache_rows)
            return tx.insert(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [tool, backend, model, dumps(inputs), dumps(output), dumps(usage), dumps(calls), time.time()],
            )

    def recent(self, tool: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The newest rows (of one tool), newest first, with their JSON columns decoded."""
        sql = "SELECT * FROM verdicts" + (" WHERE tool = ?" if tool else "") + " ORDER BY id DESC LIMIT ?"
        rows = self.store.query(sql, [tool, limit] if tool else [limit])
        for row in rows:
            for col in ("inputs", "output", "usage", "calls"):
                row[col] = json.loads(row[col])
        return rows

    def stats_page(self, *, before_id: int | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """One page of the log for the bias telemetry (judge_mcp/stats.py), newest first, ids below `before_id`:
        each row's output without LWE's long texts, its usage, the two judged answers' lengths in characters
        (compare_pair, lwe_judge) and the purposes of lwe_judge's vanilla re-asks from its call records. JSON
        columns come as text; one that is not valid JSON comes as None. A read (the read-only connection)."""
        return self.store.query(STATS_PAGE[self.store.dialect.name], [before_id if before_id is not None else 2**63 - 1, limit])

    @staticmethod
    def delete_older_than(tx: Tx, cutoff: float) -> int:
        """Delete the rows logged before `cutoff` (a time.time() value) inside the caller's transaction; how many."""
        return tx.execute("DELETE FROM verdicts WHERE created_at < ?", [cutoff])
