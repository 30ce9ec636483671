"""The tools' output models. Each is the `outputSchema` a client sees, so field names follow CONTRACT.md."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Side = Literal["A", "B"]


class UsageOut(BaseModel):
    calls: int = Field(0, description="requests actually sent to a backend (retries not counted)")
    cached_calls: int = Field(0, description="requests answered from the call cache or a shared in-flight call")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = Field(0.0, description="wall time of the judgment, in milliseconds")


class _Judged(BaseModel):
    model: str = Field(description="backend kind / model id")
    usage: UsageOut


# ---- compare_pair -----------------------------------------------------------------------------------------------
class PairTrial(BaseModel):
    order: Literal["AB", "BA"] = Field(description="AB: the caller's A was shown first; BA: swapped")
    better: Side | None = Field(description="the better answer in the caller's A/B order; null when unparsed")
    label: str | None = Field(description="the model's final label as printed for the order it saw, e.g. [[B>A]]")
    rationale: str = ""
    parse_ok: bool
    reasked: bool = Field(False, description="the first answer was unparsed and the model was asked again")


class ComparePairResult(_Judged):
    winner: Side | None = Field(description="A or B only when every trial parsed and all agree")
    consistent: bool
    trials: list[PairTrial]
    goal: Literal["worse", "better"]
    template: Literal["sop", "cot", "direct"]


# ---- infer_instruction_reward (FLIP) ----------------------------------------------------------------------------
class FlipItem(BaseModel):
    index: int
    inferred_instruction: str
    reward: float = Field(ge=0.0, le=1.0)
    parse_ok: bool
    echoes_instruction: bool


class FlipResult(_Judged):
    results: list[FlipItem]
    ranking: list[int] = Field(description="response indices, best first (ties keep the lower index first)")
    best_index: int | None = Field(description="index of the highest reward; null when the top reward is tied")
    tied_best: list[int] = Field(default_factory=list, description="indices sharing the top reward when tied")
    similarity: str


# ---- grade_score_options ----------------------------------------------------------------------------------------
class GradeTrial(BaseModel):
    order: list[int] = Field(description="caller's option indices in the order shown")
    selected_position: int | None = Field(description="0-based shown position picked; null when unparsed")
    selected_index: int | None = Field(description="caller's index of the picked option; null when unparsed")
    parse_ok: bool
    explanation: str = ""


class GradeScoreResult(_Judged):
    winner_index: int | None = Field(description="mode of the chosen options (caller's indices); lowest index on a tie")
    tied_indices: list[int] = Field(default_factory=list, description="all indices sharing the mode when tied")
    trials: list[GradeTrial]
    position_counts: list[int]
    option_counts: list[int]
    parsed_trials: int
    unparsed_trials: int
    llm_score: float | None
    choice_score: float | None
    grade_score: float | None
    unrelated_index: int | None
    unrelated_picked: int = Field(0, description="how many trials picked the unrelated option")


# ---- lwe_judge --------------------------------------------------------------------------------------------------
class VanillaPair(BaseModel):
    ab: Side | None
    ba: Side | None


class LweResult(_Judged):
    winner: Side | None
    path: Literal["vanilla_consistent", "meta_prompt"]
    vanilla: VanillaPair | None
    eval_prompt: str | None
    feedback: str | None
    meta_prompt_version: int
    refined: bool
    new_meta_prompt_version: int | None
    pending_feedback: int
    session: str


class MetaPromptVersion(BaseModel):
    version: int
    parent: int | None
    reason: Literal["initial", "refine", "condense", "reset", "rollback"]
    created_at: float
    chars: int


class LweSessionResult(BaseModel):
    session: str
    action: Literal["show", "reset", "rollback"]
    current_version: int
    meta_prompt: str
    batch_size: int
    pending_feedback: int
    versions: list[MetaPromptVersion]
