"""Rankings of named candidates from pairwise verdicts: Bradley–Terry strengths on Arena-Hard-Auto's scale, with
seeded bootstrap 95% intervals. Pure functions.

A battle is (candidate a, candidate b, outcome): "A" (a won), "B" (b won) or "tie". judge_stats makes one battle of
each compare_pair / lwe_judge verdict that names its candidates and has both orders parsed: the winner when the two
orders agree, a tie when they disagree (inconsistent pairs as ties). The bench makes one per judged item.

The strengths are Arena-Hard-Auto's `compute_mle_elo` (lmarena/arena-hard-auto, utils_math.py, with show_result.py's
bootstrap): every battle counted twice; a win is two wins, a tie one win each way; the unpenalised logistic
regression of P(a beats b) = 1 / (1 + 10^((R_b - R_a) / SCALE)), written R = SCALE * beta + INIT_RATING with the
betas summing to 0 (what its solver, started at 0, converges to when no baseline anchors them: the mean rating is
INIT_RATING). Here the likelihood is maximised by Newton's method on the aggregated pair counts (the same optimum;
tests/stats/test_bradley_terry.py holds it to scikit-learn's fit of the published form). The interval is the 2.5th
and 97.5th percentiles of the strengths fitted on ROUNDS resamples of the battles (show_result.py's num_rounds
default, 100), drawn by intervals.resamples with a fixed seed.

A candidate that won (or lost) every battle it had has no finite strength: its strength is null, and so is any
interval when a resample has no finite fit (its `ci` says so instead of numbers).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from judge_mcp.stats import intervals

SCALE, BASE, INIT_RATING = 400.0, 10.0, 1000.0  # Arena-Hard-Auto's compute_mle_elo defaults
ROUNDS = 100  # Arena-Hard-Auto's show_result.py --num-rounds default
MIN_BATTLES = 10  # fewer battles: strengths, but no interval
MAX_CANDIDATES = 20  # more named candidates: the 20 with the most battles are ranked (Newton on p x p, 100 refits)
TOL = 1e-10
MAX_STEPS = 100

Battle = tuple[str, str, str]  # (candidate a, candidate b, "A" | "B" | "tie")
Fit = dict[str, float] | None  # candidate -> rating; None when some strength is infinite (no finite optimum)


Cell = tuple[int, int, float]  # (i, j) with i < j, and i's wins of the battle's two rows: 2, 1 (a tie) or 0


def _cell(battle: Battle, index: dict[str, int]) -> Cell | None:
    """A battle as compute_mle_elo's two rows: (i, j, i's wins) with i < j; None for a candidate against itself."""
    a, b, outcome = battle
    i, j = index[a], index[b]
    if i == j:
        return None
    won = 2.0 if outcome == "A" else 0.0 if outcome == "B" else 1.0
    return (i, j, won) if i < j else (j, i, 2.0 - won)


def _pairs(cells: dict[Cell, int]) -> dict[tuple[int, int], list[float]]:
    """Per pair (i < j) from cell counts: [rows, i's wins] in compute_mle_elo's doubled form."""
    pairs: dict[tuple[int, int], list[float]] = {}
    for (i, j, won), count in cells.items():
        cell = pairs.setdefault((i, j), [0.0, 0.0])
        cell[0] += 2.0 * count
        cell[1] += won * count
    return pairs


def _fit_cells(names: Sequence[str], cells: dict[Cell, int]) -> Fit:
    pairs = _pairs(cells)
    if not _finite(len(names), pairs):
        return None
    return {name: SCALE * b + INIT_RATING for name, b in zip(names, _newton(len(names), pairs))}


def _finite(p: int, pairs: dict[tuple[int, int], list[float]]) -> bool:
    """Whether the maximum-likelihood strengths are finite: every candidate both gained and gave up something, and the
    graph of pairs where each side won something connects all of them (Zermelo's condition: strongly connected)."""
    beats: list[set[int]] = [set() for _ in range(p)]
    for (i, j), (rows, won) in pairs.items():
        if won > 0:
            beats[i].add(j)
        if rows - won > 0:
            beats[j].add(i)
    for graph in (beats, [{i for i in range(p) if j in beats[i]} for j in range(p)]):
        seen, todo = {0}, [0]
        while todo:
            for k in graph[todo.pop()]:
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
        if len(seen) < p:
            return False
    return True


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the matrix is small: one row per candidate)."""
    n = len(rhs)
    m = [row[:] + [rhs[k]] for k, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            if f:
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    out = [0.0] * n
    for r in range(n - 1, -1, -1):
        out[r] = (m[r][n] - sum(m[r][c] * out[c] for c in range(r + 1, n))) / m[r][r]
    return out


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _newton(p: int, pairs: dict[tuple[int, int], list[float]]) -> list[float]:
    """The sum-zero betas maximising the likelihood (finite: checked by the caller)."""
    ln = math.log(BASE)
    beta = [0.0] * p
    for _ in range(MAX_STEPS):
        grad = [0.0] * p
        hess = [[1.0] * p for _ in range(p)]  # + the all-ones matrix: the sum-zero direction (H is a Laplacian)
        for (i, j), (rows, won) in pairs.items():
            s = _sigmoid(ln * (beta[i] - beta[j]))
            g = ln * (rows * s - won)
            grad[i] += g
            grad[j] -= g
            h = ln * ln * rows * s * (1.0 - s)
            hess[i][i] += h
            hess[j][j] += h
            hess[i][j] -= h
            hess[j][i] -= h
        step = _solve(hess, [-g for g in grad])
        beta = [b + d for b, d in zip(beta, step)]
        if max(abs(d) for d in step) < TOL:
            break
    mean = sum(beta) / p
    return [b - mean for b in beta]


def fit(battles: Sequence[Battle], candidates: Sequence[str] | None = None) -> Fit:
    """Each candidate's rating (SCALE * beta + INIT_RATING, mean INIT_RATING), or None when a strength is infinite.
    `candidates`: the names to rate (default: those in the battles, in order of appearance)."""
    names = list(candidates) if candidates is not None else list(dict.fromkeys(n for a, b, _ in battles for n in (a, b)))
    index = {name: k for k, name in enumerate(names)}
    if len(names) < 2:
        return None
    return _fit_cells(names, Counter(c for c in (_cell(bt, index) for bt in battles) if c is not None))


def bootstrap_fits(battles: Sequence[Battle], candidates: Sequence[str], rounds: int = ROUNDS, seed: int = intervals.SEED) -> list[Fit]:
    """The fits of `rounds` resamples of the battles (intervals.resamples: the same battles give the same fits). A
    resample is counted per cell (pair and outcome), so its cost is the draw of its indices."""
    index = {name: k for k, name in enumerate(candidates)}
    kinds: dict[Cell | None, int] = {}
    kind_of = [kinds.setdefault(_cell(bt, index), len(kinds)) for bt in battles]
    cells = list(kinds)
    fits: list[Fit] = []
    for idx in intervals.resamples(len(battles), rounds, seed):
        counts = Counter(map(kind_of.__getitem__, idx))
        fits.append(_fit_cells(candidates, {cell: counts[k] for k, cell in enumerate(cells) if cell is not None and counts[k]}))
    return fits


def ranking(battles: Sequence[Battle], *, rounds: int = ROUNDS, seed: int = intervals.SEED) -> list[dict[str, Any]]:
    """Per candidate, best first: `name`, `strength` (rating, 2 places; null when infinite), `ci` ([2.5th, 97.5th]
    percentiles of the bootstrap ratings, "too few" under MIN_BATTLES battles, null when a resample has no finite
    fit for it), `battles`, `wins`, `losses`, `ties`, and `consistent`: the share of its battles that were not ties (in
    judge_stats, where a tie is a verdict whose two orders disagreed, its share of consistent verdicts)."""
    tally: dict[str, list[int]] = {}
    for a, b, outcome in battles:
        for name, won, lost in ((a, "A", "B"), (b, "B", "A")):
            t = tally.setdefault(name, [0, 0, 0, 0])
            t[0] += 1
            t[1] += outcome == won
            t[2] += outcome == lost
            t[3] += outcome == "tie"
    names = sorted(tally, key=lambda name: -tally[name][0])[:MAX_CANDIDATES]
    kept = set(names)
    battles = [bt for bt in battles if bt[0] in kept and bt[1] in kept and bt[0] != bt[1]]
    point = fit(battles, names) if len(names) >= 2 else None
    samples: list[Fit] = bootstrap_fits(battles, names, rounds, seed) if point is not None and len(battles) >= MIN_BATTLES else []
    degenerate = sum(s is None for s in samples)
    rows: list[dict[str, Any]] = []
    for name in names:
        ci: intervals.Ci = intervals.too_few(len(battles)) if point is not None and len(battles) < MIN_BATTLES else None
        if degenerate:
            ci = f"unbounded ({degenerate} of {len(samples)} resamples have no finite fit)"
        elif samples:
            values = [s[name] for s in samples if s is not None]
            ci = [round(intervals.percentile(values, 2.5), 2), round(intervals.percentile(values, 97.5), 2)]
        n, wins, losses, ties = tally[name]
        rows.append({"name": name, "strength": None if point is None else round(point[name], 2), "ci": ci,
                     "battles": n, "wins": wins, "losses": losses, "ties": ties, "consistent": round((wins + losses) / n, 4)})
    rows.sort(key=lambda r: (math.inf if r["strength"] is None else -r["strength"], r["name"]))
    return rows
