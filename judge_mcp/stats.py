"""Live bias telemetry: figures an agent (or its operator) reads before trusting a judge, computed from the
verdict log per (backend, model, tool, inputs brought: text, criteria, reference, images), over all time and over the last N verdicts.

Pure functions over verdict-log rows; `from_store` streams the rows from a Store page by page (newest first), so
the all-time figure never holds the whole log in memory. What each figure counts, per tool:

- position_bias: of parsed pairwise trials, the share naming the answer shown first as better (compare_pair's
  trials, lwe_judge's two vanilla verdicts and its meta-path judgment, which is shown in the caller's order);
  for grade_score_options, the share of parsed trials picking the first shown position. `unbiased` is what an
  unbiased judge scores: 0.5 for pairs, the mean of 1/n over the counted grade_score_options trials.
- order_inconsistency: compare_pair and lwe_judge (vanilla) verdicts with both orders parsed whose two orders
  disagree.
- parse_failures / reasks: per answer (a compare_pair or grade_score_options trial, a FLIP response, an LWE
  vanilla verdict or meta-path judgment): answers left unparsed / answers that needed the re-ask.
- ties: compare_pair and lwe_judge: verdicts with no winner (orders disagree or an answer unparsed);
  infer_instruction_reward: the top reward tied (of verdicts with a parsed response); grade_score_options: the
  mode tied (of verdicts with a parsed trial).
- length_preference: of decided compare_pair / lwe_judge verdicts whose two answers differ in length
  (characters), the share won by the longer answer (0.5: no preference).
- calls, cached_calls, latency_ms: means of the verdicts' usage.

Every rate carries its numerator and denominator; a rate with denominator 0 is null, never 0.
A panel row (an output with a `panel` list) counts under the backend and model it was logged with; a member that
carries its own `trials` also counts as a verdict of that member's backend and model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


from judge_mcp import agreement
from judge_mcp.arg_types import DEFAULT_LAST, MAX_LAST
from judge_mcp.outputs import GroupStats, StatsReport, Window
from judge_mcp.args import ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs
from judge_mcp.storage.verdict_log import VerdictLog


if TYPE_CHECKING:
    from judge_mcp.storage.engine import Engine

PAGE = 500
# The tools whose verdicts judge two answers (position, order and length figures), and those two answers' arguments.
PAIRWISE = (ComparePairArgs, LweJudgeArgs)
ANSWERS = ComparePairArgs.ANSWERS


# ---- what one verdict contributes ------------------------------------------------------------------------------
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
    if tool == ComparePairArgs.tool:
        return pair_facts(output, lengths)
    if tool == LweJudgeArgs.tool:
        return lwe_facts(output, lengths, row.get("vanilla_reasks"))
    if tool == GradeScoreOptionsArgs.tool:
        return grade_facts(output)
    if tool == InferInstructionRewardArgs.tool:
        return flip_facts(output)
    return generic_facts(output)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


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


# ---- tallies -----------------------------------------------------------------------------------------------------
def _rate(count: int, of: int) -> dict[str, Any]:
    return {"rate": round(count / of, 4) if of else None, "count": count, "of": of}


class Tally:
    """Running counts for one (backend, model, tool)."""

    def __init__(self) -> None:
        self.verdicts = 0
        self.first = self.picks = 0
        self.unbiased_sum = 0.0
        self.disagree = self.both_orders = 0
        self.unparsed = self.answers = 0
        self.reasked = self.reask_known = 0
        self.ties = self.tie_of = 0
        self.longer = self.decided = 0
        self.sums = {"calls": 0.0, "cached_calls": 0.0, "latency_ms": 0.0}
        self.counts = {"calls": 0, "cached_calls": 0, "latency_ms": 0}

    def add(self, facts: Facts, usage: dict[str, Any]) -> None:
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
        for key in self.sums:
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.sums[key] += value
                self.counts[key] += 1

    def summary(self, backend: str, model: str, tool: str, inputs: str = "text") -> GroupStats:
        def mean(key: str, places: int) -> dict[str, Any]:
            n = self.counts[key]
            return {"mean": round(self.sums[key] / n, places) if n else None, "of": n}

        return GroupStats(
            backend=backend,
            model=model,
            tool=tool,
            inputs=inputs,
            verdicts=self.verdicts,
            position_bias={**_rate(self.first, self.picks), "unbiased": round(self.unbiased_sum / self.picks, 4) if self.picks else None},
            order_inconsistency=_rate(self.disagree, self.both_orders),
            parse_failures=_rate(self.unparsed, self.answers),
            reasks=_rate(self.reasked, self.reask_known),
            ties=_rate(self.ties, self.tie_of),
            length_preference=_rate(self.longer, self.decided),
            calls=mean("calls", 2),
            cached_calls=mean("cached_calls", 2),
            latency_ms=mean("latency_ms", 1),
        )


class WindowTally:
    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, str, str], Tally] = {}
        self.verdicts = self.skipped = 0
        self.oldest: float | None = None
        self.newest: float | None = None

    def add(self, row: dict[str, Any]) -> None:
        self.verdicts += 1
        at = row.get("created_at")
        if isinstance(at, (int, float)):
            self.oldest = at if self.oldest is None else min(self.oldest, at)
            self.newest = at if self.newest is None else max(self.newest, at)
        if not isinstance(row.get("output"), dict):
            self.skipped += 1
            return
        for one in [row, *panel_members(row)]:
            key = (str(one["backend"]), str(one["model"]), str(one["tool"]), brought_label(row.get("brought")))
            usage = one.get("usage")
            self.groups.setdefault(key, Tally()).add(facts_of(one), usage if isinstance(usage, dict) else {})

    def window(self) -> Window:
        return Window(
            verdicts=self.verdicts,
            oldest_at=self.oldest,
            newest_at=self.newest,
            skipped=self.skipped,
            groups=[tally.summary(*key) for key, tally in sorted(self.groups.items())],
        )


def check_last(value: Any, name: str = "last") -> int:
    """The last-N window size (an int, or a string of digits), or a ValueError naming the argument `name`."""
    number = value
    if isinstance(value, str):
        try:
            number = int(value.strip(), 10)
        except ValueError:
            raise ValueError(f"'{name}' must be a whole number from 1 to {MAX_LAST:,}, got {value!r}") from None
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_LAST:
        raise ValueError(f"'{name}' must be a whole number from 1 to {MAX_LAST:,}, got {value!r}")
    return number


def compute(rows_newest_first: Iterable[dict[str, Any]], last: int = DEFAULT_LAST) -> StatsReport:
    """The report from verdict-log rows, newest first (see `VerdictLog.stats_page` for a row's keys)."""
    last = check_last(last)
    everything, recent = WindowTally(), WindowTally()
    for k, row in enumerate(rows_newest_first):
        everything.add(row)
        if k < last:
            recent.add(row)
    return StatsReport(last_n=last, all_time=everything.window(), last=recent.window())


def iter_rows(store: "Engine", page: int = PAGE) -> Iterator[dict[str, Any]]:
    """Every verdict-log row, newest first, read `page` rows at a time (one short read per page, no lock held
    between pages: rows logged meanwhile are newer than the first page and are not included)."""
    before: int | None = None
    while True:
        rows = VerdictLog(store).stats_page(before_id=before, limit=page, pair_tools=[m.tool for m in PAIRWISE], answers=ANSWERS)
        yield from (row_from_json(row) for row in rows)
        if len(rows) < page:
            return
        before = rows[-1]["id"]


def from_store(store: "Engine", last: int = DEFAULT_LAST) -> StatsReport:
    """The report over the store's verdict log, with each group's agreement with human labels (agreement.py).
    Blocking: from async code run it in a worker thread."""
    return agreement.attach(compute(iter_rows(store), last), store)


# ---- decoding the store's rows ---------------------------------------------------------------------------------
BROUGHT = ("criteria", "reference", "images")


def brought_label(flags: Any) -> str:
    """A group's `inputs`: the names of the inputs a caller brought (criteria, reference, images), or 'text'."""
    names = [name for name, flag in zip(BROUGHT, flags) if flag] if isinstance(flags, (list, tuple)) else []
    return "+".join(names) or "text"


def row_from_json(row: dict[str, Any]) -> dict[str, Any]:
    """A `VerdictLog.stats_page` row with its JSON columns decoded (an unreadable output becomes None: skipped)."""
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
