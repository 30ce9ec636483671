"""score_response's argument and result models (the contract (docs/tools.md) "score_response"): one response against 1-10 weighted
criteria on an integer scale. `instruction` takes a string or a conversation, `response` a string or a trajectory
(contract/messages.py), as on the other judging tools.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from judge_mcp.contract.fields import JUDGED, MAX_CRITERIA_CHARS, ModelName, _fail, _text, blank_is_absent
from judge_mcp.contract.args import PanelArgs, UserInputsArgs
from judge_mcp.contract.messages import AnswerLike, PromptLike
from judge_mcp.contract.results import JudgedResult, _PanelMember, SelfPreference

InstructionText = Annotated[PromptLike, JUDGED]  # a string or a conversation
ResponseText = Annotated[AnswerLike, JUDGED]  # a string or a trajectory

MAX_CRITERIA, MAX_SAMPLES = 10, 10
MIN_SCALE, MAX_SCALE = 0, 100  # the ends a scale may have
MAX_NAME_CHARS = 100
DEFAULT_SCALE = (1, 10)  # the FLIP paper's pointwise rating
SAMPLE_TEMPERATURE = 1.0  # samples > 1 without a temperature
UNSTABLE_SPAN = 0.2  # a criterion whose samples span more than this share of the scale is unstable
SINGLE = "criterion"  # the name of a criterion given as one string


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(_text)]
    description: Annotated[Annotated[str, Field(min_length=1, max_length=MAX_CRITERIA_CHARS)] | None, BeforeValidator(blank_is_absent)] = None
    weight: Annotated[float, Field(gt=0, le=100)] = 1.0

    def text(self) -> str:
        """What the judge is shown: the name, and the description when given (a criterion given as text: the text)."""
        if not self.description or not self.description.strip():
            return self.name
        return self.description if self.name == SINGLE else f"{self.name}: {self.description}"


def _one_criterion(value: object) -> object:
    """A criterion given as text: the one criterion named "criterion" (its text shown to the judge as it is)."""
    if not isinstance(value, str):
        return value
    if not value.strip() or "\x00" in value:
        raise _fail("is empty" if not value.strip() else "contains a NUL character")
    if len(value) > MAX_CRITERIA_CHARS:
        raise _fail(f"is {len(value):,} characters; the limit is {MAX_CRITERIA_CHARS:,}")
    return [{"name": SINGLE, "description": value}]


class ScoreResponseArgs(UserInputsArgs, PanelArgs):
    tool: ClassVar[str] = "score_response"
    ANSWERS_SAID: ClassVar[str] = "the response"

    instruction: Annotated[InstructionText, Field(description="the instruction or question the response answers")]
    response: Annotated[ResponseText, Field(description="the response to score")]
    criteria: Annotated[  # type: ignore[assignment]  # a rubric of named criteria here, not one text
        list[Criterion],
        BeforeValidator(_one_criterion, json_schema_input_type=Annotated[str, Field(min_length=1, max_length=MAX_CRITERIA_CHARS)] | list[Criterion]),
        Field(min_length=1, max_length=MAX_CRITERIA,
              description="one criterion as text, or a list, e.g. [{\"name\": \"correctness\", \"weight\": 2}, {\"name\": \"concision\"}]"),
    ]
    scale: Annotated[
        list[int], Field(min_length=2, max_length=2, description=f"[low, high] integers, {MIN_SCALE}..{MAX_SCALE} (default [1, 10], FLIP's pointwise rating)")
    ] = list(DEFAULT_SCALE)
    samples: Annotated[int, Field(ge=1, le=MAX_SAMPLES, description="independent samples per criterion (>1: at `temperature`)")] = 1
    temperature: Annotated[
        float | None, Field(ge=0.0, le=2.0, description=f"sampling temperature (default {SAMPLE_TEMPERATURE:g} when samples > 1, else 0)")
    ] = None
    response_models: Annotated[
        list[ModelName] | None, Field(min_length=1, max_length=1, description="the model that wrote the response: a judge of its family gets a warning")
    ] = None

    def answer_names(self) -> list[str]:
        return ["response"]

    def rubric(self) -> list[Criterion]:
        """The criteria, in the caller's order (a string was made the one criterion named "criterion")."""
        return list(self.criteria)

    def sampling_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return SAMPLE_TEMPERATURE if self.samples > 1 else 0.0

    def user_inputs(self) -> dict[str, str]:
        return {"reference": self.reference} if self.reference is not None else {}

    @model_validator(mode="after")
    def _score_checks(self) -> Self:
        low, high = self.scale
        if not MIN_SCALE <= low < high <= MAX_SCALE:
            raise PydanticCustomError("call", f"'scale' must be [low, high] with {MIN_SCALE} <= low < high <= {MAX_SCALE}, got {self.scale}")
        names = [c.name for c in self.rubric()]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise PydanticCustomError("call", f"'criteria' must name each criterion once; repeated: {', '.join(repeated)}")
        if self.samples > 1 and self.temperature == 0:
            raise PydanticCustomError("call", "samples > 1 needs a temperature above 0 (at 0 every sample would be the same answer)")
        return self

    def unjudged_chars(self) -> int:
        """The rubric's text, which the judge reads too (ToolArgs._call_size counts the JUDGED arguments)."""
        return sum(len(c.text()) for c in self.rubric())


# ---- the result --------------------------------------------------------------------------------------------------
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


class ScorePanelMember(_PanelMember):
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
