"""The verdict log: one row per judgment (tool, backend, model, inputs, output, usage, the call records), its
table (migration m001_verdicts) and every read and write of it. App writes a tool call's row together with the
call's new cache rows in one transaction (its only write); stats.py reads it in pages; retention.py trims it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import sqlite_utils

from judge_mcp.calls.cache import CacheRow, CacheTable
from judge_mcp.storage.sqlite import Store, dumps, migration


@migration
def m001_verdicts(db: sqlite_utils.Database) -> None:
    """IF NOT EXISTS: databases made before the tables had their own migrations got it from m001_core."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS verdicts (
            id INTEGER PRIMARY KEY,
            tool TEXT NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            inputs TEXT NOT NULL,
            output TEXT NOT NULL,
            usage TEXT NOT NULL,
            calls TEXT NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX IF NOT EXISTS verdicts_tool ON verdicts(tool, created_at)")


class VerdictLog:
    """The verdicts table. Synchronous: async code runs `log` in the store's write lane (App._logged) and the
    telemetry's reads in a worker thread (the judge_stats tool)."""

    def __init__(self, store: Store):
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
        with self.store.transaction() as db:
            CacheTable.insert(db, cache_rows)
            cursor = db.execute(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [tool, backend, model, dumps(inputs), dumps(output), dumps(usage), dumps(calls), time.time()],
            )
            return int(cursor.lastrowid)

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
        each row's output without LWE's long texts, its usage, for the `pair_tools` the lengths in characters of
        the two judged answers (the input keys `answers`), and the purposes of lwe_judge's vanilla re-asks from its
        call records. JSON columns come as text; one that is not valid JSON comes as None. A read (the read-only
        connection)."""
        return self.store.query(
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
            " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?",
            [json.dumps(list(pair_tools)), f"$.{answers[0]}", json.dumps(list(pair_tools)), f"$.{answers[1]}",
             before_id if before_id is not None else 2**63 - 1, limit],
        )
