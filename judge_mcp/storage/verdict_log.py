"""The verdict log: one row per judgment (tool, backend, model, inputs, output, usage, the call records) and every
read and write of its table (made by migrations.m002_verdicts). App writes a tool call's row together with the
call's new cache rows and the row's telemetry counts (verdict_stats.py, computed from the Python objects by
verdict_facts.py) in one transaction (its only write); retention.py trims it through verdict_stats.trim. The full
read of the log in pages (`stats_page`) serves the reference scan the tests and the benchmark compare the counters
with (stats/report.py's scan_store); the backfill migration reads the log with its own frozen copy of it
(migration_helpers.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage import texts
from judge_mcp.storage.battles import battle_of
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.engine import Engine, Tx, dumps

# the output's fields that may hold a long model text (lwe_judge's), stored once like the call records' replies
OUTPUT_TEXTS = ("eval_prompt", "judgment", "feedback")

# One page of the log for the bias telemetry, by engine: JSON functions have no form SQLite and PostgreSQL share.
# Parameters: the pairwise tools (a JSON list), the first answer's input key and its key among the inputs' `text_refs`
# (a long answer is stored once in `texts`, which knows its length), the same three for the second answer (as JSON
# paths in SQLite), then the id to read below and the page size.
STATS_PAGE = {
    "sqlite": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN json_valid(usage) THEN usage END AS usage,"
        " CASE WHEN json_valid(output) THEN json_remove(output, '$.eval_prompt', '$.judgment', '$.feedback', '$.text_refs') END AS output,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN COALESCE(length(json_extract(inputs, ?)), (SELECT chars FROM texts WHERE sha256 = json_extract(inputs, ?))) END AS len_a,"
        " CASE WHEN tool IN (SELECT value FROM json_each(?)) AND json_valid(inputs)"
        "  THEN COALESCE(length(json_extract(inputs, ?)), (SELECT chars FROM texts WHERE sha256 = json_extract(inputs, ?))) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND json_valid(calls) THEN"
        "  (SELECT json_group_array(json_extract(c.value, '$.purpose')) FROM json_each(verdicts.calls) AS c"
        "   WHERE json_extract(c.value, '$.purpose') LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN json_valid(inputs) THEN json_array("
        "  json_type(inputs, '$.criteria') IS NOT NULL OR json_type(inputs, '$.text_refs.criteria') IS NOT NULL,"
        "  json_type(inputs, '$.reference') IS NOT NULL OR json_type(inputs, '$.text_refs.reference') IS NOT NULL,"
        "  json_type(inputs, '$.images') IS NOT NULL OR json_type(inputs, '$.response_a_images') IS NOT NULL"
        "  OR json_type(inputs, '$.response_b_images') IS NOT NULL OR json_type(inputs, '$.option_images') IS NOT NULL,"
        "  json_type(inputs, '$.prompt') = 'array' OR json_type(inputs, '$.instruction') = 'array' OR json_type(inputs, '$.context') = 'array',"
        "  json_type(inputs, '$.response_a') = 'array' OR json_type(inputs, '$.response_b') = 'array'"
        "  OR EXISTS (SELECT 1 FROM json_each(inputs, '$.options') AS o WHERE o.type = 'array')"
        "  OR EXISTS (SELECT 1 FROM json_each(inputs, '$.responses') AS r WHERE r.type = 'array')) END AS brought"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
    # judge_mcp_json(text): the text as jsonb, or NULL when it is not valid JSON (migrations.m007_json_or_null)
    "postgresql": (
        "SELECT id, tool, backend, model, created_at,"
        " CASE WHEN judge_mcp_json(usage) IS NOT NULL THEN usage END AS usage,"
        " CASE WHEN jsonb_typeof(judge_mcp_json(output)) = 'object'"
        "  THEN (judge_mcp_json(output) - 'eval_prompt' - 'judgment' - 'feedback' - 'text_refs')::text"
        "  WHEN judge_mcp_json(output) IS NOT NULL THEN output END AS output,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN COALESCE(length(judge_mcp_json(inputs) ->> ?),"
        "   (SELECT chars FROM texts WHERE sha256 = judge_mcp_json(inputs) -> 'text_refs' ->> ?)) END AS len_a,"
        " CASE WHEN tool IN (SELECT jsonb_array_elements_text(?::jsonb)) AND jsonb_typeof(judge_mcp_json(inputs)) = 'object'"
        "  THEN COALESCE(length(judge_mcp_json(inputs) ->> ?),"
        "   (SELECT chars FROM texts WHERE sha256 = judge_mcp_json(inputs) -> 'text_refs' ->> ?)) END AS len_b,"
        " CASE WHEN tool = 'lwe_judge' AND jsonb_typeof(judge_mcp_json(calls)) = 'array' THEN"
        "  (SELECT COALESCE(jsonb_agg(c.value ->> 'purpose'), '[]'::jsonb)::text FROM jsonb_array_elements(judge_mcp_json(verdicts.calls)) AS c"
        "   WHERE jsonb_typeof(c.value) = 'object' AND c.value ->> 'purpose' LIKE 'lwe_judge:vanilla:%:reask') END AS vanilla_reasks"
        " , CASE WHEN jsonb_typeof(judge_mcp_json(inputs)) = 'object' THEN jsonb_build_array("
        "  (judge_mcp_json(inputs) -> 'criteria') IS NOT NULL OR (judge_mcp_json(inputs) -> 'text_refs' -> 'criteria') IS NOT NULL,"
        "  (judge_mcp_json(inputs) -> 'reference') IS NOT NULL OR (judge_mcp_json(inputs) -> 'text_refs' -> 'reference') IS NOT NULL,"
        "  (judge_mcp_json(inputs) -> 'images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'response_a_images') IS NOT NULL"
        "  OR (judge_mcp_json(inputs) -> 'response_b_images') IS NOT NULL OR (judge_mcp_json(inputs) -> 'option_images') IS NOT NULL,"
        "  jsonb_typeof(judge_mcp_json(inputs) -> 'prompt') = 'array' OR jsonb_typeof(judge_mcp_json(inputs) -> 'instruction') = 'array'"
        "  OR jsonb_typeof(judge_mcp_json(inputs) -> 'context') = 'array',"
        "  jsonb_typeof(judge_mcp_json(inputs) -> 'response_a') = 'array' OR jsonb_typeof(judge_mcp_json(inputs) -> 'response_b') = 'array'"
        "  OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(judge_mcp_json(inputs) -> 'options') = 'array'"
        "   THEN judge_mcp_json(inputs) -> 'options' ELSE '[]'::jsonb END) AS o WHERE jsonb_typeof(o.value) = 'array')"
        "  OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(judge_mcp_json(inputs) -> 'responses') = 'array'"
        "   THEN judge_mcp_json(inputs) -> 'responses' ELSE '[]'::jsonb END) AS r WHERE jsonb_typeof(r.value) = 'array')"
        " )::text END AS brought"
        " FROM verdicts WHERE id < ? ORDER BY id DESC LIMIT ?"
    ),
}


class VerdictLog:
    """The verdicts table. Synchronous: async code runs `log` in the store's write lane (runtime/verdict_writes.py's VerdictWrites.write) and the
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
        tenant: str | None = None,
    ) -> int:
        """The verdict row, the tool call's new cache rows and the verdict's telemetry counts, in one transaction; the
        row's id. `verdict_id`: the text id the tool call returned (unique; record_label finds the row by it). The long
        texts (a call record's reply, the output's OUTPUT_TEXTS, the inputs' top-level strings: the judged texts, and the
        contents of the messages of a conversation or trajectory) are
        stored once (storage/texts.py: shared with the cache rows and LWE's feedback buffer) and the row keeps their
        hashes; the telemetry's facts are taken from the texts themselves, before. `tenant`: whose verdict it is (None:
        the call's, tenants.current(); the write lane's thread has no call, so App passes it)."""
        from judge_mcp.storage import verdict_facts, verdict_stats  # lazy: the telemetry's modules load at the first write

        written = verdict_facts.written_row(tool, backend, model, inputs, output, usage, calls)
        parts, longer = verdict_facts.contributions(written), verdict_facts.longer_answer(written["lengths"])
        battle = battle_of(tool, inputs, output)  # the named candidates and the verdict as a battle (judge_stats' ranking)
        created_at = time.time()
        tenant = tenant or tenants.current()
        with self.store.transaction() as tx:
            CacheTable.insert(tx, cache_rows, created_at)
            kept = [texts.shelve(tx, call, ("text",), "verdict", created_at) for call in calls]
            output = texts.shelve(tx, output, OUTPUT_TEXTS, "verdict", created_at)
            inputs = texts.shelve(tx, inputs, tuple(k for k, v in inputs.items() if isinstance(v, str)), "verdict", created_at)
            inputs = texts.shelve_messages(tx, inputs, "verdict", created_at)
            row_id = tx.insert(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, verdict_id, tenant,"
                " candidate_a, candidate_b, battle) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [tool, backend, model, dumps(inputs), dumps(output), dumps(usage), dumps(kept), created_at, verdict_id, tenant, *battle],
            )
            verdict_stats.add(tx, row_id, created_at, parts, tenant, longer)
            return row_id

    def recent(self, tool: str | None = None, limit: int = 100, tenant: str | None = None) -> list[dict[str, Any]]:
        """The newest rows of `tenant` (None: the call's) (of one tool), newest first, with their JSON columns decoded
        and the long texts of the inputs, the output and the call records in them (read back from `texts` where the
        row keeps their hashes)."""
        sql = "SELECT * FROM verdicts WHERE tenant = ?" + (" AND tool = ?" if tool else "") + " ORDER BY id DESC LIMIT ?"
        tenant = tenant or tenants.current()
        rows = self.store.query(sql, [tenant, tool, limit] if tool else [tenant, limit])
        for row in rows:
            for col in ("inputs", "output", "usage", "calls"):
                row[col] = json.loads(row[col])
        calls = [c for row in rows if isinstance(row["calls"], list) for c in row["calls"]]
        messages = [m for row in rows for m in texts.messages_in(row["inputs"])]  # a conversation's long contents, too
        texts.resolve(self.store, [*(row["inputs"] for row in rows), *(row["output"] for row in rows), *calls, *messages])
        return rows

    def stats_page(
        self, *, before_id: int | None = None, limit: int = 500, pair_tools: Sequence[str] = (), answers: tuple[str, str] = ("", "")
    ) -> list[dict[str, Any]]:
        """One page of the log for the bias telemetry (judge_mcp/stats/report.py), newest first, ids below `before_id`:
        each row's output without LWE's long texts, its usage, for the `pair_tools` the lengths in characters of the
        two judged answers (the input keys `answers`), which of criteria, reference and images the caller gave (`brought`,
        three flags), and the purposes of lwe_judge's vanilla re-asks from its call
        records. JSON columns come as text; one that is not valid JSON comes as None. A read (the read-only
        connection). The call's tenant's rows only (tenants.current())."""
        return stats_page(self.store, before_id=before_id, limit=limit, pair_tools=pair_tools, answers=answers, tenant=tenants.current())

    @staticmethod
    def delete_older_than(tx: Tx, cutoff: float) -> int:
        """Delete the rows logged before `cutoff` (a time.time() value), with their telemetry counts, inside the
        caller's transaction; how many."""
        # lazy: the bias counters' modules load at the first verdict write, not at start
        from judge_mcp.storage import verdict_stats

        return verdict_stats.trim(tx, cutoff)


def stats_page(
    db: Engine | Tx, *, before_id: int | None = None, limit: int = 500, pair_tools: Sequence[str] = (), answers: tuple[str, str] = ("", ""),
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """`VerdictLog.stats_page` on a store or inside a transaction (`tenant`'s rows; None: every row)."""
    tools, (a, b) = json.dumps(list(pair_tools)), answers
    before = before_id if before_id is not None else 2**63 - 1
    a_ref, b_ref = a, b  # a judged answer stored in `texts`: its length is the text's `chars` there
    if db.dialect.name == "sqlite":  # a JSON path; PostgreSQL's ->> takes the key itself
        a, b, a_ref, b_ref = f"$.{a}", f"$.{b}", f"$.{texts.REFS}.{a}", f"$.{texts.REFS}.{b}"
    if tenant is None:
        return db.query(STATS_PAGE[db.dialect.name], [tools, a, a_ref, tools, b, b_ref, before, limit])
    sql = STATS_PAGE[db.dialect.name].replace(" FROM verdicts WHERE id < ?", " FROM verdicts WHERE tenant = ? AND id < ?")
    return db.query(sql, [tools, a, a_ref, tools, b, b_ref, tenant, before, limit])
