"""The bench's records and metrics as pure functions, checked by hand: placement and single records, the summary
(accuracy, pair accuracy, consistency, position bias, JudgeBench's score, single-order figures), Grade Score means,
cumulative accuracy, ECE and Brier, and the method keys runs are stored under."""

from __future__ import annotations

from typing import Any

import pytest

from judge_mcp.stats import calibration
from judge_mcp.bench import metrics
from judge_mcp.bench.methods import Options, method_key, placement_record, single_record


def test_placement_record_maps_shown_order_back_to_chosen():
    assert placement_record("chosen_first", "A") | {} == {
        "shown_first": "chosen", "named": "first", "names": "chosen", "correct": True,
        "parse_failures": 0, "verdicts": 1, "parsed_verdicts": 1, "first_shown_picks": 1, "tie": False,
    }
    second = placement_record("chosen_second", "A")  # the rejected answer was shown first and picked
    assert (second["names"], second["correct"], second["first_shown_picks"]) == ("rejected", False, 1)
    assert placement_record("chosen_second", "B")["correct"] is True
    unparsed = placement_record("chosen_first", None)
    assert (unparsed["correct"], unparsed["parse_failures"], unparsed["parsed_verdicts"], unparsed["names"]) == (False, 1, 0, None)


def test_single_record_counts_ties_and_parse_failures_as_wrong():
    assert single_record(0, 0, [], 0, 2)["correct"] is True
    tie = single_record(0, None, [0, 1], 0, 2)
    assert tie["tie"] and not tie["correct"]
    assert single_record(0, 0, [], 1, 2)["correct"] is False  # gold ranked first only because the other was unparsed
    assert single_record(2, 1, [], 0, 4)["correct"] is False


def _row(item: str, placement: str, record: dict, seq: int = 0, category: str = "c") -> dict:
    return {"item_id": item, "placement": placement, "seq": seq, "category": category, "status": "done", "record": record}


def _cost(**extra: Any) -> dict:
    return {"calls": 1, "cached_calls": 0, "prompt_tokens": 10, "completion_tokens": 5, "started_at": 100.0, "ended_at": 102.0, **extra}


def test_summarise_pairwise_by_hand():
    rows = [
        # i1: right in both placements
        _row("i1", "chosen_first", placement_record("chosen_first", "A") | _cost(), 0, "x"),
        _row("i1", "chosen_second", placement_record("chosen_second", "B") | _cost(), 0, "x"),
        # i2: always the first-shown answer (right once, inconsistent)
        _row("i2", "chosen_first", placement_record("chosen_first", "A") | _cost(), 1, "y"),
        _row("i2", "chosen_second", placement_record("chosen_second", "A") | _cost(), 1, "y"),
        # i3: first placement unparsed, second wrong
        _row("i3", "chosen_first", placement_record("chosen_first", None) | _cost(), 2, "y"),
        _row("i3", "chosen_second", placement_record("chosen_second", "A") | _cost(), 2, "y"),
        # i4: only one placement stored so far (incomplete), i5 degenerate, i6 failed
        _row("i4", "chosen_first", placement_record("chosen_first", "A") | _cost(), 3, "y"),
        {"item_id": "i5", "placement": "single", "seq": 4, "category": "y", "status": "skipped", "record": None},
        {"item_id": "i6", "placement": "chosen_first", "seq": 5, "category": "y", "status": "error", "record": None, "error": "boom"},
    ]
    s = metrics.summarise(rows, ("chosen_first", "chosen_second"), "grp")
    o = s["overall"]
    assert o["n"] == 3
    assert o["first_order_accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert o["pair_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert o["consistency"] == pytest.approx(1 / 3, abs=1e-4)
    # parsed verdicts: 5; naming the first shown: i1 first, i2 both, i3 second -> 4/5
    assert o["position_bias"] == pytest.approx(0.8)
    assert o["parse_failures"] == 1 and o["calls_per_item"] == 2.0 and o["tokens_per_item"] == 30.0
    assert o["seconds_per_item"] == 2.0  # placements overlap: wall time of the item, not the sum
    assert (s["skipped_degenerate"], s["errors"], s["incomplete"]) == (1, 1, 1)
    assert s["categories"]["x"]["n"] == 1 and s["categories"]["y"]["first_order_accuracy"] == 0.5


# the accuracy definitions beside the papers'
def _placed(placement: str, winner: str | None, tie: bool = False) -> dict:
    return placement_record(placement, winner, tie)


@pytest.mark.parametrize(
    "first, second, right",
    [
        (("A", False), ("B", False), True),  # both placements name the chosen answer
        (("A", False), (None, True), True),  # right and a tie: the non-tie decides
        ((None, False), ("B", False), True),  # unparsed and right: the parsed one decides
        (("A", False), ("A", False), False),  # inconsistent (right, then wrong): +1 - 1 = 0
        ((None, True), (None, True), False),  # tie and tie
        (("B", False), (None, True), False),  # wrong and a tie
        (("B", False), ("A", False), False),  # both wrong
    ],
)
def test_judgebench_score_follows_its_rule(first, second, right):
    records = [_placed("chosen_first", *first), _placed("chosen_second", *second)]
    assert metrics.judgebench_right(records) is right


def test_single_order_placement_is_seeded_per_item():
    ids = [f"item-{k}" for k in range(400)]
    draws = [metrics.placement_for(i) for i in ids]
    assert draws == [metrics.placement_for(i) for i in ids]  # the same item always gets the same placement
    assert 150 < sum(draws) < 250  # about half the items use the swapped placement
    assert [metrics.placement_for(i, seed=1) for i in ids] != draws  # a different seed draws differently


def test_summary_reports_single_order_judgebench_and_reasked_beside_pair_accuracy():
    rows = []
    for k in range(8):  # a judge that always names the first-shown answer; the first item's verdict was re-asked
        rows.append(_row(f"i{k}", "chosen_first", placement_record("chosen_first", "A") | _cost(reasked=k == 0), k))
        rows.append(_row(f"i{k}", "chosen_second", placement_record("chosen_second", "A") | _cost(), k))
    o = metrics.summarise(rows, ("chosen_first", "chosen_second"), "grp")["overall"]
    expected = sum(metrics.placement_for(f"i{k}") == 0 for k in range(8)) / 8
    assert o["accuracy"] == 0.5 and o["first_order_accuracy"] == 1.0 and o["pair_accuracy"] == 0.0 and o["judgebench_score"] == 0.0
    assert o["single_order_accuracy"] == pytest.approx(expected, abs=1e-4)
    assert o["reasked_verdicts"] == 1


def test_grade_score_mean_counts_items_without_a_parsed_trial_as_zero():
    """The Grade Score authors' code averages 0.0 for an item whose trials all failed to parse."""
    def grade_row(k: int, score: float | None, parsed: int) -> dict:
        record = {"predicted": 0 if parsed else None, "tie": False, "correct": bool(parsed), "parse_failures": 3 - parsed,
                  "verdicts": 3, "parsed_verdicts": parsed, "first_shown_picks": 0, "consistent": None,
                  "detail": {"grade_score": score, "llm_score": score, "choice_score": score}} | _cost()
        return _row(f"g{k}", "single", record, k)

    s = metrics.summarise([grade_row(0, 0.9, 3), grade_row(1, 0.5, 3), grade_row(2, None, 0)], ("single",), "grade")
    assert s["grade"]["mean_grade_score"] == pytest.approx((0.9 + 0.5 + 0.0) / 3, abs=1e-4)
    assert s["grade"]["mean_llm_score"] == pytest.approx(1.4 / 3, abs=1e-4)
    assert s["grade"]["items_without_parsed_trial"] == 1


def test_cumulative_accuracy():
    assert metrics.cumulative([True, False, True, True]) == [1.0, 0.5, 2 / 3, 0.75]  # unrounded
    assert metrics.cumulative([]) == []


# ---- verdict probabilities: ECE and Brier ---------------------------------------------------------------------------
def test_ece_and_brier_by_hand() -> None:
    # p_chosen 0.9 (right, confidence 0.9) x 2, 0.4 (wrong, confidence 0.6) x 2, one missing
    figures = calibration.probability_figures([0.9, 0.9, 0.4, 0.4, None])
    assert figures["n"] == 4 and figures["coverage"] == 0.8 and figures["accuracy"] == 0.5
    assert figures["ece"] == pytest.approx((2 * 0.1 + 2 * 0.6) / 4)
    assert figures["brier"] == pytest.approx((2 * 0.01 + 2 * 0.36) / 4)
    # one bin holding 0.71 and 0.79 (right, wrong): |0.5 - 0.75|
    assert calibration.ece([0.71, 0.79], [True, False]) == pytest.approx(0.25)
    assert calibration.ece([1.0], [True]) == 0.0  # confidence 1.0 falls in the last bin
    assert calibration.probability_figures([None, None]) == {"n": 0, "coverage": 0.0, "accuracy": None, "ece": None, "brier": None}


def test_method_key_names_the_adaptive_variant() -> None:
    assert method_key("grp", Options(adaptive_swap=True)) == "grp+auto"
    assert method_key("vanilla", Options(template="cot", adaptive_swap=True, swap_margin=0.3)) == "vanilla[cot]+auto0.3"
    assert method_key("flip", Options(adaptive_swap=True)) == "flip"
