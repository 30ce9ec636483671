"""The `llmbar` bench method (LLMBar's evaluators, llmbar.py) and its figures as LLMBar's `statistics.json` computes
them (`LLMEvaluator/evaluate.py`, princeton-nlp/LLMBar @ 900616bf, MIT).

An LLMBar instance is judged once, in its own order (output_1 is `chosen` when the row's `original_label` is 1,
else `rejected`; a row without one is read with `chosen` as output_1): its swap = False verdict is the placement
that shows output_1 first, its swap = True verdict the other one. So the bench's figures come from LLMBar's
verdicts (pair_accuracy = correct_both; accuracy the chosen-first placement's, as for every method), and the
summary's `llmbar` block gives statistics.json's figures overall and per category (LLMBar's subsets):
correct_False, correct_True, correct_average, correct_both, equal (counts and percentages; a None verdict equals
a None verdict there, as in LLMBar), and its kappas as its code computes them (scikit-learn's cohen_kappa_score,
here by its formula, of winners coded 1 for "1" and 0 otherwise against the labels 1 | 2).
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from typing import Any

from judge_mcp.bench import methods
from judge_mcp.bench.data import Item
from judge_mcp.bench.llmbar import LlmbarArgs
from judge_mcp.bench.methods import Options, call_stats, given, placement_record
from judge_mcp.methods import transcript
from judge_mcp.runtime.app import App

# an instance's one judgment, shared by its two placements (each waits for it): (app, item, method key) -> task
_RUNS: dict[tuple[int, str, str, str | None, int], asyncio.Task[Any]] = {}
_TAKEN: Counter[tuple[int, str, str, str | None, int]] = Counter()


def label_of(item: Item) -> int:
    return item.original_label or 1


def _outputs(item: Item) -> tuple[str, str]:
    assert item.chosen is not None and item.rejected is not None
    chosen, rejected = transcript.text(item.chosen), transcript.text(item.rejected)
    return (chosen, rejected) if label_of(item) == 1 else (rejected, chosen)


async def _judge_once(app: App, item: Item, opts: Options, backend: str | None) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    output_1, output_2 = _outputs(item)
    args = LlmbarArgs.parse(dict(instruction=transcript.text(item.prompt), output_1=output_1, output_2=output_2,
                                 strategy=opts.llmbar_strategy, **given(backend=backend)))
    return await methods._run(app, args, item, "instance", opts)


async def judge(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    """One placement's record: the instance's judgment (run once for both placements), its verdict in the order
    that placement shows; the calls and time are the chosen-first placement's."""
    key = (id(app), item.id, opts.llmbar_strategy, backend, opts.repeat)
    task = _RUNS.get(key)
    if task is None:
        task = _RUNS[key] = asyncio.ensure_future(_judge_once(app, item, opts, backend))
    try:
        result, timing, calls = await task
    finally:
        _TAKEN[key] += 1
        if _TAKEN[key] >= 2 or task.done() and (task.cancelled() or task.exception() is not None):
            _RUNS.pop(key, None)
            _TAKEN.pop(key, None)
    label = label_of(item)
    swap = (placement == "chosen_first") != (label == 1)  # swap = False shows output_1 first
    winner = result.winner_true if swap else result.winner_false
    record = placement_record(placement, None if winner is None else ("A" if (winner == "1") != swap else "B"))
    owner = placement == "chosen_first"
    usage = methods._usage(result) if owner else dict.fromkeys(("calls", "cached_calls", "prompt_tokens", "completion_tokens"), 0)
    record.update(usage, **timing, **(call_stats(calls) if owner else call_stats([])))
    record["reasked"] = False  # LLMBar sends no re-ask
    record["detail"] = {"swap": swap, "label": str(label), "winner": winner, "synthesized": result.synthesized,
                        "judgment": result.completions[1 if swap else 0][:200]}
    return record


# ---- statistics.json -------------------------------------------------------------------------------------------------
def _kappa(y1: list[int], y2: list[int]) -> float | None:
    """scikit-learn's cohen_kappa_score (unweighted) by its formula; None where it is undefined (0 / 0)."""
    n = len(y1)
    labels = sorted(set(y1) | set(y2))
    observed = sum(a == b for a, b in zip(y1, y2)) / n
    c1, c2 = Counter(y1), Counter(y2)
    expected = sum(c1[v] * c2[v] for v in labels) / (n * n)
    return None if expected == 1 else 1 - (1 - observed) / (1 - expected)


def statistics(instances: list[tuple[str, str | None, str | None]]) -> dict[str, Any]:
    """LLMBar's statistics over (label, output_False, output_True) per instance, unrounded."""
    n = len(instances)
    cf = sum(f == label for label, f, _ in instances)
    ct = sum(t == label for label, _, t in instances)
    both = sum(f == label and t == label for label, f, t in instances)
    equal = sum(f == t for _, f, t in instances)
    code = {"1": 1}  # evaluate.py: int(w) if w in ("0", "1") else 0
    y_false = [code.get(f or "", 0) for _, f, _ in instances]
    y_true = [code.get(t or "", 0) for _, _, t in instances]
    labels = [int(label) for label, _, _ in instances]
    k_false, k_true = _kappa(y_false, labels), _kappa(y_true, labels)
    return {
        "n": n, "correct_False": cf, "correct_True": ct, "correct_both": both, "equal": equal,
        "correct_False_percent": cf / n * 100, "correct_True_percent": ct / n * 100,
        "correct_average_percent": (cf + ct) / 2 / n * 100, "correct_both_percent": both / n * 100, "equal_percent": equal / n * 100,
        "kappa_False": k_false, "kappa_True": k_true,
        "kappa_average": None if k_false is None or k_true is None else (k_false + k_true) / 2,
        "kappa_agreement": _kappa(y_false, y_true),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The `llmbar` block of a run's summary: statistics.json's figures over the instances judged in both orders,
    overall and per category, in file order."""
    by_item: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in sorted(rows, key=lambda r: r["seq"]):
        detail = (row.get("record") or {}).get("detail") or {}
        if row["status"] == "done" and "swap" in detail:
            by_item[row["item_id"]].update(category=row["category"], label=detail["label"], **{str(detail["swap"]): detail["winner"]})
    done = [v for v in by_item.values() if "False" in v and "True" in v]
    categories: dict[str, list[tuple[str, str | None, str | None]]] = defaultdict(list)
    for v in done:
        categories[v["category"]].append((v["label"], v["False"], v["True"]))
    everything = [(v["label"], v["False"], v["True"]) for v in done]
    return {
        "overall": statistics(everything) if everything else None,
        "categories": {c: statistics(v) for c, v in sorted(categories.items())},
    }
