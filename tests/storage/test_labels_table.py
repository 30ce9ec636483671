"""The labels table on both engines: a label only for a verdict that is in the log, a second one replacing the first,
read back joined with its verdict a page at a time, the `last` window's first row, and retention deleting a verdict's
label with it; the verdicts' ids are unique. Also the pure figures (agreement.py) on a case computed by hand."""

from __future__ import annotations

import time

import pytest

from judge_mcp.stats import agreement, report as stats
from judge_mcp.cli import stats_table as stats_text
from judge_mcp.storage import retention
from judge_mcp.storage.engine import StoreError
from judge_mcp.storage.label_rows import LabelTable
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines


def _verdict(store, k: int, winner: str | None, p_a: float | None = None, **inputs) -> str:
    verdict_id = f"{k:032x}"
    output = {"winner": winner, "trials": [], **({"p_better": {"A": p_a, "B": 1 - p_a}} if p_a is not None else {})}
    VerdictLog(store).log("compare_pair", "default", "m", {"response_a": "a", "response_b": "b", **inputs}, output, {}, [], verdict_id=verdict_id)
    return verdict_id


@on_both_engines
def test_labels_are_kept_for_logged_verdicts_replaced_and_read_with_them(store) -> None:
    ids = [_verdict(store, k, "A" if k % 2 else "B", p_a=0.8) for k in range(1, 6)]
    table = LabelTable(store)
    assert table.put("f" * 32, "compare_pair", "A", "text", None) is None  # no such verdict: nothing stored
    assert table.put(ids[0], "compare_pair", "B", "text", "first") is False
    assert table.put(ids[0], "compare_pair", "A", "text", None) is True  # replaced
    assert table.put(ids[3], "compare_pair", "tie", "text", None) is False
    rows = [*table.page(limit=1), *table.page(after=ids[0], limit=5)]
    assert [(r["verdict_id"], r["label"], r["tool"], r["backend"]) for r in rows] == [
        (ids[0], "A", "compare_pair", "default"), (ids[3], "tie", "compare_pair", "default")]
    assert store.query("SELECT COUNT(*) AS n FROM labels")[0]["n"] == 2
    newest = store.query("SELECT id FROM verdicts ORDER BY id")
    assert table.first_of_newest(2) == newest[3]["id"] and table.first_of_newest(100) is None
    report = stats.from_store(store, last=2)
    group = report.all_time.groups[0].agreement
    assert group.labelled == 2 and group.accuracy.count == 1 and group.calibration.of == 1 and group.calibration.n == 1
    assert report.last.groups[0].agreement.labelled == 1  # only ids[3] is among the newest two
    text = stats_text.render_stats(report)  # `judge-mcp stats`: a table of its own, only with labels
    assert "agreement with human labels" in text and "0.50 (1/2)" in text.split("agreement with human labels")[1]


@on_both_engines
def test_a_verdict_id_is_unique(store) -> None:
    _verdict(store, 1, "A")
    with pytest.raises(StoreError):
        _verdict(store, 1, "B")
    VerdictLog(store).log("compare_pair", "b", "m", {}, {}, {}, [])  # rows without an id (older ones) are many
    VerdictLog(store).log("compare_pair", "b", "m", {}, {}, {}, [])
    assert store.query("SELECT COUNT(*) AS n FROM verdicts WHERE verdict_id IS NULL")[0]["n"] == 2


@on_both_engines
def test_retention_deletes_a_verdicts_label_with_it(store) -> None:
    old, new = _verdict(store, 1, "A"), _verdict(store, 2, "B")
    for verdict_id in (old, new):
        LabelTable(store).put(verdict_id, "compare_pair", "A", "text", None)
    with store.transaction() as tx:
        tx.execute("UPDATE verdicts SET created_at = ? WHERE verdict_id = ?", [time.time() - 10 * 86400, old])
    counts = retention.gc(store, verdicts_older_than_s=5 * 86400)
    assert counts == {"call_cache": 0, "verdicts": 1, "labels": 1, "texts": 0}
    assert [r["verdict_id"] for r in store.query("SELECT verdict_id FROM labels")] == [new]


def test_kappa_and_the_figures_by_hand() -> None:
    # perfect agreement over two categories: 1; agreement no better than chance: 0; one category only: undefined
    assert agreement.kappa([("A", "A"), ("B", "B")]) == 1.0
    assert agreement.kappa([("A", "A"), ("A", "B"), ("B", "A"), ("B", "B")]) == 0.0
    assert agreement.kappa([("A", "A"), ("A", "A")]) is None and agreement.kappa([]) is None
    # p_o = 1/4; p_e = (3*2 + 1*2) / 16 = 1/2: (1/4 - 1/2) / (1 - 1/2)
    assert agreement.kappa([("A", "A"), ("A", "B"), ("A", "B"), ("B", "A")]) == pytest.approx(-0.5)
    tally = agreement.Tally()
    for answer, label, p in (("A", "A", 0.7), ("B", "A", 0.4), ("tie", "B", 0.5), ("A", "tie", None)):
        tally.add(answer, label, p, ab=label in ("A", "B"))
    figures = tally.figures()
    assert figures.labelled == 4 and figures.accuracy.rate == 0.25
    # Brier over the A/B labels: (0.3^2 + 0.6^2 + 0.5^2) / 3; ECE: confidences 0.7 (right), 0.6 (wrong), 0.5 (half):
    # three bins of one: (|1 - 0.7| + |0 - 0.6| + |0.5 - 0.5|) / 3
    assert figures.calibration.brier == pytest.approx(round((0.09 + 0.36 + 0.25) / 3, 4))
    assert figures.calibration.ece == pytest.approx(0.3) and figures.calibration.n == 3 == figures.calibration.of


def test_a_panel_verdict_counts_for_each_member_that_judged() -> None:
    row = {"tool": "compare_pair", "backend": "a+b", "model": "panel", "inputs": "text", "label": "B", "id": 1, "output": {
        "winner": "B", "p_better": None, "panel": [
            {"backend": "a", "model": "ma", "status": "ok", "winner": "B", "p_better": {"A": 0.2, "B": 0.8}},
            {"backend": "b", "model": "mb", "status": "ok", "winner": None},
            {"backend": "c", "model": "mc", "status": "failed"},
        ]}}
    everything, recent = agreement.tally([row], first_id=2)
    assert set(everything) == {("a+b", "panel", "compare_pair", "text"), ("a", "ma", "compare_pair", "text"), ("b", "mb", "compare_pair", "text")}
    assert everything[("a", "ma", "compare_pair", "text")].figures().calibration.brier == pytest.approx(0.04)
    assert everything[("b", "mb", "compare_pair", "text")].figures().accuracy.count == 0  # no winner answers "tie"
    assert recent == {}  # the row is older than the window


def test_verdicts_logged_before_the_ids_keep_their_rows_without_one(tmp_path) -> None:
    from judge_mcp.storage.migrations import MIGRATIONS
    db = tmp_path / "judge.db"
    before = SqliteEngine(db, MIGRATIONS[:7])
    with before.transaction() as tx:
        tx.execute("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES ('compare_pair', 'b', 'm', '{}', '{}', '{}', '[]', 0)")
    before.close()
    after = SqliteEngine(db, MIGRATIONS)
    try:
        assert after.query("SELECT tool, verdict_id FROM verdicts") == [{"tool": "compare_pair", "verdict_id": None}]
        assert after.query("SELECT COUNT(*) AS n FROM labels")[0]["n"] == 0
    finally:
        after.close()


def test_the_stats_text_shows_no_agreement_table_without_labels(tmp_path) -> None:
    from judge_mcp.storage.sqlite import SqliteEngine

    store = SqliteEngine(tmp_path / "judge.db")
    try:
        _verdict(store, 1, "A")
        assert "agreement with human labels" not in stats_text.render_stats(stats.from_store(store))
    finally:
        store.close()


def test_a_tenants_labels_are_read_from_its_labels_not_by_a_probe_per_verdict_of_its_log(tmp_path) -> None:
    """judge_stats reads the labels on every call: the read starts from the tenant's labels (index labels_tenant),
    so its cost follows the labels, not the log (it once walked every verdict of the tenant, 16 ms at 20,000)."""
    from judge_mcp.storage.sqlite import SqliteEngine

    store = SqliteEngine(tmp_path / "j.db")
    try:
        ids = [_verdict(store, k, "A") for k in range(1, 40)]
        LabelTable(store).put(ids[5], "compare_pair", "A", "text", None)
        seen: list[tuple[str, list]] = []
        query = store.query
        store.query = lambda sql, params=(): seen.append((sql, list(params))) or query(sql, params)  # type: ignore[method-assign]
        assert [r["verdict_id"] for r in LabelTable(store).page()] == [ids[5]]
        sql, params = seen[-1]
        plan = [row["detail"] for row in query("EXPLAIN QUERY PLAN " + sql, params)]
        assert "labels_tenant" in plan[0] and "USING INDEX verdicts_tenant" not in " ".join(plan), plan
    finally:
        store.close()
