"""The bench methods that reproduce published judges beside arena-hard (methods.py): `jb-vanilla`, JudgeBench's
vanilla judge (jb_vanilla.py), and `alpaca-eval`, AlpacaEval 2.0's weighted GPT-4 Turbo annotator over head-to-head
rows (alpaca_eval.py; its win rates: alpaca_metrics.py, in the summary's `alpaca_eval`). `METHODS` here is
every bench method: methods.py's table with these beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge_mcp.runtime.app import App
from judge_mcp.bench import llmbar_bench, methods
from judge_mcp.bench.data import Item
from judge_mcp.bench.alpaca_eval import AlpacaEvalArgs
from judge_mcp.bench.alpaca_metrics import lc_win_rate, read_gamed, win_rate
from judge_mcp.bench.jb_vanilla import JbVanillaArgs
from judge_mcp.bench.methods import PAIRWISE, Method, Options, call_stats, given, placement_record, shown


async def _jb_vanilla(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    a, b = shown(item, placement)
    args = JbVanillaArgs.parse(dict(prompt=item.prompt, response_a=a, response_b=b, **given(backend=backend)))
    result, timing, calls = await methods._run(app, args, item, placement, opts)
    record = placement_record(placement, result.winner)
    record.update(methods._usage(result), **timing, **call_stats(calls))
    record["reasked"] = False  # JudgeBench sends no re-ask and no continuation
    record["detail"] = {"decision": result.decision, "judgment": result.judgment[:200]}
    return record


HEAD2HEAD = "head2head"


async def _alpaca_eval(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    """One AlpacaEval row: output_1 the reference, output_2 the model; `correct` means nothing here (no gold)."""
    reference, output = item.responses
    args = AlpacaEvalArgs.parse(dict(instruction=item.prompt, output_1=reference, output_2=output, **given(backend=backend)))
    result, timing, calls = await methods._run(app, args, item, placement, opts)
    parsed = result.preference is not None
    record: dict[str, Any] = {
        "correct": None, "tie": False, "parse_failures": 0 if parsed else 1, "verdicts": 0 if result.identical else 1,
        "parsed_verdicts": 1 if parsed and not result.identical else 0, "first_shown_picks": None, "consistent": None,
        "preference": result.preference, "switched": result.switched, "identical": result.identical,
        "len_1": len(reference), "len_2": len(output), "difficulty": item.difficulty, "generators": list(item.generators or ()),
        # which output is longer (metrics.named reads the preference as a pick): the summary's length preference
        "longer": "output_1" if len(reference) > len(output) else "output_2" if len(output) > len(reference) else None,
    }
    record.update(methods._usage(result), **timing, **call_stats(calls))
    record["reasked"] = False  # AlpacaEval sends one request per row
    record["detail"] = {"judgment": result.judgment[:20]}
    return record


def alpaca_summary(rows: list[dict[str, Any]], gamed: Path | None = None) -> dict[str, Any]:
    """The `alpaca_eval` block of a run's summary: AlpacaEval's win rates over the annotated rows in file order, and
    the LC win rate when every row names the same two models (its GLM length_controlled_v1 with AlpacaEval's
    df_gamed.csv at `gamed`; unannotated rows take part in it as in AlpacaEval)."""
    done = sorted((r for r in rows if r["status"] == "done" and r.get("record")), key=lambda r: r["seq"])
    records = [r["record"] for r in done]
    annotated = [r for r in records if r.get("preference") is not None]
    pairs = {tuple(r.get("generators") or ()) for r in records}
    out: dict[str, Any] = {
        "generators": list(next(iter(pairs))) if len(pairs) == 1 else sorted("/".join(p) for p in pairs),
        **win_rate([r["preference"] for r in annotated]),
        "unannotated": len(records) - len(annotated),
        "identical_outputs": sum(1 for r in records if r.get("identical")),
        "switched": sum(1 for r in records if r.get("switched")),
    }
    if len(pairs) == 1 and len(next(iter(pairs))) == 2:
        try:
            baselines = None if gamed is None else read_gamed(gamed)
        except (OSError, ValueError) as exc:
            return {**out, "lc_win_rate": None, "lc_note": f"--alpaca-gamed {gamed}: {exc}"}
        out.update(lc_win_rate(records, next(iter(pairs)), baselines))  # type: ignore[arg-type]
    else:
        out.update(lc_win_rate=None, lc_note="the LC win rate compares one model with one reference: the rows name several")
    return out


# figures against a gold label, null for head-to-head rows (which have none); their length preference stays, and
# the LC win rate is their length control
NO_GOLD = ("accuracy", "pair_accuracy", "single_order_accuracy", "judgebench_score", "strict_score", "length_gold_share", "length_bias")


def _pair_preference(records: list[dict[str, Any]], model: str) -> float | None:
    """A pair's AlpacaEval-style preference for `model` (1..2) from its placements' verdicts: a verdict naming it 1,
    the other model 0, a tie 0.5, unparsed left out; None when no placement counts."""
    picks = []
    for r in records:
        if r.get("names") in ("chosen", "rejected"):
            picks.append(1.0 if r["models"][0 if r["names"] == "chosen" else 1] == model else 0.0)
        elif r.get("tie"):
            picks.append(0.5)
    return 1.0 + sum(picks) / len(picks) if picks else None


def pair_models(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For a pairwise run whose pairs name the models that wrote them (`chosen_model`, `rejected_model`): the second
    model's (in name order) win rate over the first, and its LC win rate, as AlpacaEval computes them from the
    pairs' preferences (both placements of a pair averaged); None when the pairs name no models."""
    by_item: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["seq"]):
        record = row.get("record") or {}
        if row["status"] == "done" and "names" in record:
            by_item.setdefault(row["item_id"], []).append(record)
    if not by_item or not all(r.get("models") for records in by_item.values() for r in records):
        return None
    names = sorted({m for records in by_item.values() for r in records for m in r["models"]})
    if len(names) != 2:
        return {"models": names, "lc_win_rate": None, "lc_note": f"the pairs name {len(names)} models, not two"}
    baseline, model = names
    annotated = []
    for records in by_item.values():
        preference = _pair_preference(records, model)
        lengths = dict(zip(records[0]["models"], records[0]["lengths"]))
        if preference is not None:
            annotated.append({"preference": preference, "len_1": lengths.get(baseline, 0), "len_2": lengths.get(model, 0), "difficulty": None})
    out = {"baseline": baseline, "model": model, **win_rate([a["preference"] for a in annotated]), "unannotated": len(by_item) - len(annotated)}
    return {**out, **lc_win_rate(annotated, (baseline, model))}


def with_published(method: str, rows: list[dict[str, Any]], summary: dict[str, Any], gamed: Path | None = None) -> dict[str, Any]:
    """metrics.summarise's `summary` of a run with a published judge's own figures: for alpaca-eval the
    `alpaca_eval` block, and no accuracy (head-to-head rows have no gold label); for a pairwise run whose pairs name
    two models, `head_to_head` (pair_models)."""
    if method.startswith("llmbar"):
        summary = {**summary, "llmbar": llmbar_bench.summary(rows)}
    if not method.startswith("alpaca-eval"):
        models = pair_models(rows)
        return summary if models is None else {**summary, "head_to_head": models}
    for row in [summary["overall"], *summary.get("categories", {}).values()]:
        row.update(dict.fromkeys(NO_GOLD))
    return {**summary, "alpaca_eval": alpaca_summary(rows, gamed)}


PUBLISHED: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "jb-vanilla",
            (PAIRWISE,),
            True,
            _jb_vanilla,
            "JudgeBench's vanilla judge: 'Output (a)' / 'Output (b)', one user message, temperature 0, top_p 1, 1024 tokens",
        ),
        Method(
            "alpaca-eval",
            (HEAD2HEAD,),
            False,
            _alpaca_eval,
            "AlpacaEval 2.0's weighted_alpaca_eval_gpt4_turbo: one order by its seeded switch, max_tokens 1, preference from "
            "the top log-probabilities of m / M; win rate and length-controlled win rate",
        ),
        Method(
            "llmbar",
            (PAIRWISE,),
            True,
            llmbar_bench.judge,
            "LLMBar's evaluators (GPT-4 configs, --llmbar-strategy): its prompts, logit_bias, parsing and both orders of each "
            "instance in its own order; the summary's llmbar block is its statistics.json",
        ),
    )
}
# every bench method: the table of methods.py with the published judges beside it
METHODS: dict[str, Method] = {**methods.METHODS, **PUBLISHED}
