"""The bench metrics, as pure functions over stored rows (tested directly in tests/bench/test_metrics.py).

Pairwise-judging methods (two placements per item):
- accuracy: the mean of the two placements' accuracies (per item, the share of its placements that are right);
- first_order_accuracy: the first placement (chosen shown first) alone is right;
- consistency: both placements name the same response;
- pair_accuracy: both placements are right;
- position_bias: share of parsed verdicts naming the first-shown response, ties left out (null when none);
  position_bias_unbiased: the same for a judge without position bias (0.5; grade: the mean of 1/n shown options);
- length_preference, length_gold_share, length_bias; strict_score (the GRP paper's rule): see figures.py;
- single_order_accuracy: the LWE paper's Accuracy, on one seeded random placement per item (`placement_for`);
- judgebench_score: JudgeBench's official score (utils/metrics.py `compute_final_metrics`, reverse_order): per
  pair, +1 for each placement naming the chosen response, -1 for each naming the rejected one (a tie or an
  unparsed verdict: 0); the pair is right when the sum is > 0. So right-and-tie counts right, right-and-wrong
  (inconsistent) and tie-and-tie count wrong. Degenerate pairs (identical or empty responses), which the other
  figures leave out, count in its denominator as JudgeBench counts them: JudgeBench judges every pair of its file,
  and for identical responses both placements show the judge the same prompt, so a deterministic judge (temperature
  0, the second answer from the call cache) names the same position twice: +1 - 1 = 0, wrong; an empty response
  cannot be sent, which JudgeBench scores as a failed judgment (0, wrong). `degenerate` in the summary counts them,
  `judgebench_n` is the score's denominator;
- ties: only arena-hard has one ([[A=B]]): no winner, counted wrong (and not as a parse failure); unparsed
  verdicts count as wrong and in parse_failures;
- reasked_verdicts: verdicts that came only from a re-ask or a continuation (`--no-reask` sends none).
Response-wise methods (flip, pointwise) and grade (one row per item): accuracy = pair_accuracy = the gold response
is the single best (ties and any unparsed response wrong); consistency and position_bias only for grade (every
rotation picked the same option; share of parsed trials picking the first-shown option), else null.
Verdict probabilities (`calibration` in the summary): see calibration.py.
Adaptive swap (`+auto` runs, `adaptive` in the summary): each placement judged with compare_pair swap="auto" and
with swap=true on the same items; per judgment the calls each needed (sent + answered from the cache), the share
where the second order ran, accuracy (the verdict names the chosen response) and pair accuracy (right in both
placements) side by side, and the accuracy of the judgments auto settled on one order.
Panels (`--backends`): the run's rows hold the panel's verdict, and each member's own verdict under
`members`; `panel` in the summary scores every member alone over the same items (`member_rows`).
Intervals, per-item outcomes and the ranking of the models the items name (`ci` in every row, `per_item`,
`ranking`): see uncertainty.py.
Cost: calls, cached calls, tokens and characters (prompts + completions, cached calls included) per item;
seconds_per_item ("latency s") = the mean time of one item, which grows with the items in flight beside it;
wall_seconds_per_item ("wall s/item", overall only) = the run's wall time per judged item, what N items cost.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from judge_mcp.stats import intervals
from judge_mcp.stats.calibration import calibration_extras
from judge_mcp.bench import figures, uncertainty
from judge_mcp.bench.figures import length_figures

FIELDS = ("n", "accuracy", "consistency", "pair_accuracy", "position_bias", "parse_failures", "calls_per_item", "seconds_per_item")
COST_KEYS = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "prompt_chars", "completion_chars",
             "cached_prompt_tokens", "cache_write_tokens", "billed_input")
# One line per headline figure, for people (the terminal summary and the Markdown report print it).
LEGEND: tuple[tuple[str, str], ...] = (
    ("pair acc.", "right in both A/B orders (a judge that always names one position scores 0)"),
    ("single-order acc.", "right on one seeded random order per item (the LWE paper's Accuracy)"),
    ("JudgeBench score", "JudgeBench's rule: +1 per order naming the right answer, -1 per wrong one, right when > 0"),
    ("both-orders acc.", "`accuracy` in the JSON: the mean of the two orders' accuracies"),
    ("first-order acc.", "right with the right answer shown first (position bias inflates it)"),
    ("consistency", "both orders name the same answer"),
    ("position bias", "share of verdicts naming the first-shown answer (0.5 = none)"),
    ("parse fail.", "answers that could not be read as a verdict (counted wrong)"),
    ("[low, high]", "95% interval; \"too few to say\" when there are too few items to give one"),
)
PLACEMENT_SEED = 0  # the seed of the single-order placement draw (fixed, so runs compare on the same placements)


# The figures every view of a run shows (terminal, HTML report, Markdown), in this order: (key in a summary's
# "overall"/"categories" rows, short title).
# Pair accuracy and single-order accuracy lead; "accuracy" is the mean of the two orders (a purely position-biased
# judge scores 0.5), "first_order_accuracy" the chosen-first placement alone, which such a judge scores 1.0 on
# (response-wise sets: all three the same figure as pair accuracy).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("n", "n"), ("pair_accuracy", "pair acc."), ("single_order_accuracy", "single-order acc."),
    ("judgebench_score", "JudgeBench score"), ("accuracy", "both-orders acc."), ("first_order_accuracy", "first-order acc."), ("consistency", "consistency"),
    ("position_bias", "position bias"), ("length_preference", "longer picked"), ("length_bias", "length bias"),
    ("parse_failures", "parse fail."), ("ties", "ties"), ("reasked_verdicts", "re-asked"),
    ("calls_per_item", "calls/item"), ("tokens_per_item", "tokens/item"), ("wall_seconds_per_item", "wall s/item"),
    ("seconds_per_item", "latency s"),  # wall: the run's time per item; latency: one item's own, items in flight beside it
)


def legend_lines() -> list[str]:
    """The legend, one short line per figure."""
    width = max(len(title) for title, _ in LEGEND)
    return [f"  {title:<{width}}  {meaning}" for title, meaning in LEGEND]


def few_items_line(s: dict[str, Any]) -> str | None:
    """A sentence when the run has too few items for any interval (the `ci` fields say "too few to say")."""
    n = (s.get("overall") or {}).get("n") or 0
    if 0 < n < intervals.MIN_N:
        return (f"n={n} is too few to say anything: with under {intervals.MIN_N} items no interval is given and a "
                "figure can move by 1/n with one verdict; judge more items before comparing.")
    if 0 < n < intervals.MIN_BOOTSTRAP:
        return f"n={n} is small: the intervals are wide, and figures resampled over items are \"too few to say\"."
    return None


def placement_for(item_id: str, seed: int = PLACEMENT_SEED) -> int:
    """Index (0: chosen first, 1: chosen second) of the one placement an item's single-order accuracy uses:
    `random.Random(f"{seed}:{item_id}").random() < 0.5` -> 0, so it depends only on the seed and the item id."""
    return 0 if random.Random(f"{seed}:{item_id}").random() < 0.5 else 1


def judgebench_right(records: list[dict[str, Any]]) -> bool:
    """JudgeBench's rule for a pair judged in both placements (see the module docstring)."""
    counter = sum(1 if r.get("names") == "chosen" else -1 if r.get("names") == "rejected" else 0 for r in records)
    return counter > 0


def _ratio(num: float, den: float) -> float | None:
    """num / den, unrounded (JSON summaries keep every digit; rounding is for display), or None for no denominator."""
    return num / den if den else None


def group_items(rows: Iterable[dict[str, Any]], placements: tuple[str, ...]) -> dict[str, Any]:
    """Rows -> {"complete": [(seq, category, {placement: record})], "skipped": n, "errors": n, "incomplete": n}."""
    by_item: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = by_item.setdefault(row["item_id"], {"seq": row["seq"], "category": row["category"], "done": {}, "status": set(), "errors": []})
        entry["status"].add(row["status"])
        if row["status"] == "done":
            entry["done"][row["placement"]] = row["record"]
        elif row["status"] == "error":
            entry["errors"].append(row.get("error"))
    complete, skipped, errors, incomplete = [], 0, 0, 0
    skipped_by_category: dict[str, int] = defaultdict(int)
    for item_id, entry in by_item.items():
        if "skipped" in entry["status"]:
            skipped += 1
            skipped_by_category[entry["category"]] += 1
        elif all(p in entry["done"] for p in placements):
            complete.append((entry["seq"], entry["category"], item_id, entry["done"]))
        elif entry["errors"]:
            errors += 1
        else:
            incomplete += 1
    complete.sort(key=lambda c: c[0])
    return {"complete": complete, "skipped": skipped, "errors": errors, "incomplete": incomplete, "skipped_by_category": skipped_by_category}


def with_degenerate(figures: dict[str, Any], outcomes: list[dict[str, Any]], degenerate: int) -> dict[str, Any]:
    """`figures` with the JudgeBench score over the judged pairs and the `degenerate` ones (wrong, as JudgeBench
    scores them: see the module doc) and its denominator; unchanged where there is no JudgeBench score."""
    if figures.get("judgebench_score") is None:
        return figures
    n = len(outcomes) + degenerate
    right = sum(bool(o["judgebench_right"]) for o in outcomes)
    strict = sum(bool(o.get("pair_right")) for o in outcomes)  # the GRP paper's rule over the same pairs (figures.py)
    return {**figures, "judgebench_score": _ratio(right, n), "judgebench_n": n, "strict_score": _ratio(strict, n)}


def _order_figures(records: list[dict[str, Any]], item_id: str) -> tuple[bool | None, bool, bool | None, bool | None]:
    """(consistent, pair right, single-order right, JudgeBench right) of an item's placement records; the last two
    only for an item judged in both placements."""
    first = records[0]
    if len(records) == 2:
        consistent = first["names"] is not None and first["names"] == records[1]["names"]
        return consistent, bool(first["correct"] and records[1]["correct"]), bool(records[placement_for(item_id)]["correct"]), judgebench_right(records)
    return first.get("consistent"), bool(first["correct"]), None, None


def _item_seconds(records: list[dict[str, Any]]) -> float:
    """An item's wall time: from its first placement's start to its last one's end (placements run concurrently),
    else the sum of their own times (records stored before the start and end were kept)."""
    starts = [r["started_at"] for r in records if r.get("started_at") is not None]
    ends = [r["ended_at"] for r in records if r.get("ended_at") is not None]
    return (max(ends) - min(starts)) if starts and ends else sum(r.get("seconds", 0.0) for r in records)


def named(record: dict[str, Any]) -> str | None:
    """The response of a pair a verdict named, "chosen" or "rejected" (None: none): a pairwise verdict's `names`, or
    the single pick of a response-wise method (flip, pointwise, grade) on a pair, `predicted` 0 being the chosen
    response (Item.options); an AlpacaEval row's preference names "output_2" above 1.5, "output_1" below."""
    if "names" in record:
        return record["names"]
    preference = record.get("preference")
    if isinstance(preference, (int, float)) and preference != 1.5:
        return "output_2" if preference > 1.5 else "output_1"
    pick = record.get("predicted")
    return ("chosen", "rejected")[pick] if record.get("longer") and pick in (0, 1) and not isinstance(pick, bool) else None


def item_outcome(done: dict[str, dict[str, Any]], placements: tuple[str, ...], item_id: str = "") -> dict[str, Any]:
    """One item's contribution: right/consistent/both-right, verdict counts, cost and wall time."""
    records = [done[p] for p in placements]
    consistent, pair_right, single_right, jb_right = _order_figures(records, item_id)
    picks = [r["first_shown_picks"] for r in records]
    return {
        # the share of the item's placements that are right (the mean of the orders); the first placement alone
        "right": sum(bool(r["correct"]) for r in records) / len(records),
        "first_right": bool(records[0]["correct"]),
        "consistent": consistent,
        "pair_right": pair_right,
        "single_right": single_right,
        "judgebench_right": jb_right,
        "reasked": sum(bool(r.get("reasked")) for r in records),
        # a placement's tie verdict (arena-hard) is parsed but names no position: not in position bias
        "tie_verdicts": sum(1 for r in records if "shown_first" in r and r.get("tie")),
        "tie": any(r.get("tie") for r in records),
        "verdicts": sum(r["verdicts"] for r in records),
        "parsed_verdicts": sum(r["parsed_verdicts"] for r in records),
        "parse_failures": sum(r["parse_failures"] for r in records),
        "first_shown_picks": None if any(p is None for p in picks) else sum(picks),
        # what first_shown_picks would be without position bias: 1/n of the parsed picks among n shown positions
        "unbiased_picks": sum(r["parsed_verdicts"] / len(r["detail"]["position_counts"]) for r in records if (r.get("detail") or {}).get("position_counts")),
        # verdicts naming a response, of pairs whose responses differ in length: how many named the longer one
        "length_decided": sum(1 for r in records if r.get("longer") and named(r)),
        "longer_picks": sum(1 for r in records if r.get("longer") and named(r) == r["longer"]),
        "longer_gold": sum(1 for r in records if r.get("longer") == "chosen" and named(r)),  # figures.length_figures
        "seconds": _item_seconds(records),
        **{k: sum(r.get(k, 0) for r in records) for k in COST_KEYS},
        # hidden reasoning (part of completion_tokens), None when no record of the item reports it
        "reasoning_tokens": _reported_sum(r.get("reasoning_tokens") for r in records),
    }


def _reported_sum(values: Iterable[Any]) -> int | None:
    reported = [v for v in values if isinstance(v, int)]
    return sum(reported) if reported else None


def _share_of_all(flags: list[Any], n: int) -> float | None:
    """The share of true flags, only when every one of the n items has one (else null)."""
    return _ratio(sum(flags), n) if flags and len(flags) == n else None


def _quality(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(outcomes)
    with_position = [o for o in outcomes if o["first_shown_picks"] is not None]
    parsed = sum(o["parsed_verdicts"] - o.get("tie_verdicts", 0) for o in with_position)
    longer = sum(o.get("longer_picks", 0) for o in outcomes)
    return {
        "n": n,
        "accuracy": _ratio(sum(o["right"] for o in outcomes), n),
        "first_order_accuracy": _ratio(sum(o.get("first_right", o["right"]) for o in outcomes), n),
        "consistency": _share_of_all([o["consistent"] for o in outcomes if o["consistent"] is not None], n),
        "pair_accuracy": _ratio(sum(o["pair_right"] for o in outcomes), n),
        "single_order_accuracy": _share_of_all([o["single_right"] for o in outcomes if o.get("single_right") is not None], n),
        "judgebench_score": _share_of_all([o["judgebench_right"] for o in outcomes if o.get("judgebench_right") is not None], n),
        "position_bias": _ratio(sum(o["first_shown_picks"] for o in with_position), parsed) if with_position and parsed else None,
        # the position_bias of a judge without one: 0.5 for pairs, the mean of 1/n over grade's parsed trials
        "position_bias_unbiased": _unbiased(with_position, parsed),
        **length_figures(longer, sum(o.get("longer_gold", 0) for o in outcomes), sum(o.get("length_decided", 0) for o in outcomes)),
        "parse_failures": sum(o["parse_failures"] for o in outcomes),
        "verdicts": sum(o["verdicts"] for o in outcomes),
        "ties": sum(o["tie"] for o in outcomes),
        "reasked_verdicts": sum(o.get("reasked", 0) for o in outcomes),
    }


def _cost(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(outcomes)
    reporting = [o for o in outcomes if o.get("reasoning_tokens") is not None]

    def per_item(keys: tuple[str, ...]) -> float | None:
        return _ratio(sum(o[k] for o in outcomes for k in keys), n)

    return {
        "calls_per_item": per_item(("calls",)),
        "cached_calls_per_item": per_item(("cached_calls",)),
        "tokens_per_item": per_item(("prompt_tokens", "completion_tokens")),
        "prompt_tokens_per_item": per_item(("prompt_tokens",)),
        "completion_tokens_per_item": per_item(("completion_tokens",)),
        # of the items whose backend reported reasoning tokens (null when none did)
        "reasoning_tokens_per_item": _ratio(sum(o["reasoning_tokens"] for o in reporting), len(reporting)) if reporting else None,
        # the prompt cache's reads and writes, and the input billed at the ratios the summary's cache_prices names
        "cached_prompt_tokens_per_item": per_item(("cached_prompt_tokens",)),
        "cache_write_tokens_per_item": per_item(("cache_write_tokens",)),
        "billed_input_per_item": per_item(("billed_input",)),
        "chars_per_item": per_item(("prompt_chars", "completion_chars")),
        "seconds_per_item": per_item(("seconds",)),
    }


def summarise_outcomes(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_quality(outcomes), **_cost(outcomes)}


def _unbiased(with_position: list[dict[str, Any]], parsed: int) -> float | None:
    if not with_position or not parsed:
        return None
    listed = sum(o.get("unbiased_picks", 0) for o in with_position)
    return _ratio(listed, parsed) if listed else 0.5


def cumulative(flags: list[bool]) -> list[float]:
    """Running accuracy after 1, 2, ... items (the LWE paper's Figure 3)."""
    out, right = [], 0
    for k, flag in enumerate(flags, start=1):
        right += bool(flag)
        out.append(right / k)
    return out


def _lwe_cost(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> dict[str, Any]:
    """Cost as the paper counts it (Table 1): characters of every prompt and completion, relative to one vanilla
    (Figure 9) judgment of the item, i.e. half its vanilla pair (Selective LWE = 2 vanilla passes + the LWE path)."""
    vanilla = [done[placements[0]].get("vanilla_chars") for _, _, _, done in complete]
    if not vanilla or not all(v for v in vanilla):
        return {}

    def chars(record: dict[str, Any]) -> int:
        return record.get("prompt_chars", 0) + record.get("completion_chars", 0)

    one_pass = sum(vanilla) / 2
    learning = sum(chars(done[placements[0]]) for _, _, _, done in complete)
    scoring = sum(chars(done[p]) - done[p].get("vanilla_chars", 0) for _, _, _, done in complete for p in placements[1:])
    return {"relative_cost": _ratio(learning, one_pass), "relative_cost_with_scoring": _ratio(learning + scoring, one_pass)}


def _vanilla_fig9(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> dict[str, Any] | None:
    """Selective LWE's vanilla (Figure 9) pair of the chosen-first placement, judged in both orders, scored alone."""
    details = [done[placements[0]].get("detail", {}) for _, _, _, done in complete]
    pairs = [(d.get("vanilla_ab"), d.get("vanilla_ba")) for d in details if "vanilla_ab" in d and d.get("path") is not None]
    if not pairs or all(ab is None and ba is None for ab, ba in pairs):
        return None
    n = len(pairs)
    verdicts = [v for pair in pairs for v in pair if v is not None]
    return {
        "n": n,
        "accuracy": _ratio(sum(ab == "A" for ab, _ in pairs), n),
        "consistency": _ratio(sum(ab is not None and ab == ba for ab, ba in pairs), n),
        "pair_accuracy": _ratio(sum(ab == "A" and ba == "A" for ab, ba in pairs), n),
        # ab == "A": chosen (shown first) named; ba == "B": rejected (shown first in the swapped order) named
        "position_bias": _ratio(sum(ab == "A" for ab, _ in pairs) + sum(ba == "B" for _, ba in pairs), len(verdicts)),
        "parse_failures": 2 * n - len(verdicts),
    }


def lwe_extras(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> dict[str, Any]:
    details = [done[p].get("detail", {}) for _, _, _, done in complete for p in placements]
    versions = [v for d in details for v in (d.get("meta_prompt_version"), d.get("new_meta_prompt_version")) if v]
    extras: dict[str, Any] = {
        "cumulative_accuracy": cumulative([done[placements[0]]["correct"] for _, _, _, done in complete]),
        "cumulative_pair_accuracy": cumulative([all(done[p]["correct"] for p in placements) for _, _, _, done in complete]),
        "meta_path_share": _ratio(sum(d.get("path") == "meta_prompt" for d in details), len(details)),
        "refinements": sum(1 for d in details if d.get("refined")),
        "last_meta_prompt_version": max(versions) if versions else None,
        **_lwe_cost(complete, placements),
    }
    fig9 = _vanilla_fig9(complete, placements)
    if fig9 is not None:
        extras["vanilla_fig9"] = fig9
    return extras


def adaptive_extras(complete: list[tuple[int, str, str, dict[str, Any]]], placements: tuple[str, ...]) -> dict[str, Any] | None:
    """swap="auto" beside swap=true on the same judgments (see the module doc); None without such records."""
    items = [[done[p].get("detail", {}) for p in placements] for _, _, _, done in complete]
    if not items or not all("auto" in d and "swap_true" in d for ds in items for d in ds):
        return None
    judgments = [d for ds in items for d in ds]
    n = len(judgments)
    one_order = [d for d in judgments if not d["auto"]["swapped"]]

    def side(key: str) -> dict[str, Any]:
        return {
            "calls_per_judgment": _ratio(sum(d[key]["calls"] for d in judgments), n),
            "accuracy": _ratio(sum(d[key]["names"] == "chosen" for d in judgments), n),
            "pair_accuracy": _ratio(sum(all(d[key]["names"] == "chosen" for d in ds) for ds in items), len(items)),
        }

    # the plain single-order verdicts of the same placements (the run's row shows auto's)
    single = [(d.get("single_order_names"), first) for ds in items for d, first in zip(ds, (True, False))]
    named = [(names == "chosen") == first for names, first in single if names is not None]
    return {
        "judgments": n,
        "single_order": {
            "position_bias": _ratio(sum(named), len(named)),
            "pair_accuracy": _ratio(sum(all(d.get("single_order_names") == "chosen" for d in ds) for ds in items), len(items)),
        },
        "second_order_share": _ratio(n - len(one_order), n),
        "auto": side("auto"),
        "swap_true": side("swap_true"),
        "one_order_judgments": len(one_order),
        "one_order_accuracy": _ratio(sum(d["auto"]["names"] == "chosen" for d in one_order), len(one_order)),
    }


def grade_extras(complete: list[tuple[int, str, str, dict[str, Any]]]) -> dict[str, Any]:
    """Means over items. An item with no parsed trial has no scores; it counts as 0.0 in every mean, as in the
    Grade Score authors' code (skipping it would score a judge higher for failing to answer)."""
    details = [done["single"].get("detail", {}) for _, _, _, done in complete]

    def mean(key: str) -> float | None:
        values = [d.get(key) or 0.0 for d in details]
        return sum(values) / len(values) if values else None

    out = {
        "mean_grade_score": mean("grade_score"),
        "mean_llm_score": mean("llm_score"),
        "mean_choice_score": mean("choice_score"),
        "items_without_parsed_trial": sum(1 for _, _, _, done in complete if not done["single"].get("parsed_verdicts")),
    }
    if any(d.get("unrelated_index") is not None for d in details):
        parsed = sum(done["single"]["parsed_verdicts"] for _, _, _, done in complete)
        picked = sum(d.get("unrelated_picked", 0) for d in details)
        out["unrelated_picked_items"] = sum(1 for d in details if d.get("unrelated_picked"))
        out["unrelated_pick_rate"] = _ratio(picked, parsed)
    return out


def summarise(rows: list[dict[str, Any]], placements: tuple[str, ...], method: str = "") -> dict[str, Any]:
    """The run summary: overall and per category (CONTRACT fields plus ties, tokens, cached calls), item counts,
    and the method's own extras (LWE cumulative accuracy, Grade Score means)."""
    grouped = group_items(rows, placements)
    complete = grouped["complete"]
    outcomes = [(category, item_outcome(done, placements, item_id)) for _, category, item_id, done in complete]
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for category, outcome in outcomes:
        by_category[category].append(outcome)
    skipped_in = grouped["skipped_by_category"]
    summary: dict[str, Any] = {
        "overall": _with_ci(with_degenerate(summarise_outcomes([o for _, o in outcomes]), [o for _, o in outcomes], grouped["skipped"]),
                            [o for _, o in outcomes], grouped["skipped"]),
        "categories": {c: _with_ci(with_degenerate(summarise_outcomes(v), v, skipped_in.get(c, 0)), v, skipped_in.get(c, 0))
                       for c, v in sorted(by_category.items())},
        "degenerate": grouped["skipped"],
        "skipped_degenerate": grouped["skipped"],
        "errors": grouped["errors"],
        "incomplete": grouped["incomplete"],
    }
    if method.startswith(("lwe", "selective-lwe")):
        summary["lwe"] = lwe_extras(complete, placements)
    if method.startswith("grade"):
        summary["grade"] = grade_extras(complete)
    calibration = calibration_extras(complete, placements) if len(placements) == 2 else None
    if calibration is not None:
        summary["calibration"] = calibration
    adaptive = adaptive_extras(complete, placements) if "+auto" in method else None
    if adaptive is not None:
        summary["adaptive"] = adaptive
    prices = sorted({tuple(r["record"]["cache_prices"]) for r in rows if r.get("record") and r["record"].get("cache_prices")})
    if prices:  # the (read, write) price ratios billed_input_per_item assumed
        summary["cache_prices"] = [list(p) for p in prices]
    summary["per_item"] = uncertainty.per_item([(item_id, o) for (_, _, item_id, _), (_, o) in zip(complete, outcomes)])
    ranked = uncertainty.ranking(complete, placements)
    if ranked is not None:
        summary["ranking"] = ranked
    members = panel_members(rows)
    if members:
        summary["panel"] = {name: summarise(member_rows(rows, name), placements)["overall"] for name in members}
    flagged = sorted({b for r in rows if r.get("record") for b in (r["record"].get("self_preference") or [])})
    if any(r.get("record") and r["record"].get("self_preference") is not None for r in rows):
        summary["self_preference"] = {"same_family_judges": flagged}
    return summary


def _with_ci(row: dict[str, Any], outcomes: list[dict[str, Any]], degenerate: int) -> dict[str, Any]:
    return {**row, "ci": uncertainty.row_ci(outcomes, row, degenerate)}


def panel_members(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The panel members of a run judged with --backends, in first-seen order (empty for a single backend)."""
    names: dict[str, None] = {}
    for row in rows:
        for name in (row.get("record") or {}).get("members") or {}:
            names.setdefault(name, None)
    return list(names)


def member_rows(rows: Iterable[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """A panel run's rows as if `name` had judged alone: each placement's record is that member's own verdict (a
    member that failed on a placement leaves it an error row; one excluded from the panel has no rows)."""
    out = []
    for row in rows:
        record = row.get("record") or {}
        if row["status"] != "done" or "members" not in record:
            out.append(row)
            continue
        own = record["members"].get(name)
        if own is None or own.get("status") == "failed":
            out.append({**row, "status": "error", "record": None, "error": f"panel member {name} failed"})
        else:
            out.append({**row, "record": own})
    return out


def columns(metric: str | None) -> tuple[tuple[str, str], ...]:
    """The terminal table's columns: COLUMNS, with the strict score beside the JudgeBench score when `metric`
    is "strict"."""
    if metric != "strict":
        return COLUMNS
    out: list[tuple[str, str]] = []
    for column in COLUMNS:
        out.append(column)
        if column[0] == "judgebench_score":
            out.append(figures.STRICT_COLUMN)
    return tuple(out)
