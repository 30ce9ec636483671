"""Arena-Hard-Auto's Bradley-Terry computation in its published form, as the reference that
judge_mcp/stats/bradley_terry.py is held to (tests/stats/test_bradley_terry.py).

From lmarena/arena-hard-auto (Apache-2.0), utils_math.py `compute_mle_elo` and show_result.py's bootstrap
(`get_bootstrap_result`, then np.percentile 2.5 / 97.5), as of commit 0489bf3: pandas' frame replaced by lists (the
same rows in the same order), the resamples passed in (show_result.py draws them with `battles.sample(frac=1.0,
replace=True)`; the test gives both computations the same ones). Needs numpy and scikit-learn (the `test` extra).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression

Battle = tuple[str, str, str]  # (model_a, model_b, "A" | "B" | "tie")


def compute_mle_elo(battles: Sequence[Battle], SCALE: int = 400, BASE: int = 10, INIT_RATING: int = 1000,
                    baseline_model: str = "gpt-4-0314") -> dict[str, float]:
    model_a = [a for a, _, _ in battles]
    model_b = [b for _, b, _ in battles]
    winner = ["model_a" if w == "A" else "model_b" if w == "B" else "tie" for _, _, w in battles]
    names = list(dict.fromkeys(model_a + model_b))  # pd.concat([...]).unique(): order of appearance
    models = {name: k for k, name in enumerate(names)}

    # duplicate battles
    model_a, model_b, winner = model_a * 2, model_b * 2, winner * 2
    p = len(models)
    n = len(winner)

    X = np.zeros([n, p])
    X[np.arange(n), [models[m] for m in model_a]] = +math.log(BASE)
    X[np.arange(n), [models[m] for m in model_b]] = -math.log(BASE)

    # one A win => two A win
    Y = np.zeros(n)
    Y[np.array(winner) == "model_a"] = 1.0

    # one tie => one A win + one B win
    tie_idx = np.array([w in ("tie", "tie (bothbad)") for w in winner])
    tie_idx[len(tie_idx) // 2:] = False
    Y[tie_idx] = 1.0

    with warnings.catch_warnings():  # scikit-learn 1.8+ deprecates penalty=None (same fit as C=np.inf); kept as published
        warnings.simplefilter("ignore", FutureWarning)
        lr = LogisticRegression(fit_intercept=False, penalty=None, tol=1e-8)
        lr.fit(X, Y)

    elo_scores = SCALE * lr.coef_[0] + INIT_RATING

    # set anchor as gpt-4-0314 = 1000
    if baseline_model in models:
        elo_scores += 1000 - elo_scores[models[baseline_model]]
    return dict(zip(names, (float(s) for s in elo_scores)))


def bootstrap_interval(battles: Sequence[Battle], resamples: Sequence[Sequence[int]]) -> dict[str, tuple[float, float]]:
    """show_result.py: compute_mle_elo on each resample, then each model's 2.5th and 97.5th percentiles."""
    rows = [compute_mle_elo([battles[k] for k in idx]) for idx in resamples]
    return {m: (float(np.percentile([r[m] for r in rows], 2.5)), float(np.percentile([r[m] for r in rows], 97.5))) for m in rows[0]}
