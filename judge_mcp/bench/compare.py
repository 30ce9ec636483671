"""`judge-mcp bench-report --compare RUN_A RUN_B`: did a change help? Two runs compared on the items both judged.

Each run is a summary (`judge-mcp bench --out`, or rebuilt from a bench database) with its `per_item` outcomes
(bench/uncertainty.py). On the shared items, per figure (accuracy: the mean of the two orders, per item the share of its placements right;
first_order_accuracy: the chosen-first placement right; pair_accuracy;
consistency; position_bias: first-shown picks over the parsed verdicts naming a position), `compare` gives each
run's value, the paired difference B - A (positive: B scores higher), and its 95% interval from a seeded paired
bootstrap over the shared items (stats/intervals.nested_bootstrap's scheme: the same items drawn for both runs). For
runs judged with `--repeats K`, each drawn item also draws one of its K runs, so the spread between runs widens the
same interval. For the right/wrong figures (first_order_accuracy, pair_accuracy), McNemar's exact test on the discordant items
(right in one run only; the first repeat of each): a two-sided binomial p under "neither run is better".
"""

from __future__ import annotations

import html
import random
from collections.abc import Callable, Sequence
from typing import Any

from judge_mcp.stats import intervals

# figure -> (index in a per_item entry, None: a share of flags; else the first-shown picks / parsed verdicts)
# (accuracy: index 5, absent from runs stored before it: then the figure is left out)
FIGURES: dict[str, int | None] = {"accuracy": 5, "first_order_accuracy": 0, "pair_accuracy": 1, "consistency": 2,
                                  "position_bias": None}
BINARY = ("first_order_accuracy", "pair_accuracy")
Entry = Sequence[float | None]


class CompareError(ValueError):
    """Two runs that cannot be compared, said in plain words."""


def _label(s: dict[str, Any]) -> str:
    return f"{s.get('method_key', '?')} · {s.get('model', '?')}"


def _value(entries: list[Entry], figure: str) -> float | None:
    """The figure over one entry per item."""
    k = FIGURES[figure]
    if k is not None:
        flags = [e[k] if len(e) > k else None for e in entries]
        return None if not flags or any(f is None for f in flags) else sum(f for f in flags if f is not None) / len(flags)
    picks = [(e[3], e[4]) for e in entries if e[3] is not None and e[4] is not None]
    parsed = sum(p for _, p in picks if p is not None)
    return sum(f for f, _ in picks if f is not None) / parsed if parsed else None


def _paired_interval(runs_a: list[list[Entry]], runs_b: list[list[Entry]], figure: str) -> intervals.Ci:
    """The bootstrap interval of B - A over the shared items (each drawn item draws one run of each, see the module
    doc); "too few" under intervals.MIN_BOOTSTRAP items."""
    n = len(runs_a)
    if n < intervals.MIN_BOOTSTRAP:
        return intervals.too_few(n)
    rng = random.Random(intervals.SEED)
    diffs = []
    for _ in range(intervals.rounds_for(n)):
        drawn = [int(rng.random() * n) for _ in range(n)]
        a = [runs_a[i][int(rng.random() * len(runs_a[i]))] for i in drawn]
        b = [runs_b[i][int(rng.random() * len(runs_b[i]))] for i in drawn]
        va, vb = _value(a, figure), _value(b, figure)
        if va is not None and vb is not None:
            diffs.append(vb - va)
    if not diffs:
        return None
    return [intervals.percentile(diffs, 2.5), intervals.percentile(diffs, 97.5)]


def _mean(runs: list[list[Entry]], figure: str, value: Callable[[list[Entry], str], float | None] = _value) -> float | None:
    """The figure averaged over a run's repeats (each repeat over every shared item)."""
    k = min(len(r) for r in runs)
    values = [value([r[j] for r in runs], figure) for j in range(k)]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None) / k


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The comparison of run B with run A (see the module doc); CompareError when they cannot be compared."""
    for name, s in (("RUN_A", a), ("RUN_B", b)):
        if not isinstance(s.get("per_item"), dict):
            raise CompareError(f"{name} ({_label(s)}) has no per-item outcomes: it was summarised before they were kept; "
                               "run its `judge-mcp bench` command again (finished items are read back, not judged again)")
    if a.get("dataset") != b.get("dataset"):
        raise CompareError(f"the runs judged different datasets ({a.get('dataset')!r} and {b.get('dataset')!r})")
    items_a, items_b = a["per_item"], b["per_item"]
    shared = sorted(set(items_a) & set(items_b))
    if not shared:
        raise CompareError("the runs share no judged item")
    runs_a, runs_b = [items_a[i] for i in shared], [items_b[i] for i in shared]
    out: dict[str, Any] = {
        "run_a": _label(a), "run_b": _label(b), "dataset": a.get("dataset"), "shared_items": len(shared),
        "only_a": len(set(items_a) - set(items_b)), "only_b": len(set(items_b) - set(items_a)),
        "repeats": [max(len(r) for r in runs_a), max(len(r) for r in runs_b)], "figures": {},
    }
    for figure, k in FIGURES.items():
        va, vb = _mean(runs_a, figure), _mean(runs_b, figure)
        if va is None or vb is None:
            continue
        row: dict[str, Any] = {"a": va, "b": vb, "difference": vb - va, "ci": _paired_interval(runs_a, runs_b, figure)}
        if figure in BINARY and k is not None:
            a_only = sum(1 for ra, rb in zip(runs_a, runs_b) if ra[0][k] and not rb[0][k])
            b_only = sum(1 for ra, rb in zip(runs_a, runs_b) if rb[0][k] and not ra[0][k])
            row["mcnemar"] = {"a_only": a_only, "b_only": b_only, "p": intervals.mcnemar_exact(a_only, b_only)}
        out["figures"][figure] = row
    return out


def _ci(ci: Any) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if isinstance(ci, list) else str(ci)


def format_comparison(c: dict[str, Any]) -> str:
    """The comparison for the terminal."""
    lines = [f"{c['dataset']}: B = {c['run_b']}  vs  A = {c['run_a']}",
             f"{c['shared_items']} items judged by both (only A: {c['only_a']}, only B: {c['only_b']}); repeats A {c['repeats'][0]}, B {c['repeats'][1]}",
             f"{'figure':<15}{'A':>8}{'B':>8}{'B - A':>9}  {'95% interval':<20}McNemar (exact)"]
    for figure, row in c["figures"].items():
        m = row.get("mcnemar")
        test = f"right only in A {m['a_only']}, only in B {m['b_only']}: p = {m['p']:.4g}" if m else ""
        lines.append(f"{figure:<15}{row['a']:>8.3f}{row['b']:>8.3f}{row['difference']:>+9.3f}  {_ci(row['ci']):<20}{test}")
    lines.append("B - A > 0: B scores higher. An interval that holds 0, or a McNemar p above 0.05, says these items cannot "
                 "tell the runs apart on that figure (position bias: nearer 0.5 is better).")
    return "\n".join(lines)


def _mcnemar_cell(row: dict[str, Any]) -> str:
    m = row.get("mcnemar")
    return "" if m is None else f"{m['a_only']} / {m['b_only']}, p = {m['p']:.4g}"


def html_section(c: dict[str, Any]) -> str:
    """The comparison in the HTML report: the paired differences with their intervals, and the table."""
    # lazy: the chart module loads with the report, not with the terminal's comparison
    from judge_mcp.bench.interval_chart import interval_chart

    esc = html.escape
    chart = interval_chart(f"B - A on {c['shared_items']} shared items (95% interval)",
                           [(f, row["difference"], row["ci"]) for f, row in c["figures"].items()], reference=0.0)
    rows = "".join(
        f"<tr><td>{esc(f)}</td><td>{row['a']:.3f}</td><td>{row['b']:.3f}</td><td>{row['difference']:+.3f}</td><td>{esc(_ci(row['ci']))}</td>"
        f"<td>{esc(_mcnemar_cell(row))}</td></tr>"
        for f, row in c["figures"].items()
    )
    return (f"<h2>Compared: {esc(c['run_b'])} (B) against {esc(c['run_a'])} (A) <span class='note'>({esc(c['dataset'])})</span></h2>"
            f"<div class='chart'>{chart}</div><table><tr><th>figure</th><th>A</th><th>B</th><th>B - A</th><th>95% interval</th>"
            f"<th>right only in A / only in B, McNemar</th></tr>{rows}</table>"
            "<p class='note'>Paired over the items both runs judged: the interval is a seeded bootstrap over those items (with "
            "--repeats, over each item's repeats too); McNemar's exact test counts the items only one run got right.</p>")
