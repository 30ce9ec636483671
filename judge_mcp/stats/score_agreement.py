"""Agreement of scores with human score labels (score_response verdicts, judge_stats' `agreement.scores`): mean
absolute error, Spearman's rho and Kendall's tau-b. Pure functions, O(n log n) in the number of labels.

- mae: mean |score - label|;
- spearman: Pearson's correlation of the ranks (ties get their average rank);
- kendall: tau-b, (concordant - discordant) / sqrt((n0 - ties in x) (n0 - ties in y)), counted by Knight's
  algorithm (a sort, then a merge sort counting the swaps), so thousands of labels cost milliseconds.
A correlation is None with fewer than two pairs or when either side is constant (it is undefined then).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mae(pairs: Sequence[tuple[float, float]]) -> float | None:
    return round(sum(abs(x - y) for x, y in pairs) / len(pairs), 4) if pairs else None


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(pairs: Sequence[tuple[float, float]]) -> float | None:
    if len(pairs) < 2:
        return None
    rx, ry = _ranks([x for x, _ in pairs]), _ranks([y for _, y in pairs])
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return round(cov / math.sqrt(vx * vy), 4) if vx > 0 and vy > 0 else None


def _tied_pairs(values: Sequence[object]) -> int:
    """Pairs sharing a value, for values given sorted."""
    total, run = 0, 1
    for k in range(1, len(values) + 1):
        if k < len(values) and values[k] == values[k - 1]:
            run += 1
        else:
            total += run * (run - 1) // 2
            run = 1
    return total


def _swaps(values: list[float]) -> int:
    """Inversions of `values` (strictly greater before smaller), counted by a bottom-up merge sort; sorts in place."""
    n, swaps, width = len(values), 0, 1
    buffer = values[:]
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if values[j] < values[i]:
                    buffer[k] = values[j]
                    swaps += mid - i
                    j += 1
                else:
                    buffer[k] = values[i]
                    i += 1
                k += 1
            buffer[k:hi] = values[i:mid] if i < mid else values[j:hi]
        values[:] = buffer
        width *= 2
    return swaps


def kendall(pairs: Sequence[tuple[float, float]]) -> float | None:
    n = len(pairs)
    if n < 2:
        return None
    ordered = sorted(pairs)
    xs, ys = [x for x, _ in ordered], [y for _, y in ordered]
    n0 = n * (n - 1) // 2
    ties_x, ties_xy = _tied_pairs(xs), _tied_pairs(ordered)
    discordant = _swaps(ys)
    ties_y = _tied_pairs(ys)  # ys are sorted now
    denominator = math.sqrt((n0 - ties_x) * (n0 - ties_y))
    if denominator == 0:
        return None
    concordant_minus_discordant = n0 - ties_x - ties_y + ties_xy - 2 * discordant
    return round(concordant_minus_discordant / denominator, 4)
