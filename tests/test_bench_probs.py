"""The bench's verdict-probability columns (ECE, Brier) and its adaptive-swap comparison, by hand and end to end over
a scripted judge that sends chosen log-probabilities (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest

from judge_mcp.bench import cli as bench_cli
from judge_mcp.bench import metrics, report
from judge_mcp.bench.methods import Options, method_key
from tests.scripted import Reply
from tests.test_bench import PAIRS, bench, correct_judge, good_first, last_user, schema_name
from tests.test_pair_probs import logprob_content


def biased_prob_judge(payload: dict[str, Any]) -> Reply:
    """Always names the first-shown answer better: P(first) = 0.9 when it is the good one, 0.6 when it is the bad one."""
    assert schema_name(payload) == "pairwise_verdict"
    p = 0.9 if good_first(last_user(payload)) else 0.6
    content = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})
    return Reply(content=content, logprobs=logprob_content(content, p))


# ---- by hand --------------------------------------------------------------------------------------------------------
def test_ece_and_brier_by_hand() -> None:
    # p_chosen 0.9 (right, confidence 0.9) x 2, 0.4 (wrong, confidence 0.6) x 2, one missing
    figures = metrics.probability_figures([0.9, 0.9, 0.4, 0.4, None])
    assert figures["n"] == 4 and figures["coverage"] == 0.8 and figures["accuracy"] == 0.5
    assert figures["ece"] == pytest.approx((2 * 0.1 + 2 * 0.6) / 4)
    assert figures["brier"] == pytest.approx((2 * 0.01 + 2 * 0.36) / 4)
    # one bin holding 0.71 and 0.79 (right, wrong): |0.5 - 0.75|
    assert metrics.ece([0.71, 0.79], [True, False]) == pytest.approx(0.25)
    assert metrics.ece([1.0], [True]) == 0.0  # confidence 1.0 falls in the last bin
    assert metrics.probability_figures([None, None]) == {"n": 0, "coverage": 0.0, "accuracy": None, "ece": None, "brier": None}


def test_method_key_names_the_adaptive_variant() -> None:
    assert method_key("grp", Options(adaptive_swap=True)) == "grp+auto"
    assert method_key("vanilla", Options(template="cot", adaptive_swap=True, swap_margin=0.3)) == "vanilla[cot]+auto0.3"
    assert method_key("flip", Options(adaptive_swap=True)) == "flip"


# ---- end to end -----------------------------------------------------------------------------------------------------
async def test_bench_reports_calibration_of_one_order_and_of_both(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path)
    c = summary["calibration"]
    assert c["bins"] == metrics.ECE_BINS
    # per placement: 0.9 (chosen first, right) and 0.4 (chosen second, wrong) on each of the 6 items
    one = c["single_order"]
    assert (one["n"], one["coverage"], one["accuracy"]) == (12, 1.0, 0.5)
    assert one["ece"] == pytest.approx(0.35) and one["brier"] == pytest.approx(0.185)
    # the mean of both orders: 0.65 for the chosen answer on every item, right with confidence 0.65
    both = c["both_orders"]
    assert (both["n"], both["accuracy"]) == (6, 1.0)
    assert both["ece"] == pytest.approx(0.35) and both["brier"] == pytest.approx(0.1225)
    assert one["p_first_shown"] == pytest.approx((0.9 + 0.6) / 2)  # the probability-level position bias
    assert summary["overall"]["pair_accuracy"] == 0.0  # the labels alone: always the first shown
    assert "adaptive" not in summary


async def test_without_log_probabilities_the_columns_are_null(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, correct_judge, PAIRS, "grp", tmp_path)
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
    assert o["accuracy"] == 1.0 and o["pair_accuracy"] == 0.0 and o["ties"] == 6  # the record's verdict is auto's
    # every request but the two distinct orders per item came from the call cache
    assert o["calls_per_item"] == 2.0 and len(server.requests) == 12

    tight, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path, db_name="b2.db", options=Options(adaptive_swap=True, swap_margin=0.9))
    assert tight["method_key"] == "grp+auto0.9" and tight["adaptive"]["second_order_share"] == 1.0
    assert tight["adaptive"]["auto"]["calls_per_judgment"] == 2.0

    page = report.render([summary])
    assert "swap auto vs swap true on the same 12 judgments" in page and "10-bin ECE" in page
    assert "calls/judgment 1.500 vs 2.000" in report.markdown([summary])
    assert "swap auto: second order in 0.500 of 12 judgments" in bench_cli.format_summary(summary)


@pytest.mark.parametrize(
    ("method", "extra", "message"),
    [
        ("flip", ["--adaptive-swap"], "--adaptive-swap applies to vanilla, grp and grp-better"),
        ("grp", ["--swap-margin", "0.3"], "--swap-margin is a number from 0 to 1, used with --adaptive-swap"),
        ("grp", ["--adaptive-swap", "--swap-margin", "1.5"], "--swap-margin is a number from 0 to 1"),
    ],
)
def test_cli_refuses_adaptive_options_it_cannot_apply(tmp_path, capsys, method: str, extra: list[str], message: str) -> None:
    parser = argparse.ArgumentParser()
    bench_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["bench", str(PAIRS), "--method", method, "--db", str(tmp_path / "b.db"), *extra])
    assert args.fn(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b.db").exists()  # refused before anything ran
