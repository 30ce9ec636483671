"""The bench's intervals (`ci` in every summary row), `bench-report --compare RUN_A RUN_B` (paired differences, their
bootstrap intervals, McNemar's exact test) and the ranking of the models a dataset's items name: checked by hand
on constructed summaries, and end to end on runs against scripted judges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_mcp.bench import compare, uncertainty
from judge_mcp.cli.main import main
from judge_mcp.stats import bradley_terry, intervals
from testkit.scripted_judges import first_shown_judge
from tests.bench.datasets import PAIRS, bench, right_judge


def _summary(rights: list[int], key: str = "a", repeats: list[list[int]] | None = None) -> dict:
    """A summary whose items i0.. are right (accuracy and pair accuracy) as `rights` says; with `repeats`, one
    list of flags per further run."""
    runs = [rights, *(repeats or [])]
    per_item = {f"i{k:02d}": [[run[k], run[k], 1, 1, 2] for run in runs] for k in range(len(rights))}
    return {"dataset": "d", "method_key": key, "model": "m", "overall": {}, "per_item": per_item}


def test_paired_difference_and_mcnemar_by_hand() -> None:
    a = _summary([1] * 10 + [0] * 10, "old")
    b = _summary([1] * 16 + [0] * 4, "new")  # right on A's 10 and 6 more: 6 discordant items, all for B
    c = compare.compare(a, b)
    acc = c["figures"]["first_order_accuracy"]
    assert (c["shared_items"], acc["a"], acc["b"], acc["difference"]) == (20, 0.5, 0.8, pytest.approx(0.3))
    assert acc["mcnemar"] == {"a_only": 0, "b_only": 6, "p": pytest.approx(2 / 2 ** 6)}  # 2 * P(X <= 0), X ~ Bin(6, 1/2)
    low, high = acc["ci"]
    assert 0 < low < 0.3 < high <= 0.6  # B's gain is 6 items of 20: the interval holds it and excludes 0
    assert c["figures"]["position_bias"]["difference"] == 0.0 and "mcnemar" not in c["figures"]["position_bias"]
    text = compare.format_comparison(c)
    assert "accuracy" in text and "+0.300" in text and "p = 0.03125" in text


def test_repeats_put_the_spread_between_runs_in_the_interval() -> None:
    a = _summary([1] * 10 + [0] * 10)
    steady = compare.compare(a, _summary([1] * 16 + [0] * 4, "b"))["figures"]["first_order_accuracy"]["ci"]
    flip = [1] * 16 + [0] * 4
    drifting = _summary(flip, "b", repeats=[[1 - f if k % 2 else f for k, f in enumerate(flip)]])  # a second run differs on half
    moved = compare.compare(a, drifting)
    assert moved["repeats"] == [1, 2]
    wide = moved["figures"]["first_order_accuracy"]["ci"]
    assert wide[1] - wide[0] > steady[1] - steady[0]


def test_runs_that_cannot_be_compared_say_why() -> None:
    a = _summary([1] * 12)
    with pytest.raises(compare.CompareError, match="has no per-item outcomes"):
        compare.compare(a, {"dataset": "d", "method_key": "old", "model": "m", "overall": {}})
    with pytest.raises(compare.CompareError, match="different datasets"):
        compare.compare(a, {**_summary([1] * 12), "dataset": "other"})
    with pytest.raises(compare.CompareError, match="share no judged item"):
        compare.compare(a, {**_summary([1]), "per_item": {"zz": [[1, 1, 1, 1, 2]]}})
    few = compare.compare(_summary([1, 0, 1]), _summary([1, 1, 1]))
    assert few["figures"]["first_order_accuracy"]["ci"] == intervals.too_few(3)


def test_row_intervals_by_hand() -> None:
    outcomes = [{"right": k < 14, "pair_right": k < 7, "consistent": True, "single_right": None, "judgebench_right": None,
                 "first_shown_picks": 1, "parsed_verdicts": 2, "tie_verdicts": 0, "parse_failures": 0, "verdicts": 2} for k in range(20)]
    ci = uncertainty.row_ci(outcomes, {"consistency": 1.0, "position_bias": 0.5, "single_order_accuracy": None})
    assert [round(v, 3) for v in ci["accuracy"]] == [0.481, 0.855]  # 14 of 20, Wilson
    assert ci["position_bias"] == pytest.approx(list(intervals.wilson(20, 40)))  # 20 first-shown of 40 parsed verdicts
    assert ci["consistency"] == pytest.approx([intervals.wilson(20, 20)[0], 1.0]) and "single_order_accuracy" not in ci
    assert ci["parse_failures"] == [0.0, pytest.approx(intervals.wilson(0, 40)[1])]


async def test_two_runs_compared_end_to_end(scripted, tmp_path, capsys) -> None:
    first, _ = await bench(scripted, first_shown_judge, PAIRS, "vanilla", tmp_path)
    right, _ = await bench(scripted, right_judge, PAIRS, "grp", tmp_path)
    assert first["overall"]["ci"]["pair_accuracy"] == [0.0, pytest.approx(intervals.wilson(0, 6)[1])]
    paths = []
    for name, s in (("a.json", first), ("b.json", right)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(s))
    html = tmp_path / "compare.html"
    assert main(["bench-report", "--compare", str(paths[0]), str(paths[1]), "--out", str(html)]) == 0
    out = capsys.readouterr().out
    # the always-first judge gets the chosen-first placement right and no pair; the right judge gets everything
    assert "6 items judged by both" in out
    line = next(x for x in out.splitlines() if x.startswith("pair_accuracy"))
    assert "+1.000" in line and "right only in A 0, only in B 6: p = 0.03125" in line
    page = html.read_text()
    assert "B - A on 6 shared items" in page and "<circle class=\"point\"" in page and "p = 0.03125" in page
    # named by method key in the database that holds both runs
    assert main(["bench-report", "--compare", "vanilla", "grp", "--db", str(tmp_path / "bench.db")]) == 0
    assert "pair_accuracy" in capsys.readouterr().out
    assert main(["bench-report", "--compare", "vanilla", "nope", "--db", str(tmp_path / "bench.db")]) == 2
    assert "'nope' names 0 runs" in capsys.readouterr().err


async def test_items_that_name_their_models_are_ranked(scripted, tmp_path) -> None:
    models = [("m1", "m2"), ("m2", "m3"), ("m3", "m1"), ("m1", "m2"), ("m2", "m3"), ("m1", "m3")]
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    named = [r for r in rows if r["id"] != "p0"]
    for row, (chosen, rejected) in zip(named, models):
        row.update(chosen_model=chosen, rejected_model=rejected)
    dataset = tmp_path / "named.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in named))
    summary, _ = await bench(scripted, right_judge, dataset, "grp", tmp_path)
    # the right judge names the chosen response in both placements: the chosen model wins every pair
    assert summary["ranking"] == bradley_terry.ranking([(c, r, "A") for c, r in models])
    assert [r["name"] for r in summary["ranking"]][0] == "m1"
    biased, _ = await bench(scripted, first_shown_judge, dataset, "vanilla", tmp_path, db_name="biased.db")
    assert all(r["ties"] == r["battles"] and r["consistent"] == 0.0 for r in biased["ranking"])  # placements disagree: ties
    page = Path(tmp_path / "r.html")
    assert main(["bench-report", "--db", str(tmp_path / "bench.db"), "--out", str(page)]) == 0
    assert "Bradley-Terry strength (95% interval)" in page.read_text()
