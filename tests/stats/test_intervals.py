"""stats/intervals.py against hand computations."""

from __future__ import annotations

import math

import pytest

from judge_mcp.stats import agreement, intervals


def test_wilson_of_14_in_20_by_hand() -> None:
    # p = 0.7, z = 1.96: centre (0.7 + z^2/40) / (1 + z^2/20) = 0.66777, half z sqrt(0.0105 + z^2/1600) / (1 + z^2/20) = 0.18675
    low, high = intervals.wilson(14, 20)
    assert (round(low, 3), round(high, 3)) == (0.481, 0.855)
    assert intervals.ci_rate(14, 20) == [0.481, 0.8545]


def test_wilson_at_the_edges() -> None:
    assert intervals.wilson(0, 10)[0] == 0.0 and intervals.wilson(10, 10)[1] == 1.0
    assert intervals.wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)  # z^2 / (n + z^2) = 3.8415 / 13.8415
    assert intervals.wilson(0, 0) is None and intervals.ci_rate(0, 0) is None
    assert intervals.ci_rate(2, 4) == "too few to say (n=4)"
    with pytest.raises(ValueError, match="count 5 is not between 0 and n=4"):
        intervals.wilson(5, 4)


def test_percentile_interpolates_as_numpy_does() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert intervals.percentile(values, 50) == 2.5
    assert intervals.percentile(values, 2.5) == pytest.approx(1.075)  # rank 3 * 0.025 = 0.075 past the first
    assert intervals.percentile([5.0], 97.5) == 5.0


def test_mcnemar_exact_by_hand() -> None:
    # b = 3, c = 10: 2 * (C(13,0) + C(13,1) + C(13,2) + C(13,3)) / 2^13 = 2 * 378 / 8192
    assert intervals.mcnemar_exact(3, 10) == pytest.approx(756 / 8192)
    assert intervals.mcnemar_exact(10, 3) == intervals.mcnemar_exact(3, 10)
    assert intervals.mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert intervals.mcnemar_exact(4, 4) == 1.0 and intervals.mcnemar_exact(0, 0) == 1.0
    assert 0 < intervals.mcnemar_exact(600, 700) < 0.01  # beyond floats' 2^1024: computed in logs
    assert intervals.mcnemar_exact(600, 700) == pytest.approx(2 * sum(math.comb(1300, k) for k in range(601)) / 2 ** 1300)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [1.0] * 14 + [0.0] * 6
    first, again = intervals.ci_mean(values), intervals.ci_mean(values)
    assert first == again and isinstance(first, list)
    low, high = first
    assert low < 0.7 < high and 0.45 < low < 0.55 and 0.85 <= high < 0.95  # near Wilson's [0.481, 0.855] on the same data
    assert intervals.ci_mean(values[:9]) == "too few to say (n=9)"
    assert intervals.ci_mean([]) is None


def test_bootstrap_resamples_by_hand() -> None:
    # every resample of one item is that item; the interval of a constant is the constant
    assert intervals.bootstrap(1, lambda idx: 3.0) == (3.0, 3.0)
    assert list(intervals.resamples(3, 2, seed=1)) == list(intervals.resamples(3, 2, seed=1))
    assert all(0 <= i < 3 for idx in intervals.resamples(3, 5) for i in idx)
    assert intervals.rounds_for(10) == 1000 and intervals.rounds_for(10**6) == intervals.MIN_ROUNDS


def test_agreement_figures_carry_their_intervals() -> None:
    tally = agreement.Tally()
    for k in range(20):  # 14 of 20 right; two categories
        label = "A" if k % 2 else "B"
        answer = label if k < 14 else ("B" if label == "A" else "A")
        tally.add(answer, label, 0.8 if answer == label else 0.3, True, longer="A")
    figures = tally.figures()
    assert figures.accuracy.ci == [0.481, 0.8545]
    assert isinstance(figures.kappa_ci, list) and figures.kappa_ci[0] < figures.kappa < figures.kappa_ci[1]
    assert set(figures.calibration.ci) == {"ece", "brier"} and all(isinstance(v, list) for v in figures.calibration.ci.values())
    assert figures.length is not None and isinstance(figures.length.ci, list)


def test_score_agreement_carries_bootstrap_intervals() -> None:
    tally = agreement.Tally()
    for k in range(12):  # scores 1..12 against labels off by one every third
        tally.add(str(k), str(k + (k % 3 == 0)), None, False, score=float(k))
    scores = tally.figures().scores
    assert scores is not None and scores.mae == 0.3333
    assert set(scores.ci) == {"mae", "spearman", "kendall"}
    low, high = scores.ci["mae"]
    assert low < 0.3333 < high and 0.0 <= low  # a mean of 0/1 errors: the bootstrap stays within [0, 1]
    assert scores.ci["spearman"][0] <= scores.spearman <= scores.ci["spearman"][1] <= 1.0
