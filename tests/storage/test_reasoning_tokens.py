"""judge_stats' mean reasoning tokens per verdict, on both engines: counted from each verdict's usage as it is written
(of the verdicts whose backend reported them), and backfilled by migrations' m017 for the verdicts logged before."""

from __future__ import annotations

from typing import Any

from judge_mcp.stats import report as stats
from judge_mcp.storage import open_store
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines


def _log(store: Any, k: int, usage: dict[str, Any], model: str = "m") -> None:
    VerdictLog(store).log("compare_pair", "default", model, {"prompt": "Q?", "response_a": "a", "response_b": "b"},
                          {"winner": "A", "trials": []}, usage, [], verdict_id=f"v-{k}", tenant="local")


def _reasoning(store: Any) -> dict[str, Any]:
    return {g.model: g.reasoning_tokens.model_dump() for g in stats.from_store(store).all_time.groups}


@on_both_engines
def test_judge_stats_reports_the_mean_reasoning_of_the_verdicts_that_reported_it(store, tmp_path, request) -> None:
    _log(store, 1, {"calls": 2, "reasoning_tokens": 600})
    _log(store, 2, {"calls": 2, "reasoning_tokens": 200})
    _log(store, 3, {"calls": 2})  # a backend that reports none: not counted as 0
    _log(store, 4, {"calls": 1}, model="plain")
    with store.transaction() as tx:  # a row whose usage is not JSON (and its facts row): counted as not reported
        bad = tx.insert("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, verdict_id, tenant)"
                        " VALUES ('compare_pair', 'default', 'm', '{}', '{}', '{not json', '[]', 1.0, 'bad-1', 'local')")
        tx.execute("INSERT INTO verdict_facts (verdict_id, part, created_at, tenant) VALUES (?, 0, 1.0, 'local')", [bad])
    written = _reasoning(store)
    assert written == {"m": {"mean": 400.0, "of": 2}, "plain": {"mean": None, "of": 0}}

    # a database from before m017: the columns gone, the migration not recorded; opened again, it is backfilled
    location = request.getfixturevalue("postgres_url") if store.dialect.name == "postgresql" else tmp_path / "judge.db"
    with store.transaction() as tx:
        for table in ("stats_groups", "verdict_facts"):
            tx.drop_column(table, "reasoning_tokens_sum")
            tx.drop_column(table, "reasoning_tokens_n")
        tx.execute("DELETE FROM _migrations WHERE name = 'm017_reasoning_tokens'")
    store.close()
    again = open_store(location, MIGRATIONS)
    try:
        assert _reasoning(again) == written
    finally:
        again.close()
