"""`judge-mcp bench --labels` for LWE: each item's gold label recorded on its learning verdict becomes label feedback
(when it contradicts the verdict), every label item is used by exactly one refinement, and the summary carries the
learning curve (accuracy per block of items) with and without labels. Scripted judges: plumbing, not learning."""

from __future__ import annotations

import json
from typing import Any

from judge_mcp.bench.methods import Options
from judge_mcp.bench.stored_runs import run_rows
from testkit.scripted_judges import first_shown_judge, first_user, schema_name
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.storage.sqlite import SqliteEngine
from tests.bench.datasets import PAIRS, bench


def second_shown_judge(payload: dict[str, Any]) -> str:
    """Position-biased the other way: LWE's verdicts name whatever is shown second (wrong on the learning placement)."""
    if schema_name(payload) in ("lwe_vanilla_verdict", "lwe_case_verdict"):
        return json.dumps({"explanation": "e", "verdict": "B"})
    return first_shown_judge(payload)


async def test_gold_labels_feed_the_session_and_each_label_item_is_used_once(scripted, tmp_path) -> None:
    labelled, server = await bench(scripted, second_shown_judge, PAIRS, "lwe", tmp_path, options=Options(labels=True))
    plain, _ = await bench(scripted, second_shown_judge, PAIRS, "lwe", tmp_path)
    assert labelled["method_key"] == "lwe+labels" and plain["method_key"] == "lwe"
    assert labelled["lwe"]["label_feedback"] == 6 and plain["lwe"]["label_feedback"] == 0
    assert [b["items"] for b in labelled["lwe"]["learning_curve"]] == [[1, 2], [3, 4], [5, 6]]  # 6 items in blocks of ceil(6 / 5)
    assert all(b["accuracy"] == 0.5 for b in plain["lwe"]["learning_curve"])  # right in the swapped placement only

    store = SqliteEngine(tmp_path / "bench.db")
    try:
        sessions = {s["name"]: LweRepository(store).feedback(s["name"]) for s in LweRepository(store).sessions()}
        rows = run_rows(store, labelled["dataset"], labelled["method_key"], labelled["backend_key"])
    finally:
        store.close()
    assert len(sessions) == 2  # one session per run
    by_source = {name: sorted(f["source"] for f in items) for name, items in sessions.items()}
    assert sorted(by_source.values()) == [["label"] * 6 + ["self"] * 6, ["self"] * 6]
    label_items = [f for items in sessions.values() for f in items if f["source"] == "label"]
    assert all(f["status"] == "used" and f["used_in_version"] for f in label_items)  # the last partial batch too
    assert len({f["verdict_id"] for f in label_items}) == 6
    done = [r for r in rows if r["status"] == "done"]  # the degenerate item is skipped
    fed: dict[str, set] = {r["placement"]: set() for r in done}
    for r in done:
        fed[r["placement"]].add(r["record"]["detail"]["label_feedback"])
    assert fed == {"chosen_first": {True}, "chosen_second": {None}}  # the learning placement's verdict only
    refines = [first_user(p) for p in server.requests if first_user(p).startswith("Optimize your current meta prompt")]
    assert refines and any("corrected by a human label" in text for text in refines)
