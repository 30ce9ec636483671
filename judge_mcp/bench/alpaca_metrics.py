"""AlpacaEval's metrics over a run's preferences (1: the reference better .. 2: the model better), written here from
AlpacaEval 2.0's description (Dubois et al. 2024, "Length-Controlled AlpacaEval") and the behaviour of
tatsu-lab/alpaca_eval `src/alpaca_eval/metrics/{helpers,winrate,glm_winrate}.py` (Apache-2.0); no code copied.

Win rate (`get_winrate`, AbsoluteScoringRule): over the annotated rows (unannotated ones are dropped, as there),
win_rate = 100 * mean(preference - 1); standard_error = 100 * its standard error of the mean (n - 1 in the
variance); n_wins / n_wins_base: rows with preference - 1 above / below 0.5; n_draws: rows at exactly 1.5;
discrete_win_rate: the same mean after rounding each preference to 1, 1.5 (exactly 1.5 only) or 2.

Length-controlled win rate (`get_length_controlled_winrate`): a logistic GLM of the soft label preference - 1 on
tanh(delta_len / sd(delta_len)), the row's instruction difficulty (when the dataset gives one for every row) and a
constant (AlpacaEval's `not_gamed_baseline`), no intercept, where delta_len = len(output_1) - len(output_2) in
characters and sd is the sample standard deviation over the annotated rows. It is fit as scikit-learn's
LogisticRegressionCV(penalty="l1", solver="liblinear", fit_intercept=False) fits it there: each row counted once
with label 1 weighted p and once with label 0 weighted 1 - p, i.e. minimise ||w||_1 + C * sum of the rows' soft
log losses; C chosen from 10 values 10^-4 .. 10^4 (log-spaced) by 5-fold cross-validation over rows (a row's two
copies in one fold; fold of row r = (n - 1 - r) mod 5, GroupKFold's assignment of equal-sized groups), scored by
the held-out soft log loss (predictions clipped to [1e-15, 1 - 1e-15]), the first C on a tie; then refit on every
row. The LC win rate is 100 * the mean over rows of the fitted probability with delta_len set to 0; lc_standard_error
its standard error. When the two generators are the same model it is 50 by construction.
Not reproduced: AlpacaEval's default GLM (`length_controlled_v1`) also regularises towards two "gamed" baselines'
annotations (weight 0.2) and takes each instruction's difficulty from a file it downloads (df_gamed.csv); offline,
this is its `length_controlled_noreg` GLM (with difficulties) or `length_controlled_minimal` (without): `glm` names
which. The solver is coordinate descent with proximal Newton steps to a tighter tolerance than liblinear's, so
weights agree to about 1e-3, not bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

CS = tuple(10.0 ** (-4 + 8 * k / 9) for k in range(10))  # LogisticRegressionCV's default Cs=10
N_SPLITS = 5
EPSILON = 1e-15
MAX_SWEEPS = 500


def _sem(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def _discrete(p: float) -> float:
    return 1.5 if p == 1.5 else (2.0 if p > 1.5 else 1.0)


def win_rate(preferences: Sequence[float]) -> dict[str, Any]:
    """AlpacaEval's head-to-head figures over the annotated rows' preferences."""
    shifted = [p - 1.0 for p in preferences]
    n = len(shifted)
    sem = _sem(shifted)
    return {
        "win_rate": round(100 * sum(shifted) / n, 4) if n else None,
        "standard_error": None if sem is None else round(100 * sem, 4),
        "n_wins": sum(1 for s in shifted if s > 0.5),
        "n_wins_base": sum(1 for s in shifted if s < 0.5),
        "n_draws": sum(1 for p in preferences if p == 1.5),
        "n_total": n,
        "discrete_win_rate": round(100 * sum(_discrete(p) - 1.0 for p in preferences) / n, 4) if n else None,
    }


# ---- the GLM -------------------------------------------------------------------------------------------------------
def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _loss(z: list[float], t: Sequence[float]) -> float:
    """Sum of the soft log losses t * log(1 + e^-z) + (1 - t) * log(1 + e^z)."""
    return sum(ti * _softplus(-zi) + (1.0 - ti) * _softplus(zi) for zi, ti in zip(z, t))


def fit(x: Sequence[Sequence[float]], t: Sequence[float], c: float) -> list[float]:
    """argmin_w ||w||_1 + c * sum_i soft log loss(x_i . w, t_i): cyclic coordinate descent, each step a proximal
    Newton step with a backtracking line search on the objective (so the objective never increases)."""
    k = len(x[0]) if x else 0
    w = [0.0] * k
    z = [0.0] * len(x)
    for _ in range(MAX_SWEEPS):
        largest = 0.0
        for j in range(k):
            col = [row[j] for row in x]
            s = [_sigmoid(zi) for zi in z]
            g = c * sum((si - ti) * xi for si, ti, xi in zip(s, t, col))
            h = c * sum(si * (1.0 - si) * xi * xi for si, xi in zip(s, col))
            if h <= 1e-300:
                continue
            u = w[j] - g / h
            step = math.copysign(max(abs(u) - 1.0 / h, 0.0), u) - w[j]
            if step == 0.0:
                continue
            before = abs(w[j]) + c * _loss(z, t)
            decrease = g * step + abs(w[j] + step) - abs(w[j])
            alpha = 1.0
            for _ in range(40):
                trial = [zi + alpha * step * xi for zi, xi in zip(z, col)]
                if abs(w[j] + alpha * step) + c * _loss(trial, t) <= before + 0.01 * alpha * decrease:
                    break
                alpha /= 2
            else:
                continue
            w[j] += alpha * step
            z = trial
            largest = max(largest, abs(alpha * step) * max(abs(v) for v in col))
        if largest < 1e-10:
            break
    return w


def _heldout_loss(x: Sequence[Sequence[float]], t: Sequence[float], w: Sequence[float]) -> float:
    total = 0.0
    for row, ti in zip(x, t):
        q = min(max(_sigmoid(sum(a * b for a, b in zip(row, w))), EPSILON), 1.0 - EPSILON)
        total -= ti * math.log(q) + (1.0 - ti) * math.log(1.0 - q)
    return total / len(x)


def choose_c(x: Sequence[Sequence[float]], t: Sequence[float]) -> float:
    """The C of CS with the lowest summed held-out loss over the folds (the first on a tie)."""
    n = len(x)
    folds = [(n - 1 - r) % N_SPLITS for r in range(n)]
    best, best_loss = CS[0], math.inf
    for c in CS:
        total = 0.0
        for f in range(N_SPLITS):
            train = [r for r in range(n) if folds[r] != f]
            test = [r for r in range(n) if folds[r] == f]
            w = fit([x[r] for r in train], [t[r] for r in train], c)
            total += _heldout_loss([x[r] for r in test], [t[r] for r in test], w)
        if total < best_loss:
            best, best_loss = c, total
    return best


def lc_win_rate(rows: Sequence[dict[str, Any]], generators: tuple[str, str]) -> dict[str, Any]:
    """The length-controlled win rate of annotated rows {preference, len_1, len_2, difficulty}; {"lc_win_rate": None,
    "lc_note": why} when the GLM cannot be fit (fewer than 5 rows, or no spread in length differences)."""
    if generators[0] == generators[1]:
        return {"lc_win_rate": 50.0, "lc_standard_error": 0.0, "glm": "baseline against itself", "glm_weights": {}}
    n = len(rows)
    delta = [float(r["len_1"] - r["len_2"]) for r in rows]
    sd = _sem(delta)
    if n < N_SPLITS or not sd:
        return {"lc_win_rate": None, "lc_note": f"needs at least {N_SPLITS} annotated rows whose length differences vary"}
    sd *= math.sqrt(n)  # the sample standard deviation
    with_difficulty = all(r.get("difficulty") is not None for r in rows)
    names = ["np.tanh(std_delta_len)"] + (["instruction_difficulty"] if with_difficulty else []) + ["not_gamed_baseline"]
    x = [[math.tanh(d / sd)] + ([float(r["difficulty"])] if with_difficulty else []) + [1.0] for d, r in zip(delta, rows)]
    t = [float(r["preference"]) - 1.0 for r in rows]
    c = choose_c(x, t)
    w = fit(x, t, c)
    predicted = [_sigmoid(sum(a * b for a, b in zip([0.0] + row[1:], w))) for row in x]
    sem = _sem(predicted)
    return {
        "lc_win_rate": round(100 * sum(predicted) / n, 4),
        "lc_standard_error": None if sem is None else round(100 * sem, 4),
        "glm": "length_controlled_noreg" if with_difficulty else "length_controlled_minimal",
        "glm_c": c,
        "glm_weights": {name: round(v, 6) for name, v in zip(names, w)},
    }
