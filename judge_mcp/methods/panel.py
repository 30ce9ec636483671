"""Judge panels and the self-preference guard, as pure functions.

A *panel* is 2-8 named backends judging the same input, each with the unchanged method (compare_pair or
grade_score_options); runtime/run.py runs them concurrently and hands their outcomes to `combine_pairs` /
`combine_grades` here. "Replacing Judges with Juries" (Verga et al. 2024) found a panel of smaller, diverse judges
agreeing better with humans than one large judge, and less biased towards its own family.

The panel verdict (`tally`): each member that answered has one vote, its own verdict (compare_pair: `winner`;
grade_score_options: `winner_index`, none when its mode is tied). A member without a verdict (its two orders
disagreed, its answers did not parse, its mode was tied) *abstains*, and abstentions count in the denominator: the
verdict is the one named by **more than half of the members that answered**. So a tie is no winner, and neither
is a verdict most of the panel could not reach (A + two abstentions out of three). This is the strict reading,
in line with compare_pair's own rule (a winner only when both orders agree); `panel_votes` gives the counts for
callers who prefer a plurality. A member whose backend fails after its retries is reported (`status: "failed"`)
and left out of the count, with a warning; when fewer than two members answered (of a panel that had two or
more to run) there is no verdict. Exclusion may leave a panel of one: that judge's verdict then stands, with a
warning.

The self-preference guard that decides which members judge is methods/self_preference.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_mcp.contract.fields import MIN_MEMBERS
from judge_mcp.contract.args import ComparePairArgs, GradeScoreOptionsArgs
from judge_mcp.methods.grade_score import scoring as grade_score
from judge_mcp.methods import pairwise
from judge_mcp.methods.members import Member
from judge_mcp.calls.usage import UsageTotals
from judge_mcp.contract.results import (
    ComparePairResult, GradePanelMember, GradeScoreResult, PairPanelMember, PanelVotes, PBetter,
)

# ---- the vote ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tally:
    winner: str | None
    counts: dict[str, int]
    answered: int
    abstained: int
    needed: int | None  # None: too few members answered for any verdict
    tied: list[str] = field(default_factory=list)  # verdicts sharing the top count, when two or more do


def tally(votes: Sequence[str | None], quorum: int = MIN_MEMBERS) -> Tally:
    """The panel verdict from the votes of the members that answered (None: an abstention): the verdict named
    by more than half of them; none on a tie, or when fewer than `quorum` members answered."""
    counts = Counter(v for v in votes if v is not None)
    answered = len(votes)
    abstained = sum(v is None for v in votes)
    ordered = dict(sorted(counts.items()))
    top = max(counts.values(), default=0)
    tied = sorted(k for k, c in counts.items() if c == top) if top else []
    if answered < quorum or answered == 0:
        return Tally(None, ordered, answered, abstained, None, tied if len(tied) > 1 else [])
    needed = answered // 2 + 1
    winner = tied[0] if len(tied) == 1 and top >= needed else None
    return Tally(winner, ordered, answered, abstained, needed, tied if len(tied) > 1 else [])


def quorum(selected: int) -> int:
    """Members that must answer for a verdict: two, or the one member exclusion left."""
    return min(MIN_MEMBERS, selected)


# ---- combining members' results ------------------------------------------------------------------------------------
def sum_usage(members: Sequence[Member], latency_ms: float) -> UsageTotals:
    """Calls and tokens summed over the members; latency is the panel's wall time (members run concurrently)."""
    return UsageTotals.summed((m.usage for m in members if m.usage is not None), latency_ms)


def panel_model(members: Sequence[Member]) -> str:
    """The `model` of a panel result: every member's model id, in the order given."""
    return "panel: " + ", ".join(m.model for m in members)


def _votes(t: Tally, members: Sequence[Member]) -> PanelVotes:
    return PanelVotes(
        votes=t.counts,
        answered=t.answered,
        abstained=t.abstained,
        failed=sum(m.status == "failed" for m in members),
        excluded=sum(m.excluded for m in members),
        needed=t.needed,
    )


def _panel_warnings(t: Tally, members: Sequence[Member], what: str) -> list[str]:
    out = [f"panel member '{m.backend}' failed and did not vote: {m.error}" for m in members if m.status == "failed"]
    selected = sum(not m.excluded for m in members)
    if t.needed is None:
        out.append(f"only {t.answered} of {selected} panel members answered: no panel verdict (each member's is in panel)")
    elif selected == 1:
        out.append(f"exclude_same_family left one judge ('{next(m.backend for m in members if not m.excluded)}'): its verdict is not a panel's")
    elif t.tied:
        out.append(f"the panel is tied between {what} {', '.join(t.tied)}: no winner")
    elif t.winner is None:
        out.append(
            f"no {what.removesuffix('s')} has a majority of the {t.answered} members that answered ({t.needed} needed; "
            f"votes {t.counts or 'none'}, {t.abstained} abstained): no winner"
        )
    return out


def pooled_probability(results: Sequence[ComparePairResult]) -> PBetter | None:
    """The members' p_better averaged (each already averaged over its own orders); None when any member that
    answered has none, as one judge's is None when any judged order has none."""
    values = [r.p_better.A for r in results if r.p_better is not None]
    if not results or len(values) != len(results):
        return None
    return pairwise.probability(sum(values) / len(values))


def combine_pairs(
    members: Sequence[Member], args: ComparePairArgs, *, latency_ms: float, warnings: Sequence[str] = ()
) -> ComparePairResult:
    """The panel's compare_pair result. `consistent`: every member that was asked answered consistently (its trials
    parsed and agree, one order or two) and all named the same answer.
    `swapped` is true only when every member that answered judged the swapped order; `p_better` pools theirs."""
    answered = [m for m in members if m.status == "ok"]
    selected = [m for m in members if not m.excluded]
    t = tally([m.result.winner for m in answered], quorum(len(selected)))
    swapped = bool(answered) and all(m.result.swapped for m in answered)
    consistent = len(answered) == len(selected) and t.abstained == 0 and len(t.counts) == 1
    entries = [
        PairPanelMember(
            backend=m.backend, model=m.model, status=m.status, error=m.error, usage=m.usage,
            winner=m.result.winner if m.result else None,
            consistent=m.result.consistent if m.result else None,
            p_better=m.result.p_better if m.result else None,
            swapped=m.result.swapped if m.result else None,
            trials=m.result.trials if m.result else [],
            warnings=list(getattr(m.result, "warnings", []) or []) if m.result else [],
        )
        for m in members
    ]
    return ComparePairResult(
        winner=t.winner,  # type: ignore[arg-type]
        consistent=consistent,
        p_better=pooled_probability([m.result for m in answered]),
        swapped=swapped,
        trials=[],
        goal=args.goal,
        template=args.template,
        model=panel_model(members),
        usage=sum_usage(members, latency_ms),
        warnings=[*warnings, *_panel_warnings(t, members, "answers")],
        panel=entries,
        panel_votes=_votes(t, members),
    )


def _grade_vote(result: GradeScoreResult) -> str | None:
    """A member's vote: its mode, unless tied (then it abstains) or null (no parsed trial, or the unrelated option)."""
    if result.winner_index is None or result.tied_indices:
        return None
    return str(result.winner_index)


def _grade_entry(m: Member) -> GradePanelMember:
    """A member's line in the panel's grade_score_options result (its own result's figures, if it answered)."""
    r = m.result
    return GradePanelMember(
        backend=m.backend, model=m.model, status=m.status, error=m.error, usage=m.usage,
        winner_index=r.winner_index if r else None,
        tied_indices=r.tied_indices if r else [],
        grade_score=r.grade_score if r else None,
        llm_score=r.llm_score if r else None,
        choice_score=r.choice_score if r else None,
        trials=r.trials if r else [],
        warnings=r.warnings if r else [],
    )


def _unrelated_fields(first: GradeScoreResult | None, option_counts: Sequence[int]) -> dict[str, Any]:
    """The unrelated option's fields, from the first member that answered (every member was shown the same one)."""
    index = first.unrelated_index if first else None
    return {
        "unrelated_index": index,
        "unrelated_picked": option_counts[index] if index is not None and option_counts else 0,
        "unrelated_option": first.unrelated_option if first else None,
        "unrelated_source": first.unrelated_source if first else None,
    }


def combine_grades(
    members: Sequence[Member], args: GradeScoreOptionsArgs, *, latency_ms: float, warnings: Sequence[str] = ()
) -> GradeScoreResult:
    """The panel's grade_score_options result: `winner_index` by the members' vote; the counts and scores
    (position_counts, option_counts, llm_score, choice_score, grade_score) over every member's trials pooled."""
    answered = [m for m in members if m.status == "ok"]
    selected = [m for m in members if not m.excluded]
    t = tally([_grade_vote(m.result) for m in answered], quorum(len(selected)))
    pooled = [trial for m in answered for trial in m.result.trials]
    s = grade_score.summarise(pooled, len(pooled[0].order) if pooled else 0)
    return GradeScoreResult(
        winner_index=int(t.winner) if t.winner is not None else None,
        tied_indices=[int(i) for i in t.tied],
        trials=[],
        **grade_score.score_fields(s),
        **_unrelated_fields(answered[0].result if answered else None, s.option_counts),
        prompt_variant=args.prompt_variant,
        warnings=[*warnings, *_panel_warnings(t, members, "options")],
        model=panel_model(members),
        usage=sum_usage(members, latency_ms),
        panel=[_grade_entry(m) for m in members],
        panel_votes=_votes(t, members),
    )
