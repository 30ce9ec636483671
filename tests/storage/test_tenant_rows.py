"""Each tenant's rows (migrations.m013_tenants, tenants.py), on both engines: the option pool, labels, the verdict log
and its counters, and LWE sessions are kept per tenant; a database from before tenants gives its rows to
`tenants.legacy(engine)` and keeps every one of them."""

from __future__ import annotations

import pytest

from judge_mcp.stats import report as stats
from judge_mcp import tenants
from judge_mcp.storage import open_store
from judge_mcp.storage.engine import dumps
from judge_mcp.storage.label_rows import LabelTable
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.storage.migrations import MIGRATIONS, m012_verdict_stats
from judge_mcp.storage.option_pool import OptionPool
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines

PAIR_OUT = {"winner": "B", "trials": [{"order": "AB", "better": "B", "parse_ok": True}, {"order": "BA", "better": "B", "parse_ok": True}],
            "usage": {"calls": 2, "cached_calls": 0}}


@on_both_engines
def test_each_tenant_has_its_own_option_pool_labels_log_and_sessions(store) -> None:
    OptionPool(store, "a").add("Q1", ["x", "y"])
    OptionPool(store, "b").add("Q1", ["x"])  # the same option of the same instruction: stored once per tenant
    OptionPool(store, "b").add("Q2", ["z"])
    assert sorted(r["option"] for r in OptionPool(store, "a").others("Q0")) == ["x", "y"]
    assert sorted(r["option"] for r in OptionPool(store, "b").others("Q0")) == ["x", "z"]
    assert [r["option"] for r in OptionPool(store, "b").others("Q1")] == ["z"]

    VerdictLog(store).log("compare_pair", "b1", "m", {"prompt": "p"}, PAIR_OUT, PAIR_OUT["usage"], [], verdict_id="v-a", tenant="a")
    assert LabelTable(store, "b").verdict("v-a") is None and LabelTable(store, "b").put("v-a", "compare_pair", "A", "text", None) is None
    assert LabelTable(store, "a").put("v-a", "compare_pair", "B", "text", None) is False
    assert [row["verdict_id"] for row in LabelTable(store, "a").page()] == ["v-a"] and LabelTable(store, "b").page() == []
    assert [row["verdict_id"] for row in VerdictLog(store).recent(tenant="a")] == ["v-a"] and VerdictLog(store).recent(tenant="b") == []
    with tenants.acting("a"):
        assert stats.from_store(store).all_time.verdicts == 1
    with tenants.acting("b"):
        assert stats.from_store(store).all_time.verdicts == 0 and stats.from_store(store).all_time.groups == []

    LweRepository(store, "a").ensure_session("s", 4, "A's")
    LweRepository(store, "b").ensure_session("s", 2, "B's")
    assert (LweRepository(store, "a").session_row("s")["text"], LweRepository(store, "b").session_row("s")["text"]) == ("A's", "B's")
    LweRepository(store, "b").commit_version("s", expected_version=1, text="B's reset", reason="reset", discard_pending=True)
    assert LweRepository(store, "a").session_row("s")["current_version"] == 1
    assert [s["name"] for s in LweRepository(store, "a").sessions()] == ["s"] and LweRepository(store, "c").sessions() == []


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_rows_from_before_tenants_belong_to_the_legacy_tenant(engine, tmp_path, request) -> None:
    location = request.getfixturevalue("postgres_url") if engine == "postgresql" else tmp_path / "old.db"
    old = open_store(location, MIGRATIONS[: MIGRATIONS.index(m012_verdict_stats)])  # m012 backfills its counters, m013 their tenant
    with old.transaction() as tx:
        tx.execute(
            "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at, verdict_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ["compare_pair", "b1", "m", dumps({"prompt": "p"}), dumps(PAIR_OUT), dumps(PAIR_OUT["usage"]), "[]", 1.0, "v-old"],
        )
        tx.execute("INSERT INTO labels (verdict_id, tool, label, inputs, created_at, updated_at) VALUES ('v-old', 'compare_pair', 'B', 'text', 1, 1)")
        tx.execute("INSERT INTO option_pool (instruction_hash, instruction, option, created_at) VALUES ('old-hash', 'Q1', 'x', 1)")
        tx.execute("INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at) VALUES ('team', 1, 4, 1.0, 1.0)")
        tx.execute("INSERT INTO lwe_versions (session, version, reason, text, created_at) VALUES ('team', 1, 'initial', 'M0', 1.0)")
    old.close()
    store = open_store(location, MIGRATIONS)
    owner = tenants.legacy(store.dialect.name)
    assert owner == ("default" if engine == "postgresql" else "local")
    try:
        for tenant, mine in ((owner, True), ("someone-else", False)):
            assert (LabelTable(store, tenant).verdict("v-old") is not None) is mine
            assert bool(LabelTable(store, tenant).page()) is mine
            assert bool(OptionPool(store, tenant).others("Q0")) is mine
            assert (LweRepository(store, tenant).session_row("team") is not None) is mine
            with tenants.acting(tenant):
                assert stats.from_store(store).all_time.verdicts == (1 if mine else 0)
        OptionPool(store, owner).add("Q1", ["x"])  # re-keyed: the old row is this tenant's (Q1, x), not a second one
        assert len(OptionPool(store, owner).others("Q0")) == 1
        assert LweRepository(store, owner).session_row("team")["text"] == "M0"
    finally:
        store.close()
