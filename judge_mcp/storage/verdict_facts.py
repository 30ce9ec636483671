"""What one verdict contributes to the bias telemetry (judge_mcp/stats/report.py), as pure functions of the verdict: its
facts (`Facts`: trials naming the first-shown answer, orders disagreeing, answers parsed and re-asked, a tie, the
longer answer winning) and the counts they add to its group (`Counts`). The verdict log computes them once, when it
writes the verdict (`contributions`, from the Python objects the tool produced), and keeps them in the aggregate
tables (verdict_stats.py); the reference scan of the log (stats/report.py) computes them from the stored rows
(`row_from_json`), with the same functions. The backfill migration (migrations.m012_verdict_stats) runs its own
copy, frozen as it shipped (migration_helpers.py).

A group is (backend, model, tool, inputs brought). A panel row counts under the backend and model it was logged with;
a member that carries its own `trials` also counts as a verdict of that member's backend and model.

Storage imports no layer above it: the tools' names and compare_pair's answer keys are spelled here (a test checks
them against judge_mcp/contract/args.py).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

COMPARE_PAIR, LWE_JUDGE, GRADE_SCORE, FLIP = "compare_pair", "lwe_judge", "grade_score_options", "infer_instruction_reward"
SCORE = "score_response"
PAIR_TOOLS = (COMPARE_PAIR, LWE_JUDGE)  # the tools whose verdicts judge two answers (position, order, length)
ANSWERS = ("response_a", "response_b")  # those two answers' input keys
# a group's `inputs`: what the caller brought besides the texts; a conversation (prompt, instruction or context given as
# messages) and a trajectory (an answer, option or response given as messages) are kinds of their own
BROUGHT = ("criteria", "reference", "images", "conversation", "trajectory")
CONVERSATION_KEYS = ("prompt", "instruction", "context")  # the inputs that may be a conversation
TRAJECTORY_KEYS = ("response_a", "response_b")  # the inputs that may be a trajectory ...
TRAJECTORY_LISTS = ("options", "responses")  # ... or hold trajectories
IMAGE_KEYS = ("images", "response_a_images", "response_b_images", "option_images")
Key = tuple[str, str, str, str]  # (backend, model, tool, inputs)


@dataclass
class Facts:
    first_picks: list[tuple[bool, float]] = field(default_factory=list)  # per parsed trial: (picked first shown, unbiased rate)
    orders_disagree: bool | None = None  # None: not both orders parsed (or no orders at all)
    answers: list[tuple[bool, bool | None]] = field(default_factory=list)  # per answer: (parsed, re-asked; None unknown)
    tie: bool | None = None  # None: the tool's tie is undefined for this verdict
    longer_won: bool | None = None  # None: not decided, equal lengths, or not pairwise


def _side(value: Any) -> str | None:
    return value if value in ("A", "B") else None


def _flag(value: Any) -> bool:
    return value is True or value == 1


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def pair_facts(output: dict[str, Any], lengths: tuple[int, int] | None) -> Facts:
    """compare_pair: its trials (each with order AB/BA and `better` in the caller's A/B)."""
    facts = Facts()
    by_order: dict[str, str] = {}
    for trial in _dicts(output.get("trials")):
        better, order = _side(trial.get("better")), trial.get("order")
        parsed = _flag(trial.get("parse_ok")) and better is not None
        facts.answers.append((parsed, _flag(trial.get("reasked"))))
        if parsed and order in ("AB", "BA"):
            facts.first_picks.append(((order == "AB") == (better == "A"), 0.5))
            by_order[order] = better  # type: ignore[assignment]  # parsed: `better` is "A" or "B"
    if len(by_order) == 2:
        facts.orders_disagree = by_order["AB"] != by_order["BA"]
    _winner_facts(facts, output, lengths)
    return facts


def lwe_facts(output: dict[str, Any], lengths: tuple[int, int] | None, vanilla_reasks: set[str] | None) -> Facts:
    """lwe_judge: the two vanilla verdicts (caller's A/B; `ab` shown A first) and the meta-path judgment (shown in the
    caller's order). The vanilla verdicts' re-asks are known only from the call records (`vanilla_reasks`: the
    orders re-asked; None when the records were not read)."""
    facts = Facts()
    vanilla = output.get("vanilla")
    if isinstance(vanilla, dict):
        ab, ba = _side(vanilla.get("ab")), _side(vanilla.get("ba"))
        for order, verdict in (("AB", ab), ("BA", ba)):
            reasked = None if vanilla_reasks is None else order in vanilla_reasks
            facts.answers.append((verdict is not None, reasked))
            if verdict is not None:
                facts.first_picks.append(((order == "AB") == (verdict == "A"), 0.5))
        if ab is not None and ba is not None:
            facts.orders_disagree = ab != ba
    if output.get("path") == "meta_prompt":
        winner = _side(output.get("winner"))
        parsed = _flag(output.get("parse_ok", winner is not None)) and winner is not None
        facts.answers.append((parsed, _flag(output.get("reasked"))))
        if parsed:
            facts.first_picks.append((winner == "A", 0.5))
    _winner_facts(facts, output, lengths)
    return facts


def _winner_facts(facts: Facts, output: dict[str, Any], lengths: tuple[int, int] | None) -> None:
    winner = _side(output.get("winner"))
    facts.tie = winner is None
    if winner is not None and lengths is not None and lengths[0] != lengths[1]:
        facts.longer_won = (winner == "A") == (lengths[0] > lengths[1])


def grade_facts(output: dict[str, Any]) -> Facts:
    """grade_score_options: each trial's shown position picked, out of len(order) positions; the tied mode."""
    facts = Facts()
    parsed_any = False
    for trial in _dicts(output.get("trials")):
        position, shown = trial.get("selected_position"), trial.get("order")
        parsed = _flag(trial.get("parse_ok")) and isinstance(position, int) and not isinstance(position, bool)
        facts.answers.append((parsed, _flag(trial.get("reasked"))))
        if parsed and isinstance(shown, list) and shown:
            facts.first_picks.append((position == 0, 1 / len(shown)))
        parsed_any = parsed_any or parsed
    if parsed_any:
        tied = output.get("tied_indices")
        facts.tie = isinstance(tied, list) and len(tied) > 1
    return facts


def flip_facts(output: dict[str, Any]) -> Facts:
    """infer_instruction_reward: one answer per response; a tie is a tied top reward among parsed responses."""
    facts = Facts()
    for item in _dicts(output.get("results")):
        facts.answers.append((_flag(item.get("parse_ok")), _flag(item.get("reasked"))))
    if any(parsed for parsed, _ in facts.answers):
        tied = output.get("tied_best")
        facts.tie = isinstance(tied, list) and len(tied) > 1
    return facts


def score_facts(output: dict[str, Any]) -> Facts:
    """score_response: one answer per sample of each criterion (the criterion's first `reasked` samples counted as re-asked)."""
    facts = Facts()
    for item in _dicts(output.get("scores")):
        samples, reasked = item.get("samples"), item.get("reasked")
        count = reasked if isinstance(reasked, int) and not isinstance(reasked, bool) else 0
        facts.answers.extend((v is not None, k < count) for k, v in enumerate(samples if isinstance(samples, list) else []))
    return facts


def generic_facts(output: dict[str, Any]) -> Facts:
    """Any other tool name: its trials' parse_ok/reasked if it has such trials, nothing else."""
    facts = Facts()
    for trial in _dicts(output.get("trials")):
        if "parse_ok" in trial:
            facts.answers.append((_flag(trial.get("parse_ok")), _flag(trial.get("reasked"))))
    return facts


def facts_of(row: dict[str, Any]) -> Facts:
    tool, output = row["tool"], row["output"]
    lengths = row.get("lengths")
    if tool == COMPARE_PAIR:
        return pair_facts(output, lengths)
    if tool == LWE_JUDGE:
        return lwe_facts(output, lengths, row.get("vanilla_reasks"))
    if tool == GRADE_SCORE:
        return grade_facts(output)
    if tool == FLIP:
        return flip_facts(output)
    if tool == SCORE:
        return score_facts(output)
    return generic_facts(output)


def panel_members(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for the members of a panel verdict that carry their own trials (counted under each member's backend and
    model); members without trials, or without a backend and model, add nothing."""
    members = []
    for member in _dicts(row["output"].get("panel")):
        backend, model = member.get("backend"), member.get("model")
        if isinstance(backend, str) and isinstance(model, str) and isinstance(member.get("trials"), list):
            usage = member.get("usage") if isinstance(member.get("usage"), dict) else {}
            members.append({**row, "backend": backend, "model": model, "output": member, "usage": usage, "vanilla_reasks": None})
    return members


def brought_label(flags: Any) -> str:
    """A group's `inputs`: the names of the inputs a caller brought (criteria, reference, images, conversation,
    trajectory), or 'text'. Rows logged before the last two kinds carry three flags."""
    names = [name for name, flag in zip(BROUGHT, flags) if flag] if isinstance(flags, (list, tuple)) else []
    return "+".join(names) or "text"


# ---- counts ------------------------------------------------------------------------------------------------------
# the usage values averaged over a group's verdicts (reasoning_tokens and the prompt-cache counts: of the verdicts that
# reported them; migrations' m017 and m018)
MEANS = ("calls", "cached_calls", "latency_ms", "reasoning_tokens", "prompt_tokens", "cached_prompt_tokens", "cache_write_tokens")
CACHE_COLUMNS = ("prompt_tokens_sum", "prompt_tokens_n", "cached_prompt_tokens_sum", "cached_prompt_tokens_n",
                 "cache_write_tokens_sum", "cache_write_tokens_n")  # added by m018


@dataclass
class Counts:
    """The running counts of one group (or what one verdict adds to it): integers, and sums of floats. The field names
    are the aggregate tables' column names."""

    verdicts: int = 0
    first: int = 0
    picks: int = 0
    unbiased_sum: float = 0.0
    disagree: int = 0
    both_orders: int = 0
    unparsed: int = 0
    answers: int = 0
    reasked: int = 0
    reask_known: int = 0
    ties: int = 0
    tie_of: int = 0
    longer: int = 0
    decided: int = 0
    calls_sum: float = 0.0
    calls_n: int = 0
    cached_calls_sum: float = 0.0
    cached_calls_n: int = 0
    latency_ms_sum: float = 0.0
    latency_ms_n: int = 0
    reasoning_tokens_sum: float = 0.0
    reasoning_tokens_n: int = 0
    prompt_tokens_sum: float = 0.0
    prompt_tokens_n: int = 0
    cached_prompt_tokens_sum: float = 0.0
    cached_prompt_tokens_n: int = 0
    cache_write_tokens_sum: float = 0.0
    cache_write_tokens_n: int = 0

    def add(self, facts: Facts, usage: Mapping[str, Any]) -> None:
        """One verdict's facts and usage."""
        self.verdicts += 1
        for first, unbiased in facts.first_picks:
            self.picks += 1
            self.first += first
            self.unbiased_sum += unbiased
        if facts.orders_disagree is not None:
            self.both_orders += 1
            self.disagree += facts.orders_disagree
        for parsed, reasked in facts.answers:
            self.answers += 1
            self.unparsed += not parsed
            if reasked is not None:
                self.reask_known += 1
                self.reasked += reasked
        if facts.tie is not None:
            self.tie_of += 1
            self.ties += facts.tie
        if facts.longer_won is not None:
            self.decided += 1
            self.longer += facts.longer_won
        for key in MEANS:
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(self, f"{key}_sum", getattr(self, f"{key}_sum") + value)
                setattr(self, f"{key}_n", getattr(self, f"{key}_n") + 1)

    def values(self) -> list[Any]:
        """The counts in COLUMNS' order."""
        return list(_VALUES(self))

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Counts":
        """From a row holding the columns (NULL sums count as 0)."""
        counts = cls()
        for name, kind in COLUMN_TYPES.items():
            setattr(counts, name, kind(row.get(name) or 0))
        return counts


COLUMN_TYPES = {f.name: (float if f.type in ("float", float) else int) for f in fields(Counts)}
COLUMNS = tuple(COLUMN_TYPES)
_VALUES = operator.attrgetter(*COLUMNS)
REAL_COLUMNS = tuple(name for name, kind in COLUMN_TYPES.items() if kind is float)


# ---- one verdict's contributions ---------------------------------------------------------------------------------
def contributions(row: dict[str, Any]) -> list[tuple[Key, Counts]] | None:
    """What a decoded verdict row adds (the row first, then each panel member with trials), or None when its output
    could not be read (a skipped row). Row keys: tool, backend, model, output, usage, lengths, brought,
    vanilla_reasks (as `row_from_json` gives them)."""
    if not isinstance(row.get("output"), dict):
        return None
    label = brought_label(row.get("brought"))
    parts = []
    for one in [row, *panel_members(row)]:
        counts = Counts()
        usage = one.get("usage")
        counts.add(facts_of(one), usage if isinstance(usage, dict) else {})
        parts.append(((str(one["backend"]), str(one["model"]), str(one["tool"]), label), counts))
    return parts


def written_row(tool: str, backend: str, model: str, inputs: Mapping[str, Any], output: Any, usage: Any, calls: Any) -> dict[str, Any]:
    """The decoded row of a verdict being written, from the Python objects the tool produced (what `row_from_json`
    gives for the stored row): the answers' lengths in characters, the inputs brought, lwe_judge's vanilla re-asks."""
    lengths = None
    if tool in PAIR_TOOLS:
        a, b = inputs.get(ANSWERS[0]), inputs.get(ANSWERS[1])
        lengths = (len(a), len(b)) if isinstance(a, str) and isinstance(b, str) else None
    brought = brought_flags(inputs)
    reasks = None
    if tool == LWE_JUDGE and isinstance(calls, list):
        reasks = _vanilla_reasks(call.get("purpose") for call in calls if isinstance(call, dict))
    return {"tool": tool, "backend": backend, "model": model, "output": output, "usage": usage if isinstance(usage, dict) else {},
            "lengths": lengths, "brought": brought, "vanilla_reasks": reasks}


def longer_answer(lengths: Any) -> str | None:
    """Which of a pair's two answers is longer in characters ("A" or "B"; None: equal lengths, or not a pair of texts),
    from a row's `lengths` (kept per verdict in the facts table: judge_stats meets it with the caller's labels)."""
    if not isinstance(lengths, (list, tuple)) or len(lengths) != 2 or lengths[0] == lengths[1]:
        return None
    return "A" if lengths[0] > lengths[1] else "B"


def brought_flags(inputs: Mapping[str, Any]) -> list[bool]:
    """Which of BROUGHT a verdict's (logged) inputs hold, in BROUGHT's order; a long criteria or reference may be
    stored apart (the row's `text_refs`, storage/texts.py)."""
    lists = [inputs.get(key) for key in TRAJECTORY_LISTS]
    refs = inputs.get("text_refs")
    shelved = refs if isinstance(refs, dict) else {}
    return [BROUGHT[0] in inputs or BROUGHT[0] in shelved, BROUGHT[1] in inputs or BROUGHT[1] in shelved, any(key in inputs for key in IMAGE_KEYS),
            any(isinstance(inputs.get(key), list) for key in CONVERSATION_KEYS),
            any(isinstance(inputs.get(key), list) for key in TRAJECTORY_KEYS)
            or any(isinstance(item, list) for items in lists if isinstance(items, list) for item in items)]


def _vanilla_reasks(purposes: Iterable[Any]) -> set[str]:
    """The orders of lwe_judge's vanilla re-asks, from its call records' purposes (`lwe_judge:vanilla:AB:reask`)."""
    return {p.split(":")[2] for p in purposes
            if isinstance(p, str) and p.startswith("lwe_judge:vanilla:") and p.endswith(":reask") and p.count(":") >= 3}


def row_from_json(row: dict[str, Any]) -> dict[str, Any]:
    """A `verdict_log.stats_page` row with its JSON columns decoded (an unreadable output becomes None: skipped)."""
    def load(text: Any) -> Any:
        try:
            return json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None

    lengths = (row["len_a"], row["len_b"]) if row.get("len_a") is not None and row.get("len_b") is not None else None
    reasks = load(row.get("vanilla_reasks"))
    return {
        "id": row["id"],
        "tool": row["tool"],
        "backend": row["backend"],
        "model": row["model"],
        "created_at": row["created_at"],
        "output": load(row.get("output")),
        "usage": load(row.get("usage")) or {},
        "lengths": lengths,
        "brought": load(row.get("brought")),
        "vanilla_reasks": {p.split(":")[2] for p in reasks if isinstance(p, str) and p.count(":") >= 3} if isinstance(reasks, list) else None,
    }
