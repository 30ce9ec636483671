"""What a bench summary says about its own uncertainty, as pure functions over the items' outcomes (metrics.py):

- `row_ci`: each rate of a summary row (overall, a category) with its 95% interval, in the row's `ci` object keyed
  by the figure's name: Wilson (stats/intervals.py) for the proportions (accuracy, consistency, pair_accuracy,
  single_order_accuracy, judgebench_score over its judgebench_n, position_bias over the parsed verdicts naming a
  position, length_preference over the decided verdicts, parse_failures as a share of the verdicts), a seeded
  bootstrap over the items for length_bias; "too few to say (n=...)" where the sample is too small. Bounds are
  unrounded, like the summary's figures.
- `per_item`: each judged item's outcome, compact, for `judge-mcp bench-report --compare` (bench/compare.py):
  item id -> a list with one entry per run (one; K with --repeats) of [first-order right, pair_right, consistent,
  first-shown picks, parsed verdicts naming a position, share of placements right] (0/1 flags, the last 0/0.5/1;
  null where the method has no such figure). `accuracy` (a mean of per-item shares) gets a bootstrap interval.
- `battles` / `ranking`: a run whose items name the models that wrote them (pairwise `chosen_model` /
  `rejected_model`, head-to-head `generator_1` / `generator_2`) ranks those models as judge_stats ranks named
  candidates (stats/bradley_terry.py): a pair judged in both placements is a win when both name the same response,
  a tie when they disagree (or a placement's verdict is a tie), and is left out when one is unparsed; a head-to-head
  row is judged in one order, its preference (AlpacaEval's, 1..2) a win either way or a tie at 1.5.
"""

from __future__ import annotations

from typing import Any

from judge_mcp.stats import bradley_terry, intervals

Outcome = dict[str, Any]


def _mean_ci(values: list[float]) -> intervals.Ci:
    """A share of 0/1 values by Wilson; of per-item shares (some 0.5) by a seeded bootstrap over the items."""
    if all(v in (0.0, 1.0) for v in values):
        return intervals.ci_rate(int(sum(values)), len(values), places=None)
    return intervals.ci_mean(values, places=None)


def _flag(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def row_ci(outcomes: list[Outcome], row: dict[str, Any], degenerate: int = 0) -> dict[str, intervals.Ci]:
    """The `ci` object of a summary row computed from `outcomes` (see the module doc); figures the row has as null get
    none."""
    n = len(outcomes)

    def wilson(count: int, of: int) -> intervals.Ci:
        return intervals.ci_rate(count, of, places=None)

    ci: dict[str, intervals.Ci] = {
        # the mean of the orders: per-item shares (0, 0.5, 1), so a bootstrap over the items, not Wilson
        "accuracy": _mean_ci([float(o["right"]) for o in outcomes]),
        "first_order_accuracy": wilson(sum(bool(o.get("first_right", o["right"])) for o in outcomes), n),
        "pair_accuracy": wilson(sum(bool(o["pair_right"]) for o in outcomes), n),
        "parse_failures": wilson(sum(o["parse_failures"] for o in outcomes), sum(o["verdicts"] for o in outcomes)),
    }
    if row.get("consistency") is not None:
        ci["consistency"] = wilson(sum(bool(o["consistent"]) for o in outcomes), n)
    if row.get("single_order_accuracy") is not None:
        ci["single_order_accuracy"] = wilson(sum(bool(o["single_right"]) for o in outcomes), n)
    if row.get("judgebench_score") is not None:
        ci["judgebench_score"] = wilson(sum(bool(o["judgebench_right"]) for o in outcomes), n + degenerate)
    with_position = [o for o in outcomes if o["first_shown_picks"] is not None]
    if row.get("position_bias") is not None:
        parsed = sum(o["parsed_verdicts"] - o.get("tie_verdicts", 0) for o in with_position)
        ci["position_bias"] = wilson(sum(o["first_shown_picks"] for o in with_position), parsed)
    decided = sum(o.get("length_decided", 0) for o in outcomes)
    if row.get("length_preference") is not None:
        ci["length_preference"] = wilson(sum(o.get("longer_picks", 0) for o in outcomes), decided)
    if row.get("length_bias") is not None:
        def bias(idx: list[int]) -> float | None:
            den = sum(outcomes[i].get("length_decided", 0) for i in idx)
            num = sum(outcomes[i].get("longer_picks", 0) - outcomes[i].get("longer_gold", 0) for i in idx)
            return num / den if den else None

        ci["length_bias"] = intervals.ci_bootstrap(n, bias, places=None)
    return ci


def per_item(items: list[tuple[str, Outcome]]) -> dict[str, list[list[float | None]]]:
    """item id -> [[first-order right, pair_right, consistent, first-shown picks, parsed verdicts naming a position,
    share of the placements right]] (one run)."""
    out: dict[str, list[list[float | None]]] = {}
    for item_id, o in items:
        picks = o["first_shown_picks"]
        parsed = None if picks is None else o["parsed_verdicts"] - o.get("tie_verdicts", 0)
        out[item_id] = [[_flag(o.get("first_right", o["right"])), _flag(o["pair_right"]), _flag(o["consistent"]), picks, parsed,
                         float(o["right"])]]
    return out


def _pair_battle(records: list[dict[str, Any]]) -> tuple[str, str, str] | None:
    models = records[0].get("models")
    if not isinstance(models, list) or len(models) != 2 or models[0] == models[1] or len(records) != 2:
        return None
    said = ["tie" if r.get("tie") else r.get("names") for r in records]
    if any(s not in ("chosen", "rejected", "tie") for s in said):
        return None  # a placement left unparsed: no battle, as judge_stats leaves it out
    outcome = ("A" if said[0] == "chosen" else "B") if said[0] == said[1] != "tie" else "tie"
    return str(models[0]), str(models[1]), outcome


def _head_to_head_battle(record: dict[str, Any]) -> tuple[str, str, str] | None:
    generators, preference = record.get("generators"), record.get("preference")
    if not isinstance(generators, list) or len(generators) != 2 or generators[0] == generators[1]:
        return None
    if not isinstance(preference, (int, float)) or isinstance(preference, bool):
        return None
    outcome = "tie" if preference == 1.5 else "B" if preference > 1.5 else "A"
    return str(generators[0]), str(generators[1]), outcome


def battles(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """The run's battles between the models its items name (see the module doc), in item order."""
    out = []
    for _, _, _, done in complete:
        records = [done[p] for p in placements]
        battle = _pair_battle(records) if len(records) == 2 else _head_to_head_battle(records[0]) if len(records) == 1 else None
        if battle is not None:
            out.append(battle)
    return out


def ranking(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """The ranking of the models the items name (bradley_terry.ranking), or None when they name fewer than two."""
    found = battles(complete, placements)
    if len({name for a, b, _ in found for name in (a, b)}) < 2:
        return None
    return bradley_terry.ranking(found)


def without_undefined(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with each row's `ci` limited to the figures it has (a published judge's run nulls the gold-label
    figures of its rows after they were computed: bench/published.py)."""
    for row in [summary.get("overall"), *(summary.get("categories") or {}).values()]:
        if isinstance(row, dict) and isinstance(row.get("ci"), dict):
            row["ci"] = {k: v for k, v in row["ci"].items() if row.get(k) is not None}
    return summary


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The terminal's lines: the overall row's 95% intervals, and the ranking of the models the items name."""
    ci = (s.get("overall") or {}).get("ci") or {}
    shown = [f"{k} [{v[0]:.3f}, {v[1]:.3f}]" if isinstance(v, list) else f"{k} (n too small)" for k, v in ci.items() if v is not None]
    lines = [f"95% intervals, overall: {'; '.join(shown)}"] if shown else []
    for k, r in enumerate(s.get("ranking") or [], 1):
        if k == 1:
            lines.append("ranking of the models the items name (Bradley-Terry strength, mean 1000, 95% interval; wins/losses/ties):")
        strength = "-" if r["strength"] is None else f"{r['strength']:.0f}"
        interval = f"[{r['ci'][0]:.0f}, {r['ci'][1]:.0f}]" if isinstance(r["ci"], list) else str(r["ci"] or "")
        lines.append(f"  {k}. {r['name']}: {strength} {interval}; {r['wins']}/{r['losses']}/{r['ties']} of {r['battles']}")
    return lines


def with_win_rate_ci(summary: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """An alpaca-eval run's `alpaca_eval` block with `ci.win_rate`: the seeded bootstrap 95% interval of AlpacaEval's
    win rate (100 x the mean of preference - 1) over the annotated rows, in file order. The LC win rate's interval
    would refit its GLM per resample (intervals.bootstrap takes any statistic of the resampled rows); not computed here."""
    block = summary.get("alpaca_eval")
    if not isinstance(block, dict):
        return summary
    done = sorted((r for r in rows if r["status"] == "done" and isinstance(r.get("record"), dict)), key=lambda r: r["seq"])
    shifted = [100.0 * (r["record"]["preference"] - 1.0) for r in done if isinstance(r["record"].get("preference"), (int, float))]
    block["ci"] = {"win_rate": intervals.ci_mean(shifted, places=None)}
    return summary
