"""Every bench method end to end over scripted OpenAI-compatible judges (real HTTP on 127.0.0.1) on the small
fixtures (tests/bench/datasets.py): what a right judge, a position-biased one and a garbled one score; re-asks and
--no-reask; LWE as in its paper (item order, buffer, cost); verdict probabilities (calibration, adaptive swap); and
one run on the embedded model."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from judge_mcp.bench import command as bench_cli
from judge_mcp.stats import calibration, intervals
from judge_mcp.bench.methods import Options
from judge_mcp.bench.stored_runs import run_rows
from judge_mcp.bench.runner import BenchError, RunSpec, run
from judge_mcp.bench import html_report as report
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.storage.lwe_sessions import LweRepository
from tests.helpers import make_app
from testkit.scripted_judges import first_shown_judge, first_user, logprob_content, schema_name
from tests.bench.datasets import ITEM_TOKEN, LISTS, PAIRS, bench, good_first, right_judge
from testkit.scripted_servers import Reply, prompt_text


PAIR_METHODS = ["vanilla", "grp", "grp-better", "arena-hard", "lwe", "selective-lwe"]


@pytest.mark.parametrize("method", PAIR_METHODS)
async def test_first_shown_judge_scores_pair_accuracy_zero(scripted, tmp_path, method):
    summary, _ = await bench(scripted, first_shown_judge, PAIRS, method, tmp_path)
    o = summary["overall"]
    assert o["n"] == 6 and summary["skipped_degenerate"] == 1
    assert o["first_order_accuracy"] == 1.0  # the chosen answer was shown first in the first placement
    assert o["accuracy"] == 0.5  # the mean of the two orders: right in one of them
    assert o["pair_accuracy"] == 0.0
    assert o["consistency"] == 0.0
    assert o["position_bias"] == 1.0
    assert o["length_preference"] == 0.5  # the chosen (longer) response first, then the rejected one: half each
    assert o["parse_failures"] == 0


@pytest.mark.parametrize("method", PAIR_METHODS + ["flip", "pointwise", "grade"])
async def test_correct_judge_scores_one_on_pairs(scripted, tmp_path, method):
    summary, server = await bench(scripted, right_judge, PAIRS, method, tmp_path)
    o = summary["overall"]
    assert (o["n"], o["accuracy"], o["pair_accuracy"]) == (6, 1.0, 1.0)
    assert summary["categories"]["alpha"]["n"] == 3 and summary["categories"]["beta"]["n"] == 3
    assert o["parse_failures"] == 0 and o["ties"] == 0
    assert o["calls_per_item"] > 0 and o["tokens_per_item"] > 0
    assert not any("same text" in prompt_text(p) for p in server.requests)  # the degenerate item was never sent
    # the fixture's chosen responses are the longer ones: a correct judge always names the longer, as often as the
    # gold does (response-wise methods too: their single pick of the pair)
    assert (o["length_preference"], o["length_gold_share"], o["length_bias"]) == (1.0, 1.0, 0.0)
    if method in PAIR_METHODS or method == "grade":
        assert o["consistency"] == 1.0 and o["position_bias"] == 0.5
    else:
        assert o["consistency"] is None and o["position_bias"] is None
    if method in ("lwe", "selective-lwe"):
        assert summary["lwe"]["cumulative_accuracy"] == [1.0] * 6
        expected_share = 1.0 if method == "lwe" else 0.0  # a consistent vanilla pair never takes the meta path
        assert summary["lwe"]["meta_path_share"] == expected_share
    if method == "selective-lwe":
        assert summary["lwe"]["vanilla_fig9"]["pair_accuracy"] == 1.0


@pytest.mark.parametrize("method, options", [("flip", Options()), ("pointwise", Options()), ("grade", Options()), ("grade", Options(unrelated=True))])
async def test_correct_judge_scores_one_on_lists(scripted, tmp_path, method, options):
    summary, _ = await bench(scripted, right_judge, LISTS, method, tmp_path, options=options)
    assert summary["overall"]["n"] == 4 and summary["overall"]["accuracy"] == 1.0
    if options.unrelated:
        assert summary["method_key"] == "grade+unrelated"
        assert summary["grade"]["unrelated_pick_rate"] == 0.0


async def test_biased_grade_on_lists_is_caught_by_rotation(scripted, tmp_path):
    summary, _ = await bench(scripted, first_shown_judge, LISTS, "grade", tmp_path)
    o = summary["overall"]
    # every option is picked once: a tied mode on every item, so none is right
    assert o["accuracy"] == 0.0 and o["ties"] == 4 and o["position_bias"] == 1.0
    assert summary["grade"]["mean_llm_score"] == 0.0


async def test_ties_and_parse_failures_count_as_wrong(scripted, tmp_path):
    def constant(payload):  # every response gets the same rating: every pair is a tie
        return json.dumps({"REASONING": "meh", "SCORE": "5"})

    summary, _ = await bench(scripted, constant, PAIRS, "pointwise", tmp_path, db_name="a.db")
    assert summary["overall"]["ties"] == 6 and summary["overall"]["accuracy"] == 0.0

    def garbage(payload):
        return "I would rather not say."

    summary, server = await bench(scripted, garbage, PAIRS, "grp", tmp_path, db_name="b.db")
    o = summary["overall"]
    assert o["accuracy"] == 0.0 and o["pair_accuracy"] == 0.0 and o["consistency"] == 0.0
    assert o["parse_failures"] == 12 and o["position_bias"] is None
    assert len(server.requests) == 24  # each single-order judgment asked once and re-asked once

    summary, _ = await bench(scripted, garbage, LISTS, "flip", tmp_path, db_name="c.db")
    assert summary["overall"]["accuracy"] == 0.0 and summary["overall"]["parse_failures"] == 14


async def test_pairwise_method_refuses_a_listwise_set(scripted, tmp_path):
    with pytest.raises(BenchError, match="listwise"):
        await bench(scripted, right_judge, LISTS, "grp", tmp_path)


@pytest.mark.model
async def test_bench_on_the_embedded_model(tmp_path):
    """One fixture pair, pointwise, on the bundled SmolLM2: the harness runs end to end on the local backend."""
    app = make_app({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_DB": str(tmp_path / "judge.db")}, store=SqliteEngine(tmp_path / "bench.db"))
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="pointwise", limit=1), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    assert summary["model"].startswith("local/") and summary["errors"] == 0
    assert summary["overall"]["n"] == 1 and summary["overall"]["calls_per_item"] >= 2
    assert summary["overall"]["completion_tokens_per_item"] > 0


@pytest.mark.parametrize("method", ["grp", "selective-lwe"])
async def test_no_reask_counts_unparsed_first_answers_wrong(scripted, tmp_path, method):
    """By default a verdict that only parsed after the re-ask counts (and is reported); --no-reask is the
    papers' rule, stored under its own method key in the same database."""
    def garbled_first(payload):
        if not any(m["role"] == "assistant" for m in payload["messages"]):
            return "I would rather not say."
        return right_judge(payload)

    server = scripted(garbled_first)
    lenient, _ = await bench(scripted, None, PAIRS, method, tmp_path, server=server)
    assert lenient["overall"]["pair_accuracy"] == 1.0 and lenient["overall"]["reasked_verdicts"] == 12
    strict, _ = await bench(scripted, None, PAIRS, method, tmp_path, server=server, options=Options(no_reask=True))
    assert strict["method_key"] == f"{method}+strict"
    assert strict["overall"]["pair_accuracy"] == 0.0 and strict["overall"]["reasked_verdicts"] == 0
    if method == "grp":
        assert strict["overall"]["parse_failures"] == 12
    store = SqliteEngine(tmp_path / "bench.db")
    try:
        methods = {r["method"] for r in store.query("SELECT DISTINCT method FROM bench_results")}
    finally:
        store.close()
    assert methods == {method, f"{method}+strict"}  # stored apart: neither run reuses the other's verdicts


# ---- LWE as in the paper ------------------------------------------------------------------------------------
async def test_lwe_bench_follows_the_papers_protocol(scripted, tmp_path):
    """Items one at a time in file order; only the chosen-first judgment feeds the buffer; the swapped placement
    is judged with the meta-prompt current at that point; the last partial batch is refined at the end."""
    summary, server = await bench(scripted, first_shown_judge, PAIRS, "selective-lwe", tmp_path, app_concurrency=4)
    # the order requests were sent in follows the file: p1's calls all come before p2's, and so on
    judged = [p for p in server.requests if not first_user(p).startswith("Optimize your current meta prompt")]  # refines quote old items
    order = [m.group(2) for p in judged if (m := ITEM_TOKEN.search(first_user(p)))]
    firsts = [order.index(k) for k in ("p1", "p2", "p3", "p4", "p5", "p6")]
    lasts = [len(order) - 1 - order[::-1].index(k) for k in ("p1", "p2", "p3", "p4", "p5", "p6")]
    assert all(lasts[k] < firsts[k + 1] for k in range(5))

    store = SqliteEngine(tmp_path / "bench.db")
    try:
        rows = run_rows(store, summary["dataset"], summary["method_key"], summary["backend_key"])
        versions = {(r["item_id"], r["placement"]): r["record"]["detail"]["meta_prompt_version"] for r in rows if r["status"] == "done"}
        session = f"{next(iter(LweRepository(store).sessions()))['name']}"
        feedback = LweRepository(store).feedback(session)
        history = LweRepository(store).versions(session)
    finally:
        store.close()
    # the 4th learning judgment filled the batch (b=4) and refined v1 -> v2: p4's swapped placement already uses v2
    assert versions == {
        **{(f"p{k}", "chosen_first"): 1 for k in (1, 2, 3, 4)},
        **{(f"p{k}", "chosen_second"): 1 for k in (1, 2, 3)},
        ("p4", "chosen_second"): 2,
        **{(f"p{k}", p): 2 for k in (5, 6) for p in ("chosen_first", "chosen_second")},
    }
    assert len(feedback) == 6 and all(f["status"] == "used" for f in feedback)  # 6 learning judgments, not 12
    assert [h["reason"] for h in history] == ["initial", "refine", "refine"]  # the last 2 items refined at the end
    assert summary["lwe"]["final_refinement"]["items"] == 2 and summary["lwe"]["final_refinement"]["versions"] == [3]
    assert summary["lwe"]["last_meta_prompt_version"] == 3
    assert len(summary["lwe"]["cumulative_accuracy"]) == 6


async def test_lwe_cost_is_relative_to_one_vanilla_judgment(scripted, tmp_path):
    """Characters of prompts and completions relative to one vanilla (Figure 9) judgment of the item. A
    judge that is consistent on every vanilla pair costs exactly the pair, 2x."""
    consistent, _ = await bench(scripted, right_judge, PAIRS, "selective-lwe", tmp_path, db_name="c.db")
    assert consistent["lwe"]["relative_cost"] == 2.0 and consistent["lwe"]["relative_cost_with_scoring"] == 2.0
    biased, _ = await bench(scripted, first_shown_judge, PAIRS, "selective-lwe", tmp_path, db_name="b.db")
    assert biased["lwe"]["relative_cost"] > 2.0
    assert biased["lwe"]["relative_cost_with_scoring"] > biased["lwe"]["relative_cost"]
    assert biased["overall"]["chars_per_item"] > consistent["overall"]["chars_per_item"]


# ---- verdict probabilities (ECE, Brier) and adaptive swap ------------------------------------------------------------
def biased_prob_judge(payload: dict[str, Any]) -> Reply:
    """Always names the first-shown answer better: P(first) = 0.9 when it is the good one, 0.6 when it is the bad one."""
    assert schema_name(payload) == "pairwise_verdict"
    p = 0.9 if good_first(first_user(payload)) else 0.6
    content = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})
    return Reply(content=content, logprobs=logprob_content(content, p))


async def test_bench_reports_calibration_of_one_order_and_of_both(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path)
    c = summary["calibration"]
    assert c["bins"] == calibration.ECE_BINS
    # per placement: 0.9 (chosen first, right) and 0.4 (chosen second, wrong) on each of the 6 items
    one = c["single_order"]
    assert (one["n"], one["coverage"], one["accuracy"]) == (12, 1.0, 0.5)
    assert one["ece"] == pytest.approx(0.35) and one["brier"] == pytest.approx(0.185)
    # the mean of both orders: 0.65 for the chosen answer on every item, right with confidence 0.65
    both = c["both_orders"]
    assert (both["n"], both["accuracy"]) == (6, 1.0)
    assert both["ece"] == pytest.approx(0.35) and both["brier"] == pytest.approx(0.1225)
    assert one["p_first_shown"] == pytest.approx((0.9 + 0.6) / 2)  # the probability-level position bias
    # their intervals: Wilson for the accuracy (6 of 12), a bootstrap over the 12 judgments for ECE and Brier; the 6
    # both-order means are too few for a bootstrap
    assert one["ci"]["accuracy"] == pytest.approx(list(intervals.wilson(6, 12)))
    assert one["ci"]["ece"][0] <= 0.35 <= one["ci"]["ece"][1] and one["ci"]["brier"][0] <= 0.185 <= one["ci"]["brier"][1]
    assert both["ci"]["ece"] == intervals.too_few(6) and both["ci"]["accuracy"] == pytest.approx(list(intervals.wilson(6, 6)))
    assert summary["overall"]["pair_accuracy"] == 0.0  # the labels alone: always the first shown
    assert "adaptive" not in summary


async def test_without_log_probabilities_the_columns_are_null(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, right_judge, PAIRS, "grp", tmp_path)
    c = summary["calibration"]
    assert c["single_order"]["coverage"] == 0.0 and c["single_order"]["ece"] is None and c["both_orders"]["brier"] is None


async def test_adaptive_swap_beside_swap_true_on_the_same_items(scripted, tmp_path) -> None:
    summary, server = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path, options=Options(adaptive_swap=True))
    assert summary["method_key"] == "grp+auto"
    a = summary["adaptive"]
    assert a["judgments"] == 12 and a["second_order_share"] == 0.5
    # chosen first: P = 0.9, margin 0.8 >= 0.5, one order, right; chosen second: P = 0.6, margin 0.2, both orders
    # judged, they disagree (each names the first shown): no winner, wrong
    assert a["auto"] == {"calls_per_judgment": 1.5, "accuracy": 0.5, "pair_accuracy": 0.0}
    assert a["swap_true"] == {"calls_per_judgment": 2.0, "accuracy": 0.0, "pair_accuracy": 0.0}
    assert (a["one_order_judgments"], a["one_order_accuracy"]) == (6, 1.0)
    assert a["single_order"] == {"position_bias": 1.0, "pair_accuracy": 0.0}  # the plain verdicts: always the first
    o = summary["overall"]
    assert (o["first_order_accuracy"], o["accuracy"], o["pair_accuracy"], o["ties"]) == (1.0, 0.5, 0.0, 6)  # the record's verdict is auto's
    # every request but the two distinct orders per item came from the call cache
    assert o["calls_per_item"] == 2.0 and len(server.requests) == 12

    tight, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path, db_name="b2.db", options=Options(adaptive_swap=True, swap_margin=0.9))
    assert tight["method_key"] == "grp+auto0.9" and tight["adaptive"]["second_order_share"] == 1.0
    assert tight["adaptive"]["auto"]["calls_per_judgment"] == 2.0

    page = report.render([summary])
    assert "swap auto vs swap true on the same 12 judgments" in page and "10-bin ECE" in page
    assert "calls/judgment 1.500 vs 2.000" in report.markdown([summary])
    assert "swap auto: second order in 0.500 of 12 judgments" in bench_cli.format_summary(summary)
