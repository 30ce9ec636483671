"""95% intervals for the figures judge_stats, `judge-mcp stats` and the bench show: pure functions, no state.

- `wilson(count, n)`: the Wilson score interval of a proportion (Wilson 1927; e.g. 14 of 20: [0.4810, 0.8545]).
- `bootstrap(n, statistic)`: the percentile interval of a statistic over `n` items resampled with replacement
  (`rounds` resamples drawn by `random.Random(seed)`, so the same items give the same interval), for kappa, the rank
  correlations, ECE, MAE, length bias, win rates and any other figure that is not a plain proportion. Percentiles
  interpolate linearly between order statistics (numpy's default, as Arena-Hard-Auto's np.percentile).
- `mcnemar_exact(b, c)`: McNemar's exact test of paired right/wrong outcomes, the two-sided binomial p of the
  discordant pairs (b: right only in the first, c: right only in the second) under p = 1/2.

Where the sample is too small to say anything, an interval is the text `too_few(n)` says (`ci` fields are then a
string, never a number): proportions with fewer than MIN_N items, bootstrap figures with fewer than MIN_BOOTSTRAP.
`ci_rate` and `ci_bootstrap` give what a `ci` field holds: `[low, high]` rounded to 4 places, that text, or None
when the figure itself is undefined (nothing counted).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
MIN_N = 5  # a proportion of fewer items gets no interval, only "too few"
MIN_BOOTSTRAP = 10  # likewise for a bootstrap figure (a resample of under 10 items is mostly ties and repeats)
ROUNDS = 1000  # bootstrap resamples
SEED = 20240
MAX_DRAWS = 2_000_000  # a bootstrap draws at most this many items in all: big samples get fewer rounds (at least MIN_ROUNDS)
MIN_ROUNDS = 200
PLACES = 4

Ci = list[float] | str | None  # what a `ci` field holds


def too_few(n: int) -> str:
    """What an interval says instead of numbers when its sample is too small."""
    return f"too few to say (n={n})"


def wilson(count: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of count / n; None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= count <= n:
        raise ValueError(f"count {count} is not between 0 and n={n}")
    p = count / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (0.0 if count == 0 else max(0.0, centre - half)), (1.0 if count == n else min(1.0, centre + half))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of `values`, interpolated linearly between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def rounds_for(n: int, rounds: int = ROUNDS) -> int:
    """How many resamples a bootstrap of n items draws: `rounds`, fewer for big samples (MAX_DRAWS items in all)."""
    return max(min(rounds, MIN_ROUNDS), min(rounds, MAX_DRAWS // max(n, 1)))


def resamples(n: int, rounds: int, seed: int = SEED) -> Iterator[list[int]]:
    """`rounds` lists of n item indices drawn with replacement, the same for the same (n, rounds, seed)."""
    rng = random.Random(seed)
    for _ in range(rounds):
        yield [int(rng.random() * n) for _ in range(n)]


def bootstrap(
    n: int, statistic: Callable[[list[int]], float | None], *, rounds: int = ROUNDS, seed: int = SEED, level: float = 0.95
) -> tuple[float, float] | None:
    """The percentile interval of `statistic(indices)` over bootstrap resamples of n items; None when n is 0 or the
    statistic is undefined on every resample (resamples where it is undefined, e.g. a constant side of a correlation,
    are left out)."""
    if n <= 0:
        return None
    values = [v for idx in resamples(n, rounds_for(n, rounds), seed) if (v := statistic(idx)) is not None and math.isfinite(v)]
    if not values:
        return None
    tail = (1.0 - level) * 50.0
    return percentile(values, tail), percentile(values, 100.0 - tail)


def _pair(interval: tuple[float, float] | None, places: int | None) -> Ci:
    if interval is None:
        return None
    return list(interval) if places is None else [round(interval[0], places), round(interval[1], places)]


def ci_rate(count: int, n: int, places: int | None = PLACES) -> Ci:
    """A proportion's `ci`: its Wilson interval, "too few" under MIN_N items, None when n is 0. `places`: None keeps
    the bounds unrounded (the bench's JSON summaries)."""
    if n <= 0:
        return None
    if n < MIN_N:
        return too_few(n)
    return _pair(wilson(count, n), places)


def ci_bootstrap(
    n: int, statistic: Callable[[list[int]], float | None], *, defined: bool = True, rounds: int = ROUNDS, seed: int = SEED,
    places: int | None = PLACES,
) -> Ci:
    """A bootstrap figure's `ci`: its interval over n items, "too few" under MIN_BOOTSTRAP, None when the figure is
    undefined (`defined` false) or n is 0."""
    if n <= 0 or not defined:
        return None
    if n < MIN_BOOTSTRAP:
        return too_few(n)
    return _pair(bootstrap(n, statistic, rounds=rounds, seed=seed), places)


def ci_mean(values: Sequence[float], *, rounds: int = ROUNDS, seed: int = SEED, places: int | None = PLACES) -> Ci:
    """The bootstrap `ci` of the mean of `values` (a win rate with ties as halves, a paired difference)."""
    vs = list(values)
    return ci_bootstrap(len(vs), lambda idx: sum(vs[i] for i in idx) / len(idx), rounds=rounds, seed=seed, places=places)


def nested_bootstrap(
    runs_per_item: Sequence[Sequence[float]], *, rounds: int = ROUNDS, seed: int = SEED, level: float = 0.95
) -> tuple[float, float] | None:
    """The percentile interval of a mean over items whose value varies between runs (`--repeats`): each resample
    draws the items with replacement and, for each, one of its runs, so the interval holds both the items' spread
    and the runs'. With one run per item it is `bootstrap` of the mean."""
    items = [list(v) for v in runs_per_item if v]
    n = len(items)
    if n == 0:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(rounds_for(n, rounds)):
        total = 0.0
        for _ in range(n):
            runs = items[int(rng.random() * n)]
            total += runs[int(rng.random() * len(runs))]
        values.append(total / n)
    tail = (1.0 - level) * 50.0
    return percentile(values, tail), percentile(values, 100.0 - tail)


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided p for b and c discordant pairs: 2 * P(X <= min(b, c)), X ~ Binomial(b + c, 1/2),
    at most 1; 1.0 when there are no discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be 0 or more, got {b} and {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2.0 * tail / 2.0 ** n) if n < 1000 else min(1.0, math.exp(math.log(tail) + math.log(2.0) - n * math.log(2.0)))
