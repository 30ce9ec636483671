"""The tools' output models. Each is the `outputSchema` a client sees, so field names follow the contract (docs/tools.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judge_mcp.contract.fields import Action, AnswerOrder, Goal, Template
from judge_mcp.contract.args import GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs

Side = Literal["A", "B"]


class UsageOut(BaseModel, defer_build=True):
    """A judgment's usage, read from the call layer's totals (calls/usage.py) by attribute."""

    model_config = ConfigDict(from_attributes=True)

    calls: int = Field(0, description="requests actually sent to a backend (retries not counted)")
    cached_calls: int = Field(0, description="requests answered from the call cache or a shared in-flight call")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = Field(0.0, description="wall time of the judgment, in milliseconds")
    reasoning_tokens: int | None = Field(None, description="hidden reasoning, part of completion_tokens")
    cached_prompt_tokens: int | None = Field(None, description="read from the provider's prompt cache, part of prompt_tokens")
    cache_write_tokens: int | None = Field(None, description="written to the prompt cache, part of prompt_tokens")


class JudgedResult(BaseModel, defer_build=True):
    model: str
    usage: UsageOut
    verdict_id: str | None = Field(None, description="for record_label")


# ---- panels and the self-preference guard (methods/panel.py) --------------------------------------------------------
class SelfPreference(BaseModel, defer_build=True):
    backend: str = Field(description="the judge's backend name")
    judge_model: str = Field(description="the judge's backend kind / model id")
    families: list[str] = Field(description="the model families the judge shares with the authors of `answers`")
    answers: list[int] = Field(description="0-based indices of the answers by a same-family author (compare_pair: 0 = A, 1 = B)")
    excluded: bool = Field(False, description="the member was left out of the panel (exclude_same_family)")


class PanelVotes(BaseModel, defer_build=True):
    votes: dict[str, int] = Field(description='members voting for each verdict ("A"/"B", or the option index as a string)')
    answered: int = Field(description="members that returned a judgment (abstentions included)")
    abstained: int = Field(description="members that answered without a verdict (inconsistent orders, unparsed, a tied mode)")
    failed: int = Field(0, description="members whose backend failed after its retries")
    excluded: int = Field(0, description="members left out as same-family judges (exclude_same_family)")
    needed: int | None = Field(description="votes a verdict needs: more than half of `answered`; null when too few members answered")


class PanelMember(BaseModel, defer_build=True):
    backend: str = Field(description="the backend name given in `backends`")
    model: str = Field(description="backend kind / model id")
    status: Literal["ok", "failed", "excluded"]
    error: str | None = Field(None, description="failed only: the backend error")
    usage: UsageOut | None = Field(None, description="this member's calls and tokens (null when excluded)")
    warnings: list[str] = Field(default_factory=list, description="the member's own warnings")


# ---- compare_pair -----------------------------------------------------------------------------------------------
class PBetter(BaseModel, defer_build=True):
    A: float = Field(ge=0.0, le=1.0, description="probability that the caller's A is the better answer")
    B: float = Field(ge=0.0, le=1.0, description="probability that the caller's B is the better answer (1 - A)")


class PairTrial(BaseModel, defer_build=True):
    order: Literal["AB", "BA"] = Field(description="AB: the caller's A was shown first; BA: swapped")
    better: Side | None = Field(description="the better answer in the caller's A/B order; null when unparsed")
    label: str | None = Field(description="the model's final label as printed for the order it saw, e.g. [[B>A]]")
    rationale: str = ""
    parse_ok: bool
    reasked: bool = Field(False, description="the first answer was unparsed and the model was asked again")
    continued: bool = Field(False, description="the answer stopped at the token limit and the model was asked to continue it")
    truncated: bool = Field(False, description="the last answer still stopped at the token limit (max_tokens)")
    unparsed_reason: Literal["truncated", "no_verdict"] | None = Field(
        None, description="unparsed only: truncated (cut off at the token limit) or no_verdict (finished without a readable label)"
    )
    p_better: PBetter | None = Field(
        None,
        description="this order's label probabilities from the backend's token log-probabilities, renormalised over the "
        "two labels and mapped to the caller's A/B; null without log-probabilities or when unparsed",
    )


class PairPanelMember(PanelMember):
    winner: Side | None = Field(None, description="the member's verdict (its vote); null: an abstention, or not judged")
    consistent: bool | None = Field(None, description="the member's trials parsed and agree (null: not judged)")
    p_better: PBetter | None = Field(None, description="the member's own p_better (null without log-probabilities, or not judged)")
    swapped: bool | None = Field(None, description="the member judged the swapped order (null: not judged)")
    trials: list[PairTrial] = Field(default_factory=list)


class ComparePairResult(JudgedResult):
    winner: Side | None = Field(description="A or B only when every trial parsed and all agree")
    consistent: bool = Field(description="every trial parsed and all agree (one order: it parsed)")
    p_better: PBetter | None = Field(None, description="averaged over the orders judged (one order: not debiased); null without log-probabilities")
    swapped: bool = Field(True, description="the swapped order (BA) was judged")
    trials: list[PairTrial]
    goal: Goal
    template: Template
    # panels and the self-preference guard; null/empty for a single backend without response_models
    warnings: list[str] = Field(default_factory=list)
    self_preference: list[SelfPreference] | None = Field(None, description="with response_models: judges of an author's model family")
    panel: list[PairPanelMember] | None = Field(None, description="with backends: each member's judgment")
    panel_votes: PanelVotes | None = None


# ---- infer_instruction_reward (FLIP) ----------------------------------------------------------------------------
class FlipItem(BaseModel, defer_build=True):
    index: int = Field(description="0-based index of the response in the caller's list")
    inferred_instruction: str = Field(
        description="the instruction (with context: the system prompt) the model inferred from the response; "
        "when unparsed, the best extraction from its answer"
    )
    reward: float = Field(
        ge=0.0, le=1.0, description="similarity of inferred and given instruction; 0.0 when unparsed (see parse_ok)"
    )
    parse_ok: bool = Field(description="the answer held a complete inferred instruction (false: reward is 0.0, not a judgment)")
    echoes_instruction: bool = Field(
        description="the response opens by repeating the instruction (FLIP's known weak spot: the reward may be inflated)"
    )
    echo_score: float = Field(0.0, ge=0.0, le=1.0, description="partial-match score behind echoes_instruction (echo at >= 0.9)")
    reasoning: str = Field("", description="the model's explanation of its inference")
    reasked: bool = Field(False, description="the first answer was unparsed and the model was asked again")
    extraction_reward: float | None = Field(
        None, description="unparsed only: the similarity the best extraction would score (not used for reward or ranking)"
    )
    raw_answer: str | None = Field(None, description="unparsed only: the model's last answer (tail)")
    continued: bool = Field(False, description="the answer stopped at the token limit and the model was asked to continue it")
    truncated: bool = Field(False, description="the last answer still stopped at the token limit")
    unparsed_reason: Literal["truncated", "no_instruction"] | None = Field(
        None, description="unparsed only: truncated (cut off at the token limit) or no_instruction (finished without a complete instruction)"
    )


class FlipResult(JudgedResult):
    results: list[FlipItem] = Field(description="one per response, in order; reward 0.0 when unparsed")
    ranking: list[int] = Field(description="response indices, best first, unparsed last")
    best_index: int | None = Field(description="null when the top reward is tied or a response stayed unparsed")
    tied_best: list[int] = Field(default_factory=list)
    similarity: str
    prompt_variant: int = InferInstructionRewardArgs.default("prompt_variant")
    answer_order: AnswerOrder = InferInstructionRewardArgs.default("answer_order")
    context_mode: bool = Field(False, description="context was given: the system prompt was inferred")
    warnings: list[str] = Field(default_factory=list)
    unparsed: list[int] = Field(default_factory=list)
    echoes: list[int] = Field(default_factory=list, description="responses repeating the instruction: their reward may be inflated")


# ---- grade_score_options ----------------------------------------------------------------------------------------
class GradeTrial(BaseModel, defer_build=True):
    order: list[int] = Field(description="option indices in the order shown (the unrelated option, if any, is unrelated_index)")
    selected_position: int | None = Field(description="0-based shown position picked; null when unparsed")
    selected_index: int | None = Field(description="index of the picked option; null when unparsed")
    parse_ok: bool
    explanation: str = Field("", description="the judge's explanation (its raw answer when unparsed)")
    reasked: bool = Field(False, description="the first answer was unparsed and the model was asked again")


class GradePanelMember(PanelMember):
    winner_index: int | None = Field(None, description="the member's vote: its mode; null when its mode is tied (an abstention) or it did not judge")
    tied_indices: list[int] = Field(default_factory=list)
    grade_score: float | None = None
    llm_score: float | None = None
    choice_score: float | None = None
    trials: list[GradeTrial] = Field(default_factory=list)


class GradeScoreResult(JudgedResult):
    winner_index: int | None = Field(description="the most picked option; null when tied, nothing parsed, or the unrelated option")
    tied_indices: list[int] = Field(default_factory=list)
    trials: list[GradeTrial]
    position_counts: list[int] = Field(description="picks per shown position")
    option_counts: list[int] = Field(description="picks per option (the unrelated one at unrelated_index)")
    parsed_trials: int
    unparsed_trials: int
    llm_score: float | None = Field(description="entropy of the picked positions, normalised")
    choice_score: float | None = Field(description="the winner's share of parsed trials")
    grade_score: float | None = Field(description="harmonic mean of llm_score and choice_score; null when no trial parsed")
    unrelated_index: int | None
    unrelated_picked: int = 0
    unrelated_option: str | None = None
    unrelated_source: Literal["pool", "builtin"] | None = None
    prompt_variant: int = GradeScoreOptionsArgs.default("prompt_variant")
    warnings: list[str] = Field(default_factory=list)
    # panels and the self-preference guard; null for a single backend without response_models
    self_preference: list[SelfPreference] | None = Field(None, description="with response_models: judges of an author's model family")
    panel: list[GradePanelMember] | None = Field(None, description="with backends: each member's judgment")
    panel_votes: PanelVotes | None = None


# ---- lwe_judge --------------------------------------------------------------------------------------------------
class VanillaPair(BaseModel, defer_build=True):
    ab: Side | None = Field(description="vanilla verdict with the caller's A shown first, in the caller's A/B; null when unparsed")
    ba: Side | None = Field(description="vanilla verdict with the order swapped, mapped back to the caller's A/B; null when unparsed")
    consistent: bool = Field(False, description="both parsed and agree")


class LweResult(JudgedResult):
    winner: Side | None = Field(description="the vanilla verdict when consistent, else the meta-prompt path's; null when unparsed")
    path: Literal["vanilla_consistent", "meta_prompt"]
    vanilla: VanillaPair | None = Field(description="null when selective is false")
    orders_disagreed: bool | None = Field(
        None, description="the two orders named different answers: the meta path's one order decided, so position bias may have"
    )
    eval_prompt: str | None = Field(description="meta path: the case prompt written from the meta-prompt")
    judgment: str | None = None
    parse_ok: bool = True
    reasked: bool = False
    feedback: str | None = Field(description="meta path: the judge's self-feedback, now buffered")
    feedback_parse_ok: bool | None = None
    meta_prompt_version: int
    refined: bool = Field(description="this call refined the meta-prompt")
    new_meta_prompt_version: int | None
    new_meta_prompt_versions: list[int] = Field(default_factory=list)
    condensed: bool = False
    pending_feedback: int
    batch_size: int = LweJudgeArgs.default("batch_size")
    session: str
    warnings: list[str] = Field(default_factory=list)


class MetaPromptVersion(BaseModel, defer_build=True):
    version: int
    parent: int | None = Field(description="the version that was current when this one was made (null for the initial one)")
    reason: Literal["initial", "refine", "condense", "reset", "rollback"]
    created_at: float = Field(description="Unix time")
    chars: int
    restored_from: int | None = Field(None, description="rollback: the version whose text was restored")
    feedback_items: int = Field(0, description="refine: feedback items this version was refined from")


class LweSessionResult(BaseModel, defer_build=True):
    session: str
    action: Action
    current_version: int
    meta_prompt: str
    batch_size: int
    pending_feedback: int
    label_feedback: int = Field(0, description="feedback items made from human labels (record_label), buffered or used")
    learn_from_labels: bool = Field(True, description="the session takes labels as feedback (set when it was created)")
    versions: list[MetaPromptVersion]
    discarded_feedback: int = Field(0, description="reset: buffered feedback items dropped")


# ---- the report's shape (also the judge_stats tool's outputSchema) -------------------------------------------
Ci = list[float] | str | None  # [low, high]; a text when the sample is too small to say; null when the figure is undefined


class Rate(BaseModel, defer_build=True):
    rate: float | None = Field(description="count / of, rounded to 4 places; null when `of` is 0")
    count: int
    of: int
    ci: Ci = Field(None, description="95% Wilson interval [low, high] (stats/intervals.py)")


class PositionBias(Rate):
    unbiased: float | None = Field(description="the rate of a judge without position bias: 0.5 for pairs, mean 1/n for grade_score_options")


class LabelCalibration(BaseModel, defer_build=True):
    n: int = Field(0, description="labelled verdicts with an A or B label whose verdict carries p_better")
    of: int = Field(0, description="labelled verdicts with an A or B label")
    ece: float | None = Field(None, description="expected calibration error of p_better against the labels (stats/calibration.py); null when n is 0")
    brier: float | None = Field(None, description="mean (1 - p_better of the labelled answer)^2; null when n is 0")
    ci: dict[str, Ci] = Field(default_factory=dict, description="ece, brier: bootstrap 95% intervals over the n labels")


class ScoreAgreement(BaseModel, defer_build=True):
    n: int = Field(description="labelled score_response verdicts with an overall score")
    mae: float | None = Field(description="mean absolute error of overall against the labels")
    spearman: float | None = Field(description="Spearman's rho (null with under 2 labels or a constant side)")
    kendall: float | None = Field(description="Kendall's tau-b (null likewise)")
    ci: dict[str, Ci] = Field(default_factory=dict, description="mae, spearman, kendall: bootstrap 95% intervals over the labels")


class LabelLength(BaseModel, defer_build=True):
    longer_picked: Rate = Field(description="the verdict names the longer answer")
    longer_labels: Rate = Field(description="the label does")
    bias: float | None = Field(description="longer_picked minus longer_labels; null when `of` is 0")
    ci: Ci = Field(None, description="bias: bootstrap 95% interval over the `of` verdicts")


class Agreement(BaseModel, defer_build=True):
    """How the group's verdicts agree with human labels (record_label); null figures when none is labelled."""

    labelled: int = Field(0, description="verdicts with a label")
    accuracy: Rate = Field(default_factory=lambda: Rate(rate=None, count=0, of=0), description="verdicts whose answer is the label")
    kappa: float | None = Field(
        None, description="Cohen's kappa between the verdicts' answers and the labels (a verdict without a single answer is 'tie' / "
        "'none'); null when nothing is labelled or chance agreement is total"
    )
    kappa_ci: Ci = Field(None, description="bootstrap 95% interval of kappa over the labels")
    calibration: LabelCalibration = Field(default_factory=LabelCalibration, description="p_better against A/B labels (compare_pair)")
    scores: ScoreAgreement | None = Field(None, description="score_response: overall against the score labels")
    length: LabelLength | None = Field(None, description="pairwise: of decided verdicts with an A/B label, answers of unequal length")


class LabelResult(BaseModel, defer_build=True):
    verdict_id: str
    tool: str
    label: str = Field(description='as stored: "A", "B", "tie", or an index')
    verdict: str = Field(description='the verdict\'s answer in the same terms ("tie": no winner; "none": no single pick)')
    agrees: bool
    replaced: bool = Field(description="an earlier label was replaced")
    label_feedback: bool = Field(False, description="lwe_judge: the label joined the session's feedback buffer")


class Mean(BaseModel, defer_build=True):
    mean: float | None = Field(description="null when `of` is 0")
    of: int = Field(description="verdicts whose usage held the value")


class PromptCacheStats(BaseModel, defer_build=True):
    """Prompt tokens per verdict, those read from / written to the provider's prompt cache (means over the verdicts
    that reported each), and the billed-equivalent input per verdict: uncached + read_price x cached + write_price x
    written (Anthropic 0.1 and 1.25; OpenAI-compatible: JUDGE_MCP_CACHED_INPUT_PRICE and 1)."""

    prompt_tokens: Mean
    cached_prompt_tokens: Mean
    cache_write_tokens: Mean
    billed_input: float | None
    read_price: float
    write_price: float


class GroupStats(BaseModel, defer_build=True):
    backend: str
    model: str
    tool: str
    inputs: str = Field(
        "text", description="what callers brought besides the judged texts: 'text' (nothing), or criteria, reference, images joined by '+'"
    )
    verdicts: int
    position_bias: PositionBias = Field(description="parsed pairwise trials naming the first-shown answer (grade_score_options: picking the first position)")
    order_inconsistency: Rate = Field(description="verdicts with both orders parsed whose orders disagree (compare_pair, lwe_judge)")
    parse_failures: Rate = Field(description="answers left unparsed, of all answers (trials, FLIP responses, LWE verdicts)")
    reasks: Rate = Field(description="answers that needed the re-ask, of answers whose re-ask is recorded")
    ties: Rate = Field(description="no winner (compare_pair, lwe_judge), tied top reward (FLIP), tied mode (grade_score_options)")
    length_preference: Rate = Field(description="decided pairwise verdicts won by the longer answer, equal lengths left out")
    calls: Mean
    cached_calls: Mean
    latency_ms: Mean
    prompt_cache: PromptCacheStats | None = None
    reasoning_tokens: Mean = Field(default_factory=lambda: Mean(mean=None, of=0), description="hidden reasoning per verdict, of those reporting it")
    agreement: Agreement = Field(default_factory=Agreement, description="agreement with human labels (record_label)")


class Window(BaseModel, defer_build=True):
    verdicts: int = Field(description="verdict-log rows in the window")
    oldest_at: float | None = Field(description="Unix time of the window's oldest verdict")
    newest_at: float | None = Field(description="Unix time of the window's newest verdict")
    skipped: int = Field(0, description="rows whose output could not be read (not counted anywhere else)")
    groups: list[GroupStats] = Field(description="one entry per (backend, model, tool, inputs), sorted")


class VerdictLogHealth(BaseModel, defer_build=True):
    """How the verdict log kept up with the answers since the server started (judge_stats' `verdict_log`)."""

    pending: int = Field(0, description="verdict rows answered but not yet written (their writes are being retried)")
    written_late: int = Field(0, description="rows written after their answer had gone out (a held lock, a failed first attempt)")
    lost: int = Field(0, description="rows given up on after every attempt: answered, but not in the log")
    last_error: str | None = Field(None, description="why the last late or lost row's write failed, if one did")


class RankedCandidate(BaseModel, defer_build=True):
    name: str
    strength: float | None = Field(description="Bradley-Terry rating on Arena-Hard-Auto's scale (400 per factor of 10 in odds, mean 1000)")
    ci: Ci = Field(description="bootstrap 95% interval of the strength")
    battles: int
    wins: int
    losses: int
    ties: int = Field(description="verdicts whose two orders disagreed")
    consistent: float = Field(description="share of its verdicts whose two orders agreed")


class StatsReport(BaseModel, defer_build=True):
    last_n: int
    all_time: Window
    last: Window = Field(description="the newest last_n verdicts")
    ranking: list[RankedCandidate] = Field(
        default_factory=list, description="named `candidates`, best first"
    )
    verdict_log: VerdictLogHealth | None = Field(None, description="this server's rows written late, pending or lost")


# ---- score_response (its arguments: rubric.py) --------------------------------------------------------------------------------------------------
class CriterionScore(BaseModel):
    criterion: str = Field(description="the criterion's name")
    weight: float
    score: float | None = Field(description="mean of the parsed samples (each probability-weighted where the backend gives token "
                                "probabilities); null when none parsed")
    samples: list[float | None] = Field(description="each sample's score; null: unparsed after one re-ask")
    stdev: float | None = Field(description="sample standard deviation of the parsed samples; null with fewer than 2")
    distribution: list[float] | None = Field(description="probability of each scale point low..high, averaged over the samples; null "
                                             "without token probabilities")
    rationale: str = Field(description="the judge's explanation (of the first parsed sample; its raw answer when none parsed)")
    parse_ok: bool = Field(description="every sample parsed")
    reasked: int = Field(0, description="samples whose first answer was unparsed and re-asked")


class ScorePanelMember(PanelMember):
    overall: float | None = None
    scores: list[CriterionScore] = Field(default_factory=list)


class ScoreResponseResult(JudgedResult):
    scores: list[CriterionScore] = Field(description="one per criterion, in the caller's order")
    overall: float | None = Field(description="weighted mean of the criteria's scores; null when any criterion is unparsed")
    unstable: list[str] = Field(description="criteria whose samples span more than 20% of the scale")
    scale: list[int]
    samples: int
    temperature: float
    warnings: list[str] = Field(default_factory=list, description="signals worth a look: unparsed criteria, a same-family judge, a failed member")
    self_preference: list[SelfPreference] | None = Field(None, description="with response_models: each judge of the response author's family")
    panel: list[ScorePanelMember] | None = Field(None, description="with backends: each member's scores; the scores above are their means")
