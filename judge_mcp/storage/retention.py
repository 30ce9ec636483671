"""Retention: deleting call-cache and verdict-log rows past an age (JUDGE_MCP_*_MAX_AGE_DAYS at App start, and
`judge-mcp gc`), with a verdict's human label (record_label), and the long reply texts no row left refers to
(storage/texts.py). LWE sessions, their versions and feedback, and the option pool are never touched. Deleted
verdicts leave the bias telemetry's counters in the same transaction (verdict_stats.trim): judge_stats' "all time"
is every verdict the log still holds."""

from __future__ import annotations

import time

from judge_mcp.storage import texts
from judge_mcp.storage.call_cache import CacheTable
from judge_mcp.storage.engine import Engine
from judge_mcp.storage.label_rows import LabelTable
from judge_mcp.storage.verdict_log import VerdictLog


def gc(store: Engine, *, cache_older_than_s: float | None = None, verdicts_older_than_s: float | None = None, vacuum: bool = False) -> dict[str, int]:
    """Delete the rows older than the given ages in one transaction; with `vacuum`, then give the space back to the
    filesystem (SQLite otherwise reuses it for new rows). The number of rows deleted per table (labels: those of the
    verdicts deleted)."""
    now = time.time()
    counts = {"call_cache": 0, "verdicts": 0, "labels": 0, "texts": 0}
    with store.transaction() as tx:
        if cache_older_than_s is not None:
            counts["call_cache"] = CacheTable.delete_older_than(tx, now - cache_older_than_s)
        if verdicts_older_than_s is not None:
            counts["labels"] = LabelTable.delete_with_verdicts_before(tx, now - verdicts_older_than_s)
            counts["verdicts"] = VerdictLog.delete_older_than(tx, now - verdicts_older_than_s)
        cache_cutoff = None if cache_older_than_s is None else now - cache_older_than_s
        verdict_cutoff = None if verdicts_older_than_s is None else now - verdicts_older_than_s
        counts["texts"] = texts.delete_unused(tx, cache_cutoff, verdict_cutoff)
    if vacuum:
        store.vacuum()
    return counts
