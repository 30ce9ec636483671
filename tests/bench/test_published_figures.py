"""Figures for comparing against published judges (judge_mcp/bench/figures.py), by hand: the goal-reversed paper's
strict score beside JudgeBench's (--metric strict), and length bias beside the gold labels' own length share."""

from __future__ import annotations

import pytest

from judge_mcp.bench import command as bench_cli
from judge_mcp.bench import figures, metrics
from judge_mcp.bench.methods import placement_record
from testkit.scripted_judges import first_shown_judge
from tests.bench.datasets import PAIRS, bench, right_judge

PLACEMENTS = ("chosen_first", "chosen_second")


def _rows(verdicts: list[tuple[str | None, bool, str | None, bool]], longer: list[str | None] | None = None) -> list[dict]:
    """One item per tuple (first placement's winner, tie, second placement's winner, tie)."""
    rows = []
    for k, (w1, t1, w2, t2) in enumerate(verdicts):
        for placement, winner, tie in ((PLACEMENTS[0], w1, t1), (PLACEMENTS[1], w2, t2)):
            record = placement_record(placement, winner, tie) | {"calls": 1, "cached_calls": 0, "longer": (longer or [None] * 99)[k]}
            rows.append({"item_id": f"i{k}", "placement": placement, "seq": k, "category": "c", "status": "done", "record": record})
    return rows


def test_strict_score_needs_both_orders_right_and_counts_ties_and_degenerate_pairs_wrong():
    rows = _rows([
        ("A", False, "B", False),  # right in both placements: right under both rules
        ("A", False, None, True),  # right + tie: JudgeBench right, strict wrong
        (None, False, "B", False),  # unparsed + right: JudgeBench right, strict wrong
        ("A", False, "A", False),  # inconsistent: wrong under both
    ])
    rows.append({"item_id": "d", "placement": "single", "seq": 9, "category": "c", "status": "skipped", "record": None})
    o = metrics.summarise(rows, PLACEMENTS, "arena-hard")["overall"]
    assert o["judgebench_score"] == 3 / 5 and o["judgebench_n"] == 5
    assert o["strict_score"] == 1 / 5  # the degenerate pair is in the denominator, wrong
    assert o["pair_accuracy"] == 0.25  # over the judged pairs only


def test_metric_strict_prints_the_strict_score_beside_judgebench_s():
    base = [title for _, title in metrics.columns(None)]
    strict = [title for _, title in metrics.columns("strict")]
    assert "strict score" not in base
    assert strict[strict.index("JudgeBench score") + 1] == "strict score" and len(strict) == len(base) + 1
    row = {"n": 2, "judgebench_score": 0.75, "strict_score": 0.25}
    text = bench_cli.format_summary({"dataset": "d", "method_key": "arena-hard", "model": "m", "overall": row}, "strict")
    header, line = text.splitlines()[1:3]
    assert "JudgeBench score  strict score" in header and "0.750" in line and line.index("0.250") > line.index("0.750")
    assert "strict score" not in bench_cli.format_summary({"dataset": "d", "method_key": "x", "model": "m", "overall": row})


def test_metric_option_parses_and_refuses_unknown_values(capsys):
    parser = bench_cli.argparse.ArgumentParser()
    figures.add_options(parser)
    assert parser.parse_args(["--metric", "strict"]).metric == "strict"
    assert parser.parse_args([]).metric == "judgebench"
    with pytest.raises(SystemExit):
        parser.parse_args(["--metric", "lenient"])
    assert "invalid choice: 'lenient'" in capsys.readouterr().err


def test_length_bias_is_the_excess_over_the_gold_labels_length_share():
    # four pairs; the chosen answer is the longer one in the first three, the rejected one in the last
    longer = ["chosen", "chosen", "chosen", "rejected"]
    always_right = _rows([("A", False, "B", False)] * 4, longer)
    o = metrics.summarise(always_right, PLACEMENTS, "grp")["overall"]
    assert (o["length_preference"], o["length_gold_share"], o["length_bias"]) == (0.75, 0.75, 0.0)
    # always the longer answer: chosen-longer pairs right, the last pair wrong in both placements
    always_longer = _rows([("A", False, "B", False)] * 3 + [("B", False, "A", False)], longer)
    o = metrics.summarise(always_longer, PLACEMENTS, "grp")["overall"]
    assert (o["length_preference"], o["length_gold_share"], o["length_bias"]) == (1.0, 0.75, 0.25)
    # always the shorter one; unparsed and tie verdicts and equal lengths are left out of all three
    shorter = _rows([("B", False, "A", False)] * 3 + [("A", False, None, True), (None, False, None, True)], longer + [None])
    o = metrics.summarise(shorter, PLACEMENTS, "grp")["overall"]
    # decided on differing lengths: 6 (items 0-2) + 1 (item 3, first placement: chosen, the shorter) = 7
    assert o["length_preference"] == 0.0 and o["length_gold_share"] == 6 / 7 and o["length_bias"] == -6 / 7


def test_response_wise_methods_on_pairs_count_their_pick_for_length_bias():
    """flip, pointwise and grade pick one response of the pair (`predicted`, 0: the chosen one): that pick counts as the
    verdict's named response; no pick (an unparsed response, a tie) and equal lengths are left out."""
    from judge_mcp.bench.methods import single_record

    longer = ["chosen", "chosen", "rejected", "rejected", "rejected", None]
    picks = [0, 0, 1, 1, None, 1]  # always the longer: right on 0-1, wrong on 2-3; no pick on 4; equal lengths on 5
    rows = []
    for k, (pick, side) in enumerate(zip(picks, longer)):
        record = single_record(0, pick, [0, 1] if pick is None else [], 0, 2) | {"calls": 1, "cached_calls": 0, "longer": side}
        rows.append({"item_id": f"i{k}", "placement": "single", "seq": k, "category": "c", "status": "done", "record": record})
    o = metrics.summarise(rows, ("single",), "grade")["overall"]
    assert (o["length_preference"], o["length_gold_share"], o["length_bias"]) == (1.0, 0.5, 0.5)
    assert metrics.named({"predicted": 1, "longer": "chosen"}) == "rejected" and metrics.named({"predicted": 1}) is None  # a list: no pair
    # an AlpacaEval row: its preference (1: output_1 .. 2: output_2) names one output, 1.5 none
    assert [metrics.named({"preference": p}) for p in (1.0, 1.49, 1.5, 1.51)] == ["output_1", "output_1", None, "output_2"]


def test_length_figures_without_decided_verdicts_are_null():
    assert figures.length_figures(0, 0, 0) == {"length_preference": None, "length_gold_share": None, "length_bias": None}


async def test_every_pairwise_run_summary_carries_length_bias_and_strict_score(scripted, tmp_path):
    summary, _ = await bench(scripted, right_judge, PAIRS, "vanilla", tmp_path)
    o = summary["overall"]
    # the fixture's chosen answers are the longer ones: an always-right judge prefers length only as much as the labels
    assert o["length_preference"] == 1.0 and o["length_gold_share"] == 1.0 and o["length_bias"] == 0.0
    assert o["strict_score"] == 6 / 7 and o["pair_accuracy"] == 1.0  # the degenerate pair counts wrong


def _named_pairs(tmp_path) -> tuple:
    """The fixture's pairs naming their models: model-x wrote the chosen answers of p1-p3, model-y those of p4-p6."""
    import json

    rows = []
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        first_half = row["id"] in ("p0", "p1", "p2", "p3")
        row.update(chosen_model="model-x" if first_half else "model-y", rejected_model="model-y" if first_half else "model-x")
        rows.append(row)
    path = tmp_path / "named.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows


async def test_pairs_naming_two_models_get_the_win_rate_and_lc_win_rate_of_one_over_the_other(scripted, tmp_path):
    from judge_mcp.bench import alpaca_metrics

    path, rows = _named_pairs(tmp_path)
    summary, _ = await bench(scripted, right_judge, path, "vanilla", tmp_path)
    h = summary["head_to_head"]
    # an always-right judge: model-y (second by name) loses p1-p3 in both placements (1.0) and wins p4-p6 (2.0)
    assert (h["baseline"], h["model"], h["win_rate"], h["n_total"], h["n_wins"], h["unannotated"]) == ("model-x", "model-y", 50.0, 6, 3, 0)
    judged = [r for r in rows if r["id"] != "p0"]  # the degenerate pair is not judged
    by_hand = [{"preference": 1.0 if r["chosen_model"] == "model-x" else 2.0,
                "len_1": len(r["chosen"] if r["chosen_model"] == "model-x" else r["rejected"]),
                "len_2": len(r["rejected"] if r["chosen_model"] == "model-x" else r["chosen"]), "difficulty": None} for r in judged]
    assert h["lc_win_rate"] == alpaca_metrics.lc_win_rate(by_hand, ("model-x", "model-y"))["lc_win_rate"]
    assert "head to head, model-y over model-x: win rate 50.0" in bench_cli.format_summary(summary)


async def test_a_position_biased_judge_draws_every_named_pair(scripted, tmp_path):
    path, _ = _named_pairs(tmp_path)
    summary, _ = await bench(scripted, lambda p: first_shown_judge(p), path, "vanilla", tmp_path)
    h = summary["head_to_head"]
    assert h["win_rate"] == 50.0 and h["n_draws"] == 6  # each pair: one placement for each model


async def test_pairs_without_model_names_have_no_head_to_head(scripted, tmp_path):
    summary, _ = await bench(scripted, right_judge, PAIRS, "vanilla", tmp_path)
    assert "head_to_head" not in summary


def test_a_pair_naming_one_model_only_is_refused(tmp_path):
    import json

    from judge_mcp.bench.data import DatasetError, load_items

    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "x", "prompt": "p", "chosen": "a", "rejected": "b", "chosen_model": "m"}) + "\n")
    with pytest.raises(DatasetError, match="both 'chosen_model' and 'rejected_model'"):
        load_items(path)
