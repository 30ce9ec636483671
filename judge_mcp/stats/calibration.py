"""Calibration of the bench's verdict probabilities, as pure functions over stored records.

Verdict probabilities (pairwise methods whose backend returns log-probabilities; `calibration` in the summary):
each placement record keeps `p_chosen`, the probability its single-order verdict gave the chosen response.
`single_order` scores those per placement; `both_orders` scores their mean per item (compare_pair's debiased
`p_better` with swap=true). Per set: `coverage` (share with a probability), `accuracy` (p_chosen > 0.5; exactly
0.5 counts wrong), `ece` (expected calibration error of the predicted side's confidence max(p, 1 - p) against
being right, ECE_BINS equal-width bins over [0, 1]; binary confidences fill the upper half; p = 0.5 names no side,
so it is right with probability 0.5 and a judge that always says 0.5 is perfectly calibrated: ECE 0) and `brier`
(mean (1 - p_chosen)^2: 0 is perfect, 0.25 is always saying 0.5).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from judge_mcp.stats import intervals

ECE_BINS = 10  # equal-width confidence bins of the expected calibration error


def _ratio(num: float, den: float, digits: int = 4) -> float | None:
    return round(num / den, digits) if den else None


def ece(confidences: list[float], right: list[float], bins: int = ECE_BINS) -> float | None:
    """Expected calibration error: sum over equal-width confidence bins of |bin accuracy - bin mean confidence|,
    weighted by the bin's share of the judgments. `right` is 1 or 0 per judgment, or 0.5 for one that names no side
    (a coin flip is right half the time)."""
    if not confidences:
        return None
    groups: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for c, r in zip(confidences, right):
        groups[min(int(c * bins), bins - 1)].append((c, r))
    total = sum(abs(sum(r for _, r in g) / len(g) - sum(c for c, _ in g) / len(g)) * len(g) for g in groups.values())
    return round(total / len(confidences), 4)


def _credit(p_chosen: float) -> float:
    """How right the side a probability names is: 1 (the chosen response), 0 (the rejected one), 0.5 (neither)."""
    return 1.0 if p_chosen > 0.5 else 0.0 if p_chosen < 0.5 else 0.5


def probability_figures(p_chosen: list[float | None]) -> dict[str, Any]:
    """coverage, n, accuracy, ECE and Brier score of probabilities given to the chosen response (None: none given)."""
    ps = [p for p in p_chosen if p is not None]
    return {
        "n": len(ps),
        "coverage": _ratio(len(ps), len(p_chosen)),
        "accuracy": _ratio(sum(p > 0.5 for p in ps), len(ps)),
        "ece": ece([max(p, 1.0 - p) for p in ps], [_credit(p) for p in ps]),
        "brier": _ratio(sum((1.0 - p) ** 2 for p in ps), len(ps)),
    }


def calibration_extras(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> dict[str, Any] | None:
    """Calibration of the verdict probabilities (see the module doc); None when the records carry none at all."""
    records = [[done[p] for p in placements] for _, _, _, done in complete]
    if not any("p_chosen" in r for rs in records for r in rs):
        return None
    single = [r.get("p_chosen") for rs in records for r in rs]
    both = [None if any(r.get("p_chosen") is None for r in rs) else sum(r["p_chosen"] for r in rs) / len(rs) for rs in records]
    # the probability-level position bias: the mean probability given to the first-shown response (0.5 = none)
    first = [r["p_chosen"] if r.get("shown_first") == "chosen" else 1.0 - r["p_chosen"] for rs in records for r in rs if r.get("p_chosen") is not None]
    return {
        "bins": ECE_BINS,
        "single_order": {**probability_figures(single), "p_first_shown": _ratio(sum(first), len(first)), "ci": figure_intervals(single)},
        "both_orders": {**probability_figures(both), "ci": figure_intervals(both)},
    }


def figure_intervals(p_chosen: list[float | None]) -> dict[str, Any]:
    """95% intervals of `probability_figures` over the judgments with a probability (stats/intervals.py): Wilson for
    the accuracy, a seeded bootstrap for ECE and Brier."""
    ps: list[float | None] = [p for p in p_chosen if p is not None]

    def boot(name: str) -> Any:
        return intervals.ci_bootstrap(len(ps), lambda idx: probability_figures([ps[i] for i in idx])[name], places=None)

    right = sum(1 for p in ps if p is not None and p > 0.5)
    return {"accuracy": intervals.ci_rate(right, len(ps), places=None), "ece": boot("ece"), "brier": boot("brier")}


def p_chosen(p_better: Any, placement: str) -> float | None:
    """The probability a verdict gave the chosen response (shown as A in chosen_first, as B in chosen_second)."""
    if p_better is None:
        return None
    return p_better.A if placement == "chosen_first" else p_better.B
