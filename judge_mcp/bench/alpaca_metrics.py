"""AlpacaEval's metrics over a run's preferences (1: the reference better .. 2: the model better), as tatsu-lab/
alpaca_eval @ cd543a14 (Apache-2.0) computes them in `src/alpaca_eval/metrics/{helpers,winrate,glm_winrate}.py`.
Every figure is kept unrounded (rounding is for display).

Win rate (`get_winrate`, AbsoluteScoringRule): over the annotated rows (unannotated ones are dropped, as there),
win_rate = 100 * mean(preference - 1); standard_error = 100 * its standard error of the mean (n - 1 in the
variance); n_wins / n_wins_base: rows with preference - 1 above / below 0.5; n_draws: rows at exactly 1.5;
discrete_win_rate: the same mean after rounding each preference to 1, 1.5 (exactly 1.5 only) or 2.

Length-controlled win rate (`get_length_controlled_winrate`), fitted with scikit-learn exactly as AlpacaEval's
`fit_LogisticRegressionCV(is_ytrue_proba=True, n_splits=5)` fits it (the `bench` extra): each row counted once with
label 1 weighted p and once with label 0 weighted 1 - p (p = preference - 1, a 0 preference read as 1.5), the two
copies one group of GroupKFold(5), LogisticRegressionCV(penalty l1, liblinear, no intercept, random_state 123, Cs
10) scored by the held-out soft log loss, then predicted for every row with the length difference set to 0:
lc_win_rate = 100 * the mean prediction, lc_standard_error its standard error. The features (patsy's columns of the
formula): tanh(delta_len / sd(delta_len)) with delta_len = len(output_1) - len(output_2) and sd the sample standard
deviation over every row (annotated or not, as there), then the instruction difficulty, then the constant
`not_gamed_baseline`. Which GLM (`glm`):
- `length_controlled_v1`, AlpacaEval's default and the leaderboard's, when AlpacaEval's `df_gamed.csv` (the two
  gamed baselines' annotations and each instruction's difficulty: index, instruction_difficulty, preference,
  std_delta_len, not_gamed_baseline) is given (`judge-mcp bench --alpaca-gamed FILE`): its rows join the training
  rows with weight 0.2 / 2 and the row at position k takes the difficulty of df_gamed's row k, as there;
- `length_controlled_noreg` when every row has its own difficulty (bench-convert alpaca-eval --difficulty);
- `length_controlled_minimal` otherwise (no difficulty term).
When the two generators are the same model it is 50 by construction.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge_mcp._version import install_hint

N_SPLITS = 5
RANDOM_STATE = 123
GAMED_WEIGHT = 0.2 / 2  # regularize_to_baseline_lambda, divided by 2 "because there are two gamed baselines"
EPSILON = 1e-15
GAMED_COLUMNS = ("index", "instruction_difficulty", "preference", "std_delta_len", "not_gamed_baseline")


class MissingExtra(RuntimeError):
    """scikit-learn, which fits the LC GLM, is not installed."""


def _sem(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def _discrete(p: float) -> float:
    return 1.5 if p == 1.5 else (2.0 if p > 1.5 else 1.0)


def win_rate(preferences: Sequence[float]) -> dict[str, Any]:
    """AlpacaEval's head-to-head figures over the annotated rows' preferences, unrounded (a 0 preference, its old
    encoding of a draw, read as 1.5, as there)."""
    preferences = [1.5 if p == 0 else p for p in preferences]
    shifted = [p - 1.0 for p in preferences]
    n = len(shifted)
    sem = _sem(shifted)
    return {
        "win_rate": 100 * sum(shifted) / n if n else None,
        "standard_error": None if sem is None else 100 * sem,
        "n_wins": sum(1 for s in shifted if s > 0.5),
        "n_wins_base": sum(1 for s in shifted if s < 0.5),
        "n_draws": sum(1 for p in preferences if p == 1.5),
        "n_total": n,
        "discrete_win_rate": 100 * sum(_discrete(p) - 1.0 for p in preferences) / n if n else None,
    }


# ---- the GLM, with scikit-learn ------------------------------------------------------------------------------------
def sklearn_modules() -> Any:
    try:
        # lazy: scikit-learn is the bench extra's, loaded only when an LC win rate is fitted
        import sklearn  # type: ignore[import-untyped, import-not-found, unused-ignore]
        from sklearn import linear_model, metrics, model_selection  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        raise MissingExtra(
            f"the LC win rate is fitted with scikit-learn, which is not installed: add judge-mcp's bench extra ({install_hint('bench')})"
        ) from None
    return sklearn, linear_model, metrics, model_selection


def _logloss_continuous(y_true: Any, y_pred: Any, true_prob: Any, true_sample_weight: Any = None) -> float:
    """AlpacaEval's `logloss_continuous`: the held-out soft log loss (y_true binary, true_prob its label's weight)."""
    import numpy as np  # lazy: numpy comes with scikit-learn, the bench extra

    y_true = np.where(y_true == 1, true_prob, 1 - true_prob)
    y_pred = np.clip(y_pred, EPSILON, 1 - EPSILON)
    losses = y_true * np.log(y_pred) + (1 - y_true) * np.log(1 - y_pred)
    if true_sample_weight is not None:
        losses = losses * true_sample_weight
    return float(-np.mean(losses))


def _model_kwargs(linear_model: Any) -> dict[str, Any]:
    """LogisticRegressionCV(penalty="l1", solver="liblinear", fit_intercept=False, random_state=123), spelled as the
    installed scikit-learn wants it (1.8 replaced `penalty` by `l1_ratios`)."""
    kwargs: dict[str, Any] = dict(random_state=RANDOM_STATE, dual=False, solver="liblinear", n_jobs=None, fit_intercept=False)
    params = linear_model.LogisticRegressionCV().get_params()
    if params.get("penalty") == "deprecated":
        kwargs.update(l1_ratios=(1.0,), use_legacy_attributes=True)
    else:
        kwargs.update(penalty="l1")
    return kwargs


def fit_predict(x: list[list[float]], p: list[float], test: list[list[float]], weight: list[float] | None = None) -> tuple[list[float], list[float]]:
    """AlpacaEval's `fit_LogisticRegressionCV(..., is_ytrue_proba=True, n_splits=5)` on rows x with soft labels p
    (and sample weights), then predict_proba on `test`: (the predictions, the weights)."""
    import numpy as np  # lazy: numpy comes with scikit-learn, the bench extra

    sklearn, linear_model, sk_metrics, model_selection = sklearn_modules()
    n = len(x)
    data = np.asarray(x + x, dtype=float)
    y = np.asarray([1] * n + [0] * n)
    true_prob = np.asarray(p + [1 - v for v in p], dtype=float)
    groups = np.asarray(list(range(n)) * 2)
    true_weight = None if weight is None else np.asarray(weight + weight, dtype=float)
    sample_weight = true_prob if true_weight is None else true_prob * true_weight
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = sk_metrics.make_scorer(_logloss_continuous, response_method="predict_proba", greater_is_better=False)
        scorer = scorer.set_score_request(true_sample_weight=True, true_prob=True)
        model = linear_model.LogisticRegressionCV(cv=model_selection.GroupKFold(n_splits=N_SPLITS), scoring=scorer, **_model_kwargs(linear_model))
        model.set_fit_request(sample_weight=True)
        model.fit(data, y, sample_weight=sample_weight, groups=groups, true_sample_weight=true_weight, true_prob=true_prob)
    predicted = model.predict_proba(np.asarray(test, dtype=float))[:, 1]
    return [float(v) for v in predicted], [float(v) for v in model.coef_[0]]


def read_gamed(path: Path) -> list[dict[str, Any]]:
    """AlpacaEval's df_gamed.csv as rows {index, instruction_difficulty, preference, std_delta_len, not_gamed}; a bad
    file raises ValueError naming the line."""
    text = path.expanduser().read_text(encoding="utf-8")
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in GAMED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path.name} is not AlpacaEval's df_gamed.csv: no column {', '.join(missing)}")
    rows = []
    for n, record in enumerate(reader, start=2):
        try:
            row = {k: float(record[k]) if record[k] != "" else None for k in ("instruction_difficulty", "preference", "std_delta_len")}
            row["index"] = int(float(record["index"]))
        except ValueError:
            raise ValueError(f"{path.name} line {n}: a value of {', '.join(GAMED_COLUMNS[:4])} is not a number") from None
        flag = record["not_gamed_baseline"].strip()
        if flag not in ("True", "False") or row["instruction_difficulty"] is None or row["std_delta_len"] is None:
            raise ValueError(f"{path.name} line {n}: expected a difficulty, a length difference and not_gamed_baseline True/False")
        rows.append({**row, "not_gamed": 1.0 if flag == "True" else 0.0})
    if not rows:
        raise ValueError(f"{path.name} has no rows")
    return rows


def _difficulties(gamed: list[dict[str, Any]], n: int) -> list[float]:
    """`df_gamed.drop_duplicates("index")["instruction_difficulty"]` looked up by each row's position, as there."""
    seen: set[int] = set()
    first: dict[int, float] = {}
    for k, row in enumerate(gamed):
        if row["index"] not in seen:
            seen.add(row["index"])
            first[k] = row["instruction_difficulty"]
    if any(k not in first for k in range(n)):
        gap = next(k for k in range(n) if k not in first)
        raise ValueError(f"df_gamed.csv gives no instruction difficulty at row position {gap} (of {n} rows)")
    return [first[k] for k in range(n)]


Design = tuple[str, list[str], list[list[float]], list["float | None"], list[list[float]], "list[float] | None"]


def _design(rows: Sequence[dict[str, Any]], gamed: list[dict[str, Any]] | None) -> Design:
    """(glm, feature names, training rows, their soft labels (None: unannotated), test rows, training weights)."""
    delta = [float(r["len_1"] - r["len_2"]) for r in rows]
    sd = (_sem(delta) or 0.0) * math.sqrt(len(delta))
    labels = [None if r.get("preference") is None else (1.5 if float(r["preference"]) == 0.0 else float(r["preference"])) - 1.0 for r in rows]
    std = [d / sd for d in delta]
    if gamed is not None:
        difficulty = _difficulties(gamed, len(rows))
        x = [[math.tanh(g["std_delta_len"]), g["instruction_difficulty"], g["not_gamed"]] for g in gamed]
        x += [[math.tanh(s), d, 1.0] for s, d in zip(std, difficulty)]
        weights = [1.0 if g["not_gamed"] else GAMED_WEIGHT for g in gamed] + [1.0] * len(rows)
        test = [[0.0, d, 1.0] for d in difficulty]
        return "length_controlled_v1", NAMES_V1, x, [g["preference"] for g in gamed] + labels, test, weights
    if all(r.get("difficulty") is not None for r in rows):
        difficulty = [float(r["difficulty"]) for r in rows]
        x = [[math.tanh(s), d, 1.0] for s, d in zip(std, difficulty)]
        return "length_controlled_noreg", NAMES_V1, x, labels, [[0.0, d, 1.0] for d in difficulty], None
    x = [[math.tanh(s), 1.0] for s in std]
    return "length_controlled_minimal", NAMES_MINIMAL, x, labels, [[0.0, 1.0]] * len(rows), None


NAMES_V1 = ["np.tanh(std_delta_len)", "instruction_difficulty", "not_gamed_baseline.astype(float)"]
NAMES_MINIMAL = ["np.tanh(std_delta_len)", "not_gamed_baseline.astype(float)"]


def lc_win_rate(rows: Sequence[dict[str, Any]], generators: tuple[str, str], gamed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The length-controlled win rate of rows {preference (None: unannotated), len_1, len_2, difficulty}; the rows
    unannotated take part as in AlpacaEval (in the length scale and the mean prediction, not in the fit).
    {"lc_win_rate": None, "lc_note": why} when the GLM cannot be fit."""
    if generators[0] == generators[1]:
        return {"lc_win_rate": 50.0, "lc_standard_error": 0.0, "glm": "baseline against itself", "glm_weights": {}}
    annotated = [r for r in rows if r.get("preference") is not None]
    delta = {r["len_1"] - r["len_2"] for r in rows}
    if len(annotated) < N_SPLITS or len(delta) < 2:
        return {"lc_win_rate": None, "lc_note": f"needs at least {N_SPLITS} annotated rows whose length differences vary"}
    try:
        glm, names, x, labels, test, weights = _design(rows, gamed)
        keep = [k for k, t in enumerate(labels) if t is not None]
        predicted, w = fit_predict([x[k] for k in keep], [labels[k] for k in keep], test,  # type: ignore[misc]
                                   None if weights is None else [weights[k] for k in keep])
    except (MissingExtra, ValueError) as exc:
        return {"lc_win_rate": None, "lc_note": str(exc)}
    sem = _sem(predicted)
    return {
        "lc_win_rate": 100 * sum(predicted) / len(predicted),
        "lc_standard_error": None if sem is None else 100 * sem,
        "glm": glm,
        "glm_weights": dict(zip(names, w)),
    }
