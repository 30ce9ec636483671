"""score_response's argument models (the contract (docs/tools.md) "score_response"): one response against 1-10 weighted
criteria on an integer scale; its result models are in results.py with every tool's. `instruction` takes a string
or a conversation, `response` a string or a trajectory (contract/messages.py), as on the other judging tools.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from judge_mcp.contract.fields import JUDGED, MAX_CRITERIA_CHARS, ModelName, argument_error, checked_text, blank_is_absent
from judge_mcp.contract.args import PanelArgs, UserInputsArgs
from judge_mcp.contract.messages import AnswerLike, PromptLike

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

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(checked_text)]
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
        raise argument_error("is empty" if not value.strip() else "contains a NUL character")
    if len(value) > MAX_CRITERIA_CHARS:
        raise argument_error(f"is {len(value):,} characters; the limit is {MAX_CRITERIA_CHARS:,}")
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
