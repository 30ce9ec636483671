"""The benchmark methods: how one item (or one placement of a pair) is judged and turned into a stored record.

Pairwise-judging methods (vanilla, grp, grp-better, arena-hard, lwe, selective-lwe) judge a pair once per *placement*: the
harness shows `chosen` first ("chosen_first") and second ("chosen_second"), one single-order judgment each
(compare_pair with swap=False; lwe_judge in the order given). Methods that judge each response alone (flip,
pointwise) or rotate the options themselves (grade) run once per item ("single").

A record is a plain dict (stored as JSON, summarised by metrics.py):
- every record: `correct`, `parse_failures`, `verdicts`, `parsed_verdicts`, `first_shown_picks` (verdicts naming
  the first-shown response, or None where position means nothing), usage (`calls`, `cached_calls`,
  `prompt_tokens`, `completion_tokens`), characters sent and received (`prompt_chars`, `completion_chars`),
  `reask_calls` (re-asks and continuations sent for verdicts) and `reasked` (the verdict came only from a re-ask
  or a continuation; for response-wise methods: at least one of the item's trials needed one), timing
  (`started_at`, `ended_at`, `seconds`) and a `detail` dict;
- placement records also: `shown_first` ("chosen"|"rejected"), `named` ("first"|"second"|None), `names`
  ("chosen"|"rejected"|None: the response the verdict picked) and `tie` (arena-hard's [[A=B]]: no winner, wrong);
- single records also: `predicted` (index or None), `tie`, `consistent` (grade: every rotation picked the same option).
With `Options.no_reask` (`--no-reask`) an unparsed first answer is not re-asked (nor continued) and counts wrong.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from judge_mcp.runtime.app import App
from judge_mcp.contract.args import (
    ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, JudgingArgs, LweJudgeArgs,
)
from judge_mcp.stats.calibration import p_chosen
from judge_mcp.bench.data import Item, Value
from judge_mcp.bench.lwe_labels import gold_label
from judge_mcp.bench.media import options_media, pair_media
from judge_mcp.bench.arena_hard import ArenaHardArgs
from judge_mcp.bench.pointwise import PointwiseArgs
from judge_mcp.calls.context import Sampling
from judge_mcp.calls.usage import billed_input, cache_prices
from judge_mcp.config.settings import cached_input_price
from judge_mcp.runtime.run import run_method
from judge_mcp.contract.results import ComparePairResult

PAIR_PLACEMENTS = ("chosen_first", "chosen_second")
SINGLE = ("single",)
PAIRWISE, LISTWISE = "pairwise", "listwise"
STRING_PROMPT_ONLY = ("flip", "pointwise")  # their tools take a string prompt: no conversation items (data.Item.has_messages)


@dataclass(frozen=True)
class Options:  # a tool argument's default is its model's (judge_mcp/contract/args.py); None leaves it to the tool
    template: str | None = None  # vanilla/grp/grp-better: override the template
    unrelated: bool = False  # grade: add the unrelated option
    prompt_variant: int | None = None  # grade / flip: the paper's prompt
    batch_size: int = LweJudgeArgs.default("batch_size")  # lwe
    no_reask: bool = False  # every method: no re-ask or continuation; unparsed first answers count wrong
    flip_answer_order: str = InferInstructionRewardArgs.default("answer_order")  # flip: the paper's order, or instruction_first
    session: str = "bench"  # lwe: the session the run learns in (set by the runner)
    adaptive_swap: bool = False  # vanilla/grp/grp-better: judge each placement with swap="auto" and, beside it, swap=true
    swap_margin: float | None = None  # adaptive_swap: compare_pair's swap_margin (None: its default)
    panel: tuple[str, ...] = ()  # vanilla/grp/grp-better: judge each placement with this panel of backends (--backends)
    response_model: str | None = None  # vanilla/grp/grp-better: the model that wrote every response (self-preference guard)
    exclude_same_family: bool = False  # with response_model: leave same-family panel members out
    labels: bool = False  # lwe: record each item's gold label on its learning verdict (LWE learns from labels)
    repeat: int = 0  # --repeats: this run's number (1..K; 0: not repeated), stored as METHOD#rN (bench/repeats.py)
    sampling: Sampling | None = None  # --repeats: every request's temperature, never from the call cache
    llmbar_strategy: str = "Vanilla"  # llmbar: LLMBar's evaluator (bench/llmbar.py STRATEGIES)


@dataclass(frozen=True)
class Method:
    name: str
    kinds: tuple[str, ...]
    per_placement: bool  # True: judged once per placement of a pair; False: once per item
    judge: Callable[[App, Item, str, Options, str | None], Awaitable[dict[str, Any]]] = field(repr=False)
    about: str = ""

    def placements(self) -> tuple[str, ...]:
        return PAIR_PLACEMENTS if self.per_placement else SINGLE


def shown(item: Item, placement: str) -> tuple[Value, Value]:
    """(response_a, response_b) as shown for a placement: strings or trajectories, passed to the tools unchanged."""
    assert item.chosen is not None and item.rejected is not None
    return (item.chosen, item.rejected) if placement == "chosen_first" else (item.rejected, item.chosen)


def placement_record(placement: str, winner: str | None, tie: bool = False) -> dict[str, Any]:
    """The verdict fields of one single-order judgment. `winner` is "A" (first shown), "B" or None (unparsed or,
    with `tie`, a tie verdict: parsed, but no winner, and wrong)."""
    shown_first = "chosen" if placement == "chosen_first" else "rejected"
    named = {"A": "first", "B": "second"}.get(winner or "")
    if named is None:
        names = None
    elif named == "first":
        names = shown_first
    else:
        names = "rejected" if shown_first == "chosen" else "chosen"
    return {
        "shown_first": shown_first, "named": named, "names": names, "correct": names == "chosen", "tie": bool(tie and named is None),
        "parse_failures": 0 if (named or tie) else 1, "verdicts": 1, "parsed_verdicts": 1 if (named or tie) else 0,
        "first_shown_picks": 1 if named == "first" else 0,
    }


def _usage(result: Any) -> dict[str, Any]:
    """The judgment's usage, with its prompt-cache reads and writes and its billed-equivalent input at the price
    ratios named in `cache_prices` (calls/usage.cache_prices; JUDGE_MCP_CACHED_INPUT_PRICE from the environment)."""
    u = result.usage
    cached, written = u.cached_prompt_tokens or 0, u.cache_write_tokens or 0
    prices = cache_prices(str(getattr(result, "model", "")), cached_input_price(os.environ))
    return {"calls": u.calls, "cached_calls": u.cached_calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "reasoning_tokens": u.reasoning_tokens, "cached_prompt_tokens": cached, "cache_write_tokens": written,
            "billed_input": round(billed_input(u.prompt_tokens, cached, written, prices), 1), "cache_prices": list(prices)}


REASK_MARKS = (":reask", ":continu")  # purposes of re-asks and continuations (methods/ask.ask, arena_hard)


def is_reask(purpose: str | None) -> bool:
    return any(mark in (purpose or "") for mark in REASK_MARKS)


def call_stats(records: list[dict[str, Any]], verdict_prefixes: tuple[str, ...] = ("",)) -> dict[str, Any]:
    """Characters sent and received over a judgment's calls, and its re-asks/continuations for verdicts (calls whose
    purpose starts with one of `verdict_prefixes`)."""
    return {
        "prompt_chars": sum(r.get("prompt_chars", 0) for r in records),
        "completion_chars": sum(r.get("completion_chars", 0) for r in records),
        "reask_calls": sum(1 for r in records if is_reask(r.get("purpose")) and str(r.get("purpose")).startswith(verdict_prefixes)),
    }


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are set: a None option leaves the tool's default (args.py) in place."""
    return {k: v for k, v in fields.items() if v is not None}


async def _run(app: App, args: JudgingArgs, item: Item, placement: str, opts: Options, **options: Any) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """Run one judgment through the method registry (logged like a tool call, with the item id and placement):
    (result, timing, the Judge's call records). `options`: the method's keywords beyond its arguments."""
    started, t0 = time.time(), time.perf_counter()
    result, calls = await run_method(app, args.tool, args, no_reask=opts.no_reask, log_extra={"bench_item": item.id, "placement": placement},
                                      sampling=opts.sampling, **options)
    timing = {"started_at": started, "ended_at": time.time(), "seconds": round(time.perf_counter() - t0, 3)}
    return result, timing, calls


# ---- pairwise-judging methods ----------------------------------------------------------------------------------------
def _compare(goal: str = ComparePairArgs.default("goal"), default_template: str = ComparePairArgs.default("template")):
    async def judge(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
        a, b = shown(item, placement)
        template = opts.template or default_template
        judges = dict(backends=list(opts.panel)) if opts.panel else given(backend=backend)
        args = ComparePairArgs.parse(
            dict(prompt=item.prompt, response_a=a, response_b=b, goal=goal, template=template, swap=False, **judges, **_authors(opts),
                 **pair_media(item, placement))
        )
        if opts.panel:
            return await _compare_panel(app, item, placement, args, opts)
        result, timing, calls = await _run(app, args, item, placement, opts)
        trial = result.trials[0]
        record = placement_record(placement, trial.better if trial.parse_ok else None)
        record.update(_usage(result), **timing, **call_stats(calls))
        continued = bool(getattr(trial, "continued", False))  # PairTrial.continued arrives with the continuation step
        record["reasked"] = bool(trial.parse_ok and (trial.reasked or continued))
        record["detail"] = {"label": trial.label, "reasked": trial.reasked, "continued": continued, "goal": goal, "template": template}
        record["p_chosen"] = p_chosen(trial.p_better, placement)
        if opts.adaptive_swap:
            await _adaptive(app, item, placement, opts, record, args)
        if args.response_models is not None:
            record["self_preference"] = [p.backend for p in result.self_preference or []]
        return record

    return judge


async def _adaptive(app: App, item: Item, placement: str, opts: Options, record: dict[str, Any], single: ComparePairArgs) -> None:
    """The placement judged again with swap="auto" and with swap=true, both over the call cache (order AB is the
    single-order request just sent, so it is answered from the cache; the swapped order is sent once for both).
    The record's verdict becomes swap="auto"'s; `detail` keeps both, with the calls each needed (sent + cached)."""
    outcomes = {}
    plain = single.model_dump(exclude={"swap", "response_models", "exclude_same_family"}, exclude_none=True)
    for swap in ("auto", True):
        margin = given(swap_margin=opts.swap_margin) if swap == "auto" else {}
        args = ComparePairArgs.parse({**plain, "swap": swap, **margin})
        result, timing, calls = await _run(app, args, item, placement, opts)
        for key, value in _usage(result).items():
            if key != "cache_prices" and value is not None:  # reasoning_tokens: None where the backend reports none
                record[key] = (record.get(key) or 0) + value
        for key, value in call_stats(calls).items():
            record[key] += value
        record["ended_at"] = timing["ended_at"]
        record["seconds"] = round(record["seconds"] + timing["seconds"], 3)
        # no winner from two parsed orders (they disagree) is parsed but names nobody: counted like a tie, wrong
        verdict = placement_record(placement, result.winner, tie=all(t.parse_ok for t in result.trials))
        outcomes["auto" if swap == "auto" else "swap_true"] = {
            "names": verdict["names"],
            "swapped": result.swapped,
            "calls": result.usage.calls + result.usage.cached_calls,
            "p_chosen": p_chosen(result.p_better, placement),
        }
        if swap == "auto":  # the record's verdict is swap="auto"'s; the single-order one stays in detail
            record["detail"]["single_order_names"] = record["names"]
            record.update({k: verdict[k] for k in ("named", "names", "correct", "tie", "parse_failures", "parsed_verdicts", "first_shown_picks")})
    record["detail"].update(outcomes)


def _authors(opts: Options) -> dict[str, Any]:
    """The self-preference guard's arguments: the one model that wrote every response."""
    if opts.response_model is None:
        return {}
    return dict(response_models=[opts.response_model] * 2, exclude_same_family=opts.exclude_same_family)


async def _compare_panel(app: App, item: Item, placement: str, args: ComparePairArgs, opts: Options) -> dict[str, Any]:
    """One placement judged by the panel (each member one order, swap=False): the record is the panel's verdict,
    with each member's own verdict as a record of its own under `members` (metrics.member_rows scores them)."""
    started, t0 = time.time(), time.perf_counter()
    result, _ = await run_method(
        app, args.tool, args, no_reask=opts.no_reask, log_extra={"bench_item": item.id, "placement": placement}, sampling=opts.sampling,
    )
    assert isinstance(result, ComparePairResult)
    timing = {"started_at": started, "ended_at": time.time(), "seconds": round(time.perf_counter() - t0, 3)}
    # members voted but no verdict has a majority: a tie (no winner, wrong), not a parse failure
    voted = bool(result.panel_votes and result.panel_votes.votes)
    record = placement_record(placement, result.winner, tie=result.winner is None and voted)
    record.update(_usage(result), **timing)
    record["reasked"] = any(t.parse_ok and (t.reasked or t.continued) for m in result.panel or [] for t in m.trials)
    members = {}
    for m in result.panel or []:
        if m.status == "excluded":
            continue
        trial = m.trials[0] if m.trials else None
        own = placement_record(placement, trial.better if trial is not None and trial.parse_ok else None)
        if m.usage is not None:
            own.update(calls=m.usage.calls, cached_calls=m.usage.cached_calls, prompt_tokens=m.usage.prompt_tokens, completion_tokens=m.usage.completion_tokens)
            # the member's own wall time (members start together and run concurrently)
            own.update(seconds=round(m.usage.latency_ms / 1000.0, 3), started_at=started, ended_at=started + m.usage.latency_ms / 1000.0)
        own["status"] = m.status
        members[m.backend] = own
    record["members"] = members
    record["self_preference"] = [p.backend for p in result.self_preference or []] if result.self_preference is not None else None
    votes = result.panel_votes.votes if result.panel_votes else {}
    record["detail"] = {"goal": args.goal, "template": args.template, "votes": votes, "warnings": result.warnings}
    return record


async def _arena_hard(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    a, b = shown(item, placement)
    args = ArenaHardArgs.parse(dict(prompt=item.prompt, response_a=a, response_b=b, **given(backend=backend)))
    result, timing, calls = await _run(app, args, item, placement, opts)
    record = placement_record(placement, result.winner, tie=result.tie)
    record.update(_usage(result), **timing, **call_stats(calls))
    record["reasked"] = bool(result.parse_ok and result.continued)
    record["detail"] = {"decision": result.decision, "continued": result.continued, "tie": result.tie}
    return record


def _lwe(selective: bool):
    async def judge(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
        """The paper's protocol (Appendix A): the chosen-first placement is the learning judgment (its feedback is
        buffered, a full batch refines the meta-prompt); the swapped placement is judged with the same session's
        current meta-prompt for scoring only (learn=False). The runner judges LWE items one at a time in file order."""
        a, b = shown(item, placement)
        learn = placement == PAIR_PLACEMENTS[0]

        args = LweJudgeArgs.parse(
            dict(prompt=item.prompt, response_a=a, response_b=b, session=opts.session, selective=selective, batch_size=opts.batch_size,
                 **given(backend=backend), **pair_media(item, placement))
        )
        result, timing, calls = await _run(app, args, item, placement, opts, learn=learn)
        record = placement_record(placement, result.winner)
        record.update(_usage(result), **timing, **call_stats(calls, ("lwe_judge:vanilla", "lwe_judge:judge")))
        # the verdict's own call: the meta-path judgment (result.reasked), or on the vanilla path the pair's calls
        from_reask = result.reasked if result.path == "meta_prompt" else record["reask_calls"] > 0
        record["reasked"] = bool(result.winner is not None and from_reask)
        vanilla_calls = [c for c in calls if str(c.get("purpose", "")).startswith("lwe_judge:vanilla")]
        record["vanilla_chars"] = sum(c.get("prompt_chars", 0) + c.get("completion_chars", 0) for c in vanilla_calls)
        record["detail"] = {
            "learn": learn,
            "label_feedback": await gold_label(app, result.verdict_id) if learn and opts.labels else None,  # chosen is shown first: "A"
            "path": result.path,
            "vanilla_ab": result.vanilla.ab if result.vanilla else None,
            "vanilla_ba": result.vanilla.ba if result.vanilla else None,
            "meta_prompt_version": result.meta_prompt_version,
            "refined": result.refined,
            "new_meta_prompt_version": result.new_meta_prompt_version,
            "feedback_parse_ok": result.feedback_parse_ok,
        }
        return record

    return judge


# ---- methods judging each response alone, or every rotation ------------------------------------------------------------
def single_record(gold: int, predicted: int | None, tied: list[int], unparsed: int, verdicts: int) -> dict[str, Any]:
    """A response-wise judgment is right only when every response parsed and the gold one is the single best."""
    return {
        "predicted": predicted,
        "tie": predicted is None and len(tied) > 1,
        "correct": unparsed == 0 and predicted == gold,
        "parse_failures": unparsed,
        "verdicts": verdicts,
        "parsed_verdicts": verdicts - unparsed,
        "first_shown_picks": None,
        "consistent": None,
    }


async def _flip(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    args = InferInstructionRewardArgs.parse(
        dict(instruction=item.prompt, responses=item.options,
             answer_order=opts.flip_answer_order, **given(prompt_variant=opts.prompt_variant, backend=backend))
    )
    result, timing, calls = await _run(app, args, item, placement, opts)
    record = single_record(item.gold, result.best_index, result.tied_best, len(result.unparsed), len(result.results))
    record.update(_usage(result), **timing, **call_stats(calls))
    record["reasked"] = record["reask_calls"] > 0
    record["detail"] = {"scores": [it.reward for it in result.results], "parsed": [it.parse_ok for it in result.results], "echoes": result.echoes}
    return record


async def _pointwise(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    args = PointwiseArgs.parse(dict(prompt=item.prompt, responses=item.options, **given(backend=backend)))
    result, timing, calls = await _run(app, args, item, placement, opts)
    record = single_record(item.gold, result.best_index, result.tied_best, len(result.unparsed), len(result.results))
    record.update(_usage(result), **timing, **call_stats(calls))
    record["reasked"] = record["reask_calls"] > 0
    record["detail"] = {"scores": [it.score for it in result.results]}
    return record


async def _grade(app: App, item: Item, placement: str, opts: Options, backend: str | None) -> dict[str, Any]:
    args = GradeScoreOptionsArgs.parse(
        dict(instruction=item.prompt, options=item.options, unrelated_option=opts.unrelated, **given(prompt_variant=opts.prompt_variant, backend=backend),
             **options_media(item))
    )
    result, timing, calls = await _run(app, args, item, placement, opts)
    tied = result.tied_indices
    winner = result.winner_index if not tied else None
    consistent = result.unparsed_trials == 0 and result.parsed_trials > 0 and max(result.option_counts) == result.parsed_trials
    record = {
        "predicted": winner,
        "tie": bool(tied),
        "correct": winner is not None and winner == item.gold,
        "parse_failures": result.unparsed_trials,
        "verdicts": len(result.trials),
        "parsed_verdicts": result.parsed_trials,
        "first_shown_picks": result.position_counts[0] if result.position_counts else 0,
        "consistent": consistent,
    }
    record.update(_usage(result), **timing, **call_stats(calls))
    record["reasked"] = record["reask_calls"] > 0
    record["detail"] = {
        "grade_score": result.grade_score,
        "llm_score": result.llm_score,
        "choice_score": result.choice_score,
        "option_counts": result.option_counts,
        "position_counts": result.position_counts,
        "unrelated_index": result.unrelated_index,
        "unrelated_picked": result.unrelated_picked,
    }
    return record


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("vanilla", (PAIRWISE,), True, _compare("better", "direct"), "plain better-answer prompt (compare_pair goal=better, template=direct)"),
        Method("grp", (PAIRWISE,), True, _compare(), "goal-reversed: which answer is worse (compare_pair defaults, SOP)"),
        Method("grp-better", (PAIRWISE,), True, _compare("better", "sop"), "same SOP template, goal=better"),
        Method(
            "arena-hard",
            (PAIRWISE,),
            True,
            _arena_hard,
            "the GRP paper's baseline: JudgeBench's Arena-Hard judge, five labels, A=B a tie (wrong), one continuation",
        ),
        Method("lwe", (PAIRWISE,), True, _lwe(False), "lwe_judge, selective=false: every case through the meta-prompt"),
        Method("selective-lwe", (PAIRWISE,), True, _lwe(True), "lwe_judge, selective=true (vanilla Figure 9 in both orders first)"),
        Method("flip", (PAIRWISE, LISTWISE), False, _flip, "FLIP backward-inference reward of each response"),
        Method("pointwise", (PAIRWISE, LISTWISE), False, _pointwise, "FLIP paper's pointwise 1-10 rating baseline"),
        Method("grade", (PAIRWISE, LISTWISE), False, _grade, "grade_score_options over every cyclic rotation"),
    )
}


def method_key(name: str, opts: Options) -> str:
    """The name a run's results are stored under: the method plus any non-default option."""
    key = name
    if opts.template and name in ("vanilla", "grp", "grp-better"):
        key += f"[{opts.template}]"
    if opts.prompt_variant and name in ("grade", "flip"):
        key += f"[v{opts.prompt_variant}]"
    if name == "flip" and opts.flip_answer_order != InferInstructionRewardArgs.default("answer_order"):
        key += f"[{opts.flip_answer_order}]"
    if name == "grade" and opts.unrelated:
        key += "+unrelated"
    if name in ("lwe", "selective-lwe") and opts.batch_size != LweJudgeArgs.default("batch_size"):
        key += f"[b{opts.batch_size}]"
    if opts.adaptive_swap and name in ("vanilla", "grp", "grp-better"):
        key += "+auto" + ("" if opts.swap_margin is None else f"{opts.swap_margin:g}")
    if opts.labels and name in ("lwe", "selective-lwe"):
        key += "+labels"
    if name == "llmbar":
        key += f"[{opts.llmbar_strategy}]"
    if opts.no_reask:
        key += "+strict"
    if opts.response_model and opts.exclude_same_family:
        key += f"+exclude-family[{opts.response_model}]"  # members left out change the verdicts
    return key


def repeat_suffix(opts: Options) -> str:
    """The method key's suffix of a repeated run ("" for a plain run)."""
    if not opts.repeat:
        return ""
    t = opts.sampling.temperature if opts.sampling is not None else None
    return f"#r{opts.repeat}" + ("" if t is None else f"@t{t:g}")
