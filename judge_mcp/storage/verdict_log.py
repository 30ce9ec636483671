"""The verdict log: one row per judgment (tool, backend, model, inputs, output, usage, the call records) and every
read and write of its table (made by migrations.m002_verdicts). App writes a tool call's row together with the
call's new cache rows and the row's telemetry counts (verdict_stats.py, computed from the Python objects by
verdict_facts.py) in one transaction (its only write); retention.py trims it through verdict_stats.trim. The full
read of the log in pages (`stats_page`) serves the backfill of the telemetry's tables (migrations.m010) and the
reference scan the tests and the benchmark compare the counters with (stats.scan_store).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from judge_mcp.storage import verdict_facts, verdict_stats
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.engine import Engine, Tx, dumps

# One page of the log for the bias telemetry, by engine: JSON functions have no form SQLite and PostgreSQL share.
# Parameters: the pairwise tools (a JSON list), the first answer's input key, the same list, the second answer's key
# (as JSON paths), then the id to read below and the page size.
STATS_PAGE = {
    "sqlite": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN json_valid(usage) THEN usage END AS usage,"
        " CASE WHEN json_valid(output) THEN json_remove(output, '$.eval_prompt', '$.judgment', '$.feedback') END AS output,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN length(json_extract(inputs, ?)) END AS len_a,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN length(json_extract(inputs, ?)) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND json_valid(calls) THEN"
        "  (SELECT json_group_array(json_extract(c.value, '$.purpose')) FROM json_each(verdicts.calls) AS c"
        "   WHERE json_extract(c.value, '$.purpose') LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN json_valid(inputs) THEN json_array("
        "  json_type(inputs, '$.criteria') IS NOT NULL, json_type(inputs, '$.reference') IS NOT NULL,"
        "  json_type(inputs, '$.images') IS NOT NULL OR json_type(inputs, '$.response_a_images') IS NOT NULL"
        "  OR json_type(inputs, '$.response_b_images') IS NOT NULL OR json_type(inputs, '$.option_images') IS NOT NULL) END AS brought"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
    # judge_mcp_json(text): the text as jsonb, or NULL when it is not valid JSON (migrations.m007_json_or_null)
    "postgresql": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN judge_mcp_json(usage) IS NOT NULL THEN usage END AS usage,"
        " CASE WHEN jsonb_typeof(judge_mcp_json(output)) = 'object'"
        "  THEN (judge_mcp_json(output) - 'eval_prompt' - 'judgment' - 'feedback')::text"
        "  WHEN judge_mcp_json(output) IS NOT NULL THEN output END AS output,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN length(judge_mcp_json(inputs) ->> ?) END AS len_a,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN length(judge_mcp_json(inputs) ->> ?) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND jsonb_typeof(judge_mcp_json(calls)) = 'array' THEN"
        "  (SELECT COALESCE(jsonb_agg(c.value ->> 'purpose'), '[]'::jsonb)::text FROM jsonb_array_elements(judge_mcp_json(verdicts.calls)) AS c"
        "   WHERE jsonb_typeof(c.value) = 'object' AND c.value ->> 'purpose' LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN jsonb_typeof(judge_mcp_json(inputs)) = 'object' THEN jsonb_build_array("
        "  (judge_mcp_json(inputs) -> 'criteria') IS NOT NULL, (judge_mcp_json(inputs) -> 'reference') IS NOT NULL,"
        "  (judge_mcp_json(inputs) -> 'images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'response_a_images') IS NOT NULL"
        "  OR (judge_mcp_json(inputs) -> 'response_b_images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'option_images') IS NOT NULL"
        " )::text END AS brought"
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
        verdict_id: str | None = None,
    ) -> int:
        """The verdict row, the tool call's new cache rows and the verdict's telemetry counts, in one transaction; the
        row's id. `verdict_id`: the text id the tool call returned (unique; record_label finds the row by it)."""
        parts = verdict_facts.contributions(verdict_facts.written_row(tool, backend, model, inputs, output, usage, calls))
        created_at = time.time()
        with self.store.transaction() as tx:
            CacheTable.insert(tx, cache_rows)
            row_id = tx.insert(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, verdict_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [tool, backend, model, dumps(inputs), dumps(output), dumps(usage), dumps(calls), created_at, verdict_id],
            )
            verdict_stats.add(tx, row_id, created_at, parts)
            return row_id

    def recent(self, tool: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The newest rows (of one tool), newest first, with their JSON columns decoded."""
        sql = "SELECT * FROM verdicts" + (" WHERE tool = ?" if tool else "") + " ORDER BY id DESC LIMIT ?"
        rows = self.store.query(sql, [tool, limit] if tool else [limit])
        for row in rows:
            for col in ("inputs", "output", "usage", "calls"):
                row[col] = json.loads(row[col])
        return rows

    def stats_page(
        self, *, before_id: int | None = None, limit: int = 500, pair_tools: Sequence[str] = (), answers: tuple[str, str] = ("", "")
    ) -> list[dict[str, Any]]:
        """One page of the log for the bias telemetry (judge_mcp/stats.py), newest first, ids below `before_id`:
        each row's output without LWE's long texts, its usage, for the `pair_tools` the lengths in characters of the
        two judged answers (the input keys `answers`), which of criteria, reference and images the caller gave (`brought`,
        three flags), and the purposes of lwe_judge's vanilla re-asks from its call
        records. JSON columns come as text; one that is not valid JSON comes as None. A read (the read-only
        connection)."""
        return stats_page(self.store, before_id=before_id, limit=limit, pair_tools=pair_tools, answers=answers)

    @staticmethod
    def delete_older_than(tx: Tx, cutoff: float) -> int:
        """Delete the rows logged before `cutoff` (a time.time() value), with their telemetry counts, inside the
        caller's transaction; how many."""
        return verdict_stats.trim(tx, cutoff)


def stats_page(
    db: Engine | Tx, *, before_id: int | None = None, limit: int = 500, pair_tools: Sequence[str] = (), answers: tuple[str, str] = ("", "")
) -> list[dict[str, Any]]:
    """`VerdictLog.stats_page` on a store or inside a transaction (the backfill migration)."""
    tools, (a, b) = json.dumps(list(pair_tools)), answers
    before = before_id if before_id is not None else 2**63 - 1
    if db.dialect.name == "sqlite":  # a JSON path; PostgreSQL's ->> takes the key itself
        a, b = f"$.{a}", f"$.{b}"
    return db.query(STATS_PAGE[db.dialect.name], [tools, a, tools, b, before, limit])
