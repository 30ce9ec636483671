"""The bench's ECE scores a perfectly uninformative judge as calibrated: p = 0.5 names no side, so it is right half
the time, which is what 0.5 claims (it used to count as a wrong answer given with confidence 0.5: ECE 0.5)."""

from __future__ import annotations

import pytest

from judge_mcp.stats import calibration


def test_a_judge_that_always_says_one_half_has_ece_zero() -> None:
    figures = calibration.probability_figures([0.5] * 10)
    assert figures["ece"] == 0.0
    assert figures["brier"] == 0.25 and figures["accuracy"] == 0.0  # accuracy still counts 0.5 as no verdict


def test_one_half_beside_informative_probabilities() -> None:
    # two at 0.5 (credit 0.5 each, confidence 0.5) and two right at 0.9: both bins are calibrated but for the 0.9s
    assert calibration.probability_figures([0.5, 0.5, 0.9, 0.9])["ece"] == pytest.approx(0.05)
    assert calibration.ece([0.5, 0.5], [1.0, 0.0]) == 0.0  # right half the time at confidence 0.5
