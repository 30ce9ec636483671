"""The demo's words: each tool's structured result said as a few plain sentences (`RENDERERS`), and why the
embedded 135M model gives "no verdict" (`small_model_note`). Pure functions of the result dicts, so they are tested
without a model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Lines = list[str]
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh")


def _quote(text: str | None, limit: int = 100) -> str:
    text = " ".join((text or "").split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _shown_first(order: str) -> str:
    return "A shown first" if order == "AB" else "B shown first"


# ---- compare_pair -------------------------------------------------------------------------------------------------
def _pair_trial(trial: dict[str, Any], goal: str) -> str:
    if not trial.get("parse_ok"):
        reasons = {"truncated": "it was cut off at the token limit", "no_verdict": "it held no verdict label"}
        why = reasons.get(trial.get("unparsed_reason") or "", "no verdict label")
        return f"{_shown_first(trial['order'])}: the model's answer could not be read ({why})"
    better = trial["better"]
    if goal == "worse":
        return f"{_shown_first(trial['order'])}: the model called {'B' if better == 'A' else 'A'} the worse answer, so {better} is better"
    return f"{_shown_first(trial['order'])}: the model called {better} the better answer"


def _followed_position(trials: list[dict[str, Any]]) -> str | None:
    """'first' or 'second' when both orders named the answer in the same shown position, else None."""
    by_order = {t["order"]: t.get("better") for t in trials if t.get("parse_ok")}
    if by_order.get("AB") == "A" and by_order.get("BA") == "B":
        return "first"
    if by_order.get("AB") == "B" and by_order.get("BA") == "A":
        return "second"
    return None


def pair_lines(data: dict[str, Any]) -> Lines:
    trials = data.get("trials") or []
    lines = [_pair_trial(t, data.get("goal", "worse")) for t in trials]
    winner = data.get("winner")
    if winner:
        agreed = "one order judged" if len(trials) == 1 else "both orders agree"
        lines.append(f"VERDICT: {winner} is better ({agreed}).")
    elif not all(t.get("parse_ok") for t in trials):
        lines.append("VERDICT: none (winner: null). An answer could not be read, and judge-mcp never guesses a verdict.")
    else:
        position = _followed_position(trials)
        habit = f"the model named the answer shown {position} both times: it followed the position, not the answers" if position else "the two orders disagree"
        lines.append(f"VERDICT: none (winner: null, consistent: false): {habit}. judge-mcp reports no verdict rather than a wrong one.")
    p = data.get("p_better")
    if p:
        lines.append(
            f"From the model's token probabilities, averaged over both orders (so a position habit cancels): "
            f"P(A better) = {p['A']:.2f}, P(B better) = {p['B']:.2f}."
        )
    return lines


# ---- infer_instruction_reward --------------------------------------------------------------------------------------
def flip_lines(data: dict[str, Any]) -> Lines:
    lines = []
    for r in data.get("results") or []:
        line = f"response {r['index']}: the model guessed the instruction was {_quote(r.get('inferred_instruction'))} -> reward {r['reward']:.2f}"
        if not r.get("parse_ok"):
            line += " (its answer could not be read: the 0.00 is no judgment)"
        if r.get("echoes_instruction"):
            line += " (the response repeats the instruction, which inflates FLIP's reward)"
        lines.append(line)
    best, tied, unparsed = data.get("best_index"), data.get("tied_best") or [], data.get("unparsed") or []
    if best is not None:
        lines.append(f"BEST: response {best} (the highest reward).")
    elif tied:
        lines.append(f"BEST: none (best_index: null): responses {', '.join(map(str, tied))} share the top reward.")
    elif unparsed:
        lines.append(
            f"BEST: none (best_index: null): response {', '.join(map(str, unparsed))} could not be read, so its reward is "
            f"unknown and no response can be called best (ranking of the rest: {data.get('ranking')})."
        )
    return lines


# ---- grade_score_options -----------------------------------------------------------------------------------------------
def _grade_trial(trial: dict[str, Any]) -> str:
    shown = ", ".join(map(str, trial.get("order") or []))
    if not trial.get("parse_ok"):
        return f"options shown as {shown}: the model's answer could not be read"
    position = trial["selected_position"]
    ordinal = ORDINALS[position] if position < len(ORDINALS) else position + 1
    return f"options shown as {shown}: it picked the {ordinal} one shown, option {trial['selected_index']}"


def grade_lines(data: dict[str, Any]) -> Lines:
    lines = [_grade_trial(t) for t in data.get("trials") or []]
    parsed, tied, winner = data.get("parsed_trials", 0), data.get("tied_indices") or [], data.get("winner_index")
    counts = data.get("option_counts") or []
    if not parsed:
        lines.append("PICK: none: no answer could be read.")
    elif len(tied) > 1:
        shown_winner = "null" if winner is None else f"{winner}, the lowest of them"
        lines.append(
            f"PICK: none: options {', '.join(map(str, tied))} were each picked equally often (winner_index: {shown_winner}; "
            "tied_indices lists them)."
        )
    elif winner is not None:
        lines.append(f"PICK: option {winner}, in {counts[winner] if winner < len(counts) else '?'} of {parsed} orders.")
    if data.get("grade_score") is not None:
        lines.append(
            f"Grade Score {data['grade_score']:.2f} (0 to 1): how evenly the picks spread over the shown positions "
            f"({data['llm_score']:.2f}) combined with how often the top option won ({data['choice_score']:.2f})."
        )
    positions = data.get("position_counts") or []
    if parsed > 1 and parsed in positions:
        lines.append(f"Every pick was the {ORDINALS[positions.index(parsed)]} option shown, whatever it was: a position habit.")
    return lines


# ---- lwe_judge, lwe_session(_show) ---------------------------------------------------------------------------------
def lwe_lines(data: dict[str, Any]) -> Lines:
    lines = []
    vanilla = data.get("vanilla")
    if vanilla:
        ab, ba = vanilla.get("ab") or "unreadable", vanilla.get("ba") or "unreadable"
        lines.append(f"plain judgment with A shown first: {ab}; with B shown first: {ba}.")
    if data.get("path") == "vanilla_consistent":
        lines.append("They agree, so that is the verdict; the meta-prompt was not needed and nothing was stored.")
    else:
        why = "They disagree or one is unreadable, so" if vanilla else "With selective false,"
        lines.append(
            f"{why} the meta-prompt path ran: meta-prompt v{data.get('meta_prompt_version')} wrote a prompt for this case "
            f"({_quote(data.get('eval_prompt'), 80)}), the model judged once with it, then critiqued its own judgment."
        )
        lines.append(
            f"That feedback is stored: {data.get('pending_feedback')} of {data.get('batch_size')} items before the session's "
            "meta-prompt is rewritten from them."
        )
    if data.get("refined"):
        lines.append(f"This call refined the meta-prompt: the session is now at v{data.get('new_meta_prompt_version')}.")
    winner = data.get("winner")
    lines.append(f"VERDICT: {winner} is better." if winner else "VERDICT: none (winner: null): the deciding answer could not be read.")
    return lines


def session_lines(data: dict[str, Any]) -> Lines:
    versions = ", ".join(f"v{v['version']} {v['reason']}" for v in data.get("versions") or [])
    return [
        f"session {data.get('session')!r}: meta-prompt v{data.get('current_version')} ({len(data.get('meta_prompt') or ''):,} characters), "
        f"{data.get('pending_feedback')} feedback item(s) waiting of {data.get('batch_size')} before the next rewrite; versions: {versions}."
    ]


# ---- judge_stats ---------------------------------------------------------------------------------------------------
def _rate(rate: dict[str, Any]) -> str:
    return "-" if not rate.get("of") else f"{rate['count']} of {rate['of']}"


def stats_lines(data: dict[str, Any]) -> Lines:
    window = data.get("all_time") or {}
    groups = window.get("groups") or []
    if not groups:
        return ["The verdict log is empty."]
    lines = [f"All time in this database: {window.get('verdicts')} verdicts. Per tool and model:"]
    for g in groups[:8]:
        bias, parts = g["position_bias"], []
        if bias.get("of"):
            parts.append(f"named the first-shown answer in {_rate(bias)} readable trials (without position bias: {bias['unbiased']:.2f} of them)")
        if g["ties"].get("of"):
            parts.append(f"no single winner in {_rate(g['ties'])} verdicts")
        parts.append(f"unreadable answers: {_rate(g['parse_failures'])}")
        agreement = g.get("agreement") or {}
        if agreement.get("labelled"):
            parts.append(f"agreed with {_rate(agreement['accuracy'])} human labels")
        brought = "" if g.get("inputs", "text") == "text" else f" (with {g['inputs'].replace('+', ', ')})"  # else two rows read alike
        lines.append(f"{g['tool']}{brought} on {g['model']}: {'; '.join(parts)}.")
    return lines


def label_lines(data: dict[str, Any]) -> Lines:
    said = {"tie": "a tie", "none": "no single answer"}
    verdict_said = {**said, "tie": "no winner (counted as a tie)"}
    verdict, label = str(data.get("verdict")), str(data.get("label"))
    agrees = "agrees with it" if data.get("agrees") else "disagrees"
    return [f"LABEL stored for {data.get('tool')} verdict {data.get('verdict_id')}: the correct answer is {said.get(label, label)}; "
            f"the verdict said {verdict_said.get(verdict, verdict)}, so it {agrees}."]


def run_text(messages: list[dict[str, Any]]) -> str:
    """An agent's run (a trajectory's messages) in one line: each tool call with its arguments, each result, the
    final words."""
    names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls") or ()}
    parts = []
    for m in messages:
        for call in m.get("tool_calls") or ():
            parts.append(f"calls {call['name']}({call.get('arguments', '')})")
        if m.get("role") == "tool":
            parts.append(f"{names.get(m.get('tool_call_id'), 'the tool')} returns {_quote(m.get('content'), 60)}")
        elif m.get("content"):
            parts.append(f"says {_quote(m['content'], 60)}")
    return "; ".join(parts)


def score_lines(data: dict[str, Any]) -> Lines:
    lines = []
    for s in data.get("scores") or []:
        weighted = " (probability-weighted over the scale)" if s.get("distribution") else ""
        lines.append(f"{s['criterion']} (weight {s['weight']:g}): " + (f"{s['score']:g}{weighted}" if s.get("parse_ok") else "unreadable or off the scale"))
    low, high = (data.get("scale") or [1, 10])[:2]
    overall = data.get("overall")
    lines.append(f"OVERALL: {overall:g} on {low} to {high}." if overall is not None else "OVERALL: none: a criterion's answer could not be read.")
    return lines


RENDERERS: dict[str, Callable[[dict[str, Any]], Lines]] = {
    "compare_pair": pair_lines,
    "infer_instruction_reward": flip_lines,
    "grade_score_options": grade_lines,
    "score_response": score_lines,
    "lwe_judge": lwe_lines,
    "lwe_session_show": session_lines,
    "lwe_session": session_lines,
    "judge_stats": stats_lines,
    "record_label": label_lines,
}

SMALL_MODEL = (
    "Why: the embedded judge, SmolLM2-135M, has 135 million parameters. It ships so judge-mcp works offline with "
    "nothing else installed, and it is far too small to judge: "
)


def small_model_note(tool: str, data: dict[str, Any]) -> str | None:
    """For the embedded model: why a verdict is missing or follows positions (None when there is nothing to say)."""
    if tool == "compare_pair" and not data.get("winner"):
        return SMALL_MODEL + "it mostly answers by position. A real judge agrees with itself in both orders on a case this clear and names B."
    if tool == "infer_instruction_reward" and data.get("best_index") is None:
        return SMALL_MODEL + "it rarely recovers an instruction. A real judge infers something close to 'write a haiku about the sea' from response 0."
    if tool == "grade_score_options" and (len(data.get("tied_indices") or []) > 1 or (data.get("grade_score") or 0) < 0.5):
        return SMALL_MODEL + "it mostly answers by position. A real judge picks option 1 in every order (Grade Score near 1)."
    return None
