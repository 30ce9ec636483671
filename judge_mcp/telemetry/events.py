"""What a tool call's result says as OpenTelemetry attributes: the tool span's attributes and its
`gen_ai.evaluation.result` events (one per verdict), as plain dicts. No judged or model text unless `capture_text`:
by default an event's explanation says how the verdict came about (orders agreeing, votes, rotations), never why
the model thought so.

Labels (`gen_ai.evaluation.score.label`, a small fixed set per tool):
- compare_pair, lwe_judge: "A", "B", "tie" (a panel's votes split evenly) or "no verdict"; the score value is
  p_better of A (the probability that A is the better answer) where the backend gave log-probabilities;
- grade_score_options: "option N" (the winner's 0-based index; options are few), "tie" or "no verdict"; the score
  value is the Grade Score;
- infer_instruction_reward: one event per response, "scored", "echo" (the response repeats the instruction, so the
  reward may be inflated) or "unparsed"; the score value is the reward, `judge_mcp.response.index` says which.
"""

from __future__ import annotations

import json
from typing import Any

Attributes = dict[str, Any]


def tool_attributes(args: Any, result: Any, capture_text: bool) -> Attributes:
    """The tool span's attributes from the tool's arguments and result (judging tools: backend, model, usage)."""
    out: Attributes = {}
    backends = getattr(args, "backends", None)
    if backends:
        out["judge_mcp.backend"] = "+".join(backends)
    elif hasattr(args, "backend"):
        out["judge_mcp.backend"] = args.backend or "default"
    verdict_id = getattr(result, "verdict_id", None)
    if isinstance(verdict_id, str):  # the verdict-log row's id, as record_label takes it
        out["judge_mcp.verdict_id"] = verdict_id
    model = getattr(result, "model", None)
    if isinstance(model, str):
        out["judge_mcp.model"] = model
    usage = getattr(result, "usage", None)
    if usage is not None:
        out.update({
            "judge_mcp.calls": usage.calls,
            "judge_mcp.cached_calls": usage.cached_calls,
            "judge_mcp.usage.input_tokens": usage.prompt_tokens,
            "judge_mcp.usage.output_tokens": usage.completion_tokens,
        })
    if capture_text and hasattr(args, "logged"):
        out["gen_ai.tool.call.arguments"] = json.dumps(args.logged(), ensure_ascii=False, default=str)
    return out


def evaluations(tool: str, result: Any, capture_text: bool) -> list[Attributes]:
    """The `gen_ai.evaluation.result` events' attributes for this result (none for tools that judge nothing)."""
    if tool in ("compare_pair", "lwe_judge"):
        return [_pair(tool, result, capture_text)]
    if tool == "grade_score_options":
        return [_grade(tool, result, capture_text)]
    if tool == "infer_instruction_reward":
        return [_flip(tool, item, capture_text) for item in result.results]
    if tool == "score_response":
        return [_score(tool, item, item.criterion in result.unstable, capture_text) for item in result.scores]
    return []


def _event(tool: str, label: str, value: float | None, explanation: str) -> Attributes:
    out: Attributes = {"gen_ai.evaluation.name": tool, "gen_ai.evaluation.score.label": label, "gen_ai.evaluation.explanation": explanation}
    if value is not None:
        out["gen_ai.evaluation.score.value"] = float(value)
    return out


def _votes(result: Any) -> tuple[str | None, str]:
    """A panel's label when its votes tie ("tie") and how it voted, or (None, "")."""
    votes = getattr(result, "panel_votes", None)
    if votes is None:
        return None, ""
    counts = sorted(votes.votes.values(), reverse=True)
    tied = len(counts) > 1 and counts[0] == counts[1]
    shown = ", ".join(f"{k}: {n}" for k, n in sorted(votes.votes.items()))
    return ("tie" if tied else None), f"panel of {votes.answered} answering ({shown or 'no votes'}; {votes.abstained} abstained)"


def _pair(tool: str, result: Any, capture_text: bool) -> Attributes:
    panel_label, how = _votes(result)
    label = result.winner or panel_label or "no verdict"
    if not how:
        how = _pair_how(tool, result)
    p_better = getattr(result, "p_better", None)
    explanation = how
    if capture_text:
        texts = [t.rationale for t in getattr(result, "trials", []) if t.rationale]
        if tool == "lwe_judge" and result.judgment:
            texts.append(result.judgment)
        if texts:
            explanation += "\n" + "\n".join(texts)
    return _event(tool, label, None if p_better is None else p_better.A, explanation)


def _pair_how(tool: str, result: Any) -> str:
    if tool == "lwe_judge":
        if result.path == "vanilla_consistent":
            return "both orders agree (vanilla)"
        return "decided by the case-specific prompt (meta-prompt path)" if result.parse_ok else "the meta-prompt path's answer was unparsed"
    if len(result.trials) == 1:
        return "one order judged" if result.consistent else "the answer was unparsed"
    if result.consistent:
        return "both orders agree"
    parsed = all(t.parse_ok for t in result.trials)
    return "the orders disagree (position bias)" if parsed else "an order's answer was unparsed"


def _grade(tool: str, result: Any, capture_text: bool) -> Attributes:
    panel_label, how = _votes(result)
    if result.winner_index is not None:
        label = f"option {result.winner_index}"
    else:
        label = "tie" if (result.tied_indices or panel_label) else "no verdict"
    if not how:
        how = f"picked in {max(result.option_counts, default=0)} of {result.parsed_trials} parsed rotations ({result.unparsed_trials} unparsed)"
    if capture_text:
        how += "".join(f"\n{t.explanation}" for t in result.trials if t.explanation)
    return _event(tool, label, result.grade_score, how)


def _flip(tool: str, item: Any, capture_text: bool) -> Attributes:
    if not item.parse_ok:
        label, how = "unparsed", f"no complete inferred instruction ({item.unparsed_reason or 'unknown'})"
    elif item.echoes_instruction:
        label, how = "echo", "the response repeats the instruction: the reward may be inflated"
    else:
        label, how = "scored", "similarity of the inferred instruction to the given one"
    if capture_text and item.reasoning:
        how += "\n" + item.reasoning
    event = _event(tool, label, item.reward, how)
    event["judge_mcp.response.index"] = item.index
    return event


def _score(tool: str, item: Any, unstable: bool, capture_text: bool) -> Attributes:
    """One event per criterion: `scored`, `unstable` (its samples spread over more than 20% of the scale), `unparsed`."""
    label = "unparsed" if not item.parse_ok else "unstable" if unstable else "scored"
    how = f"{len(item.samples)} sample(s), stdev {item.stdev}" if item.parse_ok else "a sample stayed unparsed after its re-ask"
    if capture_text and item.rationale:
        how += "\n" + item.rationale
    event = _event(tool, label, item.score, how)
    event["judge_mcp.criterion"] = item.criterion
    return event
