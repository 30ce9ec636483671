"""The tools' arguments: one pydantic model per tool, the one place where an argument and its default are written.

Each model is at once
- the tool's MCP input schema: limits, enums and descriptions, `additionalProperties: false` (tools.py);
- what the tool's method receives (`pairwise.compare_pair(judge, ComparePairArgs)`), what a panel's combine reads
  (methods/panel.py), what the verdict log keeps (`logged`) and what the bench builds (judge_mcp/bench/methods.py);
- what record_label receives (`RecordLabelArgs`: a verdict's id and its correct answer);
- what judge_stats reads to know which tools judge two answers (`PairArgs.ANSWERS`).

Types are strict, as the schema says: a JSON boolean is not a number (`max_tokens: true` is refused, not read as
1), a number is not a boolean (`swap: 0`), a string is neither (over MCP, tools.py first decodes a value a client
sent as JSON text inside a string, "4096" or "true", for the arguments that take no free text). Checks a JSON
Schema cannot state are validators here: NUL characters and blank text, the size of a whole call, repeated
options, swap_margin without swap "auto", `backend` with `backends`, one author per answer, a rollback's version.
A failed check is an InputError whose message validation.py writes: one sentence per problem, naming the argument.

Adding an argument is one field on one model, or on a base shared by several tools (`PairArgs`: the prompt and
two answers of compare_pair and lwe_judge; `PanelArgs`: the panel of compare_pair and grade_score_options), plus
the method that reads it. A field the judge reads as text is marked `JUDGED`: it counts towards the call's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judge_mcp.contract import validation as arg_errors
from judge_mcp.contract import images as imagelib
from judge_mcp.contract import messages
from judge_mcp.contract.messages import AnswerLike, CONVERSATION_DOC, PromptLike, TRAJECTORY_DOC
from judge_mcp.contract.fields import (
    DEFAULT_LAST, MAX_LAST, MAX_MEMBERS, MAX_OPTIONS, MIN_MEMBERS, MIN_OPTIONS, argument_error, IMAGE_FORMAT, judged_fields,
    judges_last, model_schema, Action, AnswerOrder, DEFAULT_SWAP_MARGIN, FlipVariant, Goal, GradeVariant, ImageList,
    InputError, Instruction, JUDGED, LabelValue, MAX_BACKEND_CHARS, OptionalNote, VERDICT_ID_PATTERN,
    MAX_BATCH_SIZE, MAX_RESPONSES, MAX_TOKENS_LIMIT, MAX_TOTAL_CHARS,
    MAX_VERSION, ModelName, OptionalCriteria, OptionalReference, PAIR_MAX_TOKENS, Session, Similarity, Template,
)


# ---- the models ----------------------------------------------------------------------------------------------------
class ToolArgs(BaseModel):
    """One tool's (or one bench method's) arguments. `tool` names it in messages and in the method table."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, json_schema_extra=judges_last, defer_build=True)
    tool: ClassVar[str] = ""

    @classmethod
    def parse(cls, data: Mapping[str, Any], image_paths: imagelib.PathPolicy = imagelib.NO_PATHS) -> Self:
        """The model from a mapping of arguments, or an InputError naming each problem. `image_paths`: where an image
        argument may be a file path (over stdio only; none by default)."""
        if not isinstance(data, Mapping):
            raise InputError(f"{cls.tool} takes named arguments (an object), got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data), context={"image_paths": image_paths})
        except ValidationError as exc:
            raise InputError(arg_errors.describe(cls.tool, exc, cls.input_schema())) from None

    @classmethod
    def of(cls, args: Self | None, fields: Mapping[str, Any]) -> Self:
        """What a method received: its model, or the model's fields as keywords (tests, scripts), parsed."""
        if args is None:
            return cls.parse(fields)
        if fields or not isinstance(args, cls):
            raise TypeError(f"give a {cls.__name__} or its fields as keywords, not both (got {type(args).__name__} and {sorted(fields)})")
        return args

    @classmethod
    def default(cls, name: str) -> Any:
        return cls.model_fields[name].default

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The input schema (built once per model; a shared object: callers must not change it)."""
        return model_schema(cls)

    def logged(self) -> dict[str, Any]:
        """The arguments as the verdict log keeps them: what was given or defaulted, without `backend` (a column of
        its own) and without absent optional ones."""
        data = self.model_dump(exclude={"backend"}, exclude_none=True)
        for name in judged_fields(type(self)):  # a conversation's images: described, never their bytes
            if isinstance(data.get(name), list):
                data[name] = messages.logged(data[name])
        return data

    def unjudged_chars(self) -> int:
        """Text the judge reads from arguments not marked JUDGED (a model that is not text: score_response's rubric)."""
        return 0

    @model_validator(mode="after")
    def _call_size(self) -> Self:
        size = self.unjudged_chars()
        for name in judged_fields(type(self)):
            value = getattr(self, name)
            size += sum(messages.size(v) for v in value) if isinstance(value, list) and not messages.is_messages(value) else messages.size(value)
        if size > MAX_TOTAL_CHARS:
            raise PydanticCustomError("call", f"the inputs add up to {size:,} characters; the limit for one call is {MAX_TOTAL_CHARS:,}")
        return self


class JudgingArgs(ToolArgs):
    """A judging method's arguments: which backend judges."""

    backend: Annotated[
        str | None, Field(max_length=MAX_BACKEND_CHARS, description="a backend of the JUDGE_MCP_CONFIG file; default: the environment's")
    ] = None

    IMAGE_FIELDS: ClassVar[tuple[str, ...]] = ()  # the image arguments (UserInputsArgs); images inside messages count too

    @model_validator(mode="after")
    def _image_count(self) -> Self:
        uris = []
        for name in self.IMAGE_FIELDS:
            for item in getattr(self, name) or ():
                uris += [item] if isinstance(item, str) else list(item or ())  # option_images holds a list per option
        uris += messages.image_uris(getattr(self, name) for name in judged_fields(type(self)))  # images inside messages
        count, size = len(uris), sum(imagelib.decode(uri).size for uri in uris)
        if size > imagelib.MAX_CALL_IMAGE_BYTES:
            raise PydanticCustomError(
                "call", f"the call's images add up to {size:,} bytes; the limit for one call is {imagelib.MAX_CALL_IMAGE_BYTES:,}"
            )
        if count > imagelib.MAX_CALL_IMAGES:
            raise PydanticCustomError("call", f"the call brings {count} images; the limit for one call is {imagelib.MAX_CALL_IMAGES}")
        return self


class UserInputsArgs(JudgingArgs):
    """What a caller brings besides the answers (compare_pair, grade_score_options, lwe_judge): a rubric and a
    reference answer. Absent, the prompts are the papers'; present, they are fenced blocks in the user message."""

    criteria: Annotated[
        OptionalCriteria, JUDGED,
        Field(description='your rubric, e.g. "Code review: correctness first, then readability; ignore style nits"'),
    ] = None
    reference: Annotated[
        OptionalReference, JUDGED,
        Field(description='a reference answer, e.g. "5050" for the sum of 1..100'),
    ] = None

    images: Annotated[
        ImageList,
        Field(description="images the prompt shows: " + IMAGE_FORMAT),
    ] = None

    IMAGE_FIELDS: ClassVar[tuple[str, ...]] = ("images",)

    def user_inputs(self) -> dict[str, str]:
        """The criteria and reference given (absent ones left out)."""
        return {k: v for k, v in (("criteria", self.criteria), ("reference", self.reference)) if v is not None}

    def image_list(self, name: str) -> tuple[imagelib.Image, ...]:
        """An image argument's images, decoded (none when absent)."""
        return tuple(imagelib.decode(uri) for uri in getattr(self, name) or ())

    def logged(self) -> dict[str, Any]:
        """As ToolArgs.logged, with every image as its SHA-256, media type and size: never its bytes."""
        data = super().logged()
        for name in self.IMAGE_FIELDS:
            value = data.get(name)
            if value is not None:
                data[name] = [_described(v) for v in value]
        return data


def _described(value: Any) -> Any:
    """An image URI (or a list of them) as the log keeps it."""
    if value is None or isinstance(value, list):
        return value and [_described(v) for v in value]
    return imagelib.decode(value).described()


class PairImagesArgs(UserInputsArgs):
    """Images that belong to an answer (compare_pair, lwe_judge): they move with it when the order is swapped."""

    IMAGE_FIELDS: ClassVar[tuple[str, ...]] = ("images", "response_a_images", "response_b_images")

    response_a_images: Annotated[
        ImageList, Field(description="images that are part of answer A (e.g. a screenshot), as `images`")
    ] = None
    response_b_images: Annotated[
        ImageList, Field(description="images that are part of answer B, as `images`")
    ] = None


class PairArgs(JudgingArgs):
    """A prompt and two answers to it (compare_pair, lwe_judge, the bench's Arena-Hard baseline)."""

    ANSWERS: ClassVar[tuple[str, str]] = ("response_a", "response_b")

    prompt: Annotated[PromptLike, JUDGED, Field(description="the user prompt both answers respond to: a string, " + CONVERSATION_DOC)]
    response_a: Annotated[AnswerLike, JUDGED, Field(description="answer A: a string, " + TRAJECTORY_DOC)]
    response_b: Annotated[AnswerLike, JUDGED, Field(description="answer B: a string or a trajectory")]
    candidates: Annotated[
        list[ModelName] | None,
        Field(min_length=2, max_length=2, description="A's and B's authors (not shown to the judge)"),
    ] = None

    @model_validator(mode="after")
    def _two_candidates(self) -> Self:
        if self.candidates is not None and self.candidates[0] == self.candidates[1]:
            raise PydanticCustomError("call", f"'candidates' names one candidate twice ({self.candidates[0]!r}); give the two answers' authors")
        return self


class PanelArgs(JudgingArgs):
    """A judge panel and the self-preference guard (compare_pair, grade_score_options); each tool adds its own
    `response_models` (one model per answer) and `answer_names`."""

    ANSWERS_SAID: ClassVar[str] = ""  # the answers, as the count error names them

    backends: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_BACKEND_CHARS)]] | None,
        Field(
            min_length=MIN_MEMBERS,
            max_length=MAX_MEMBERS,
            json_schema_extra={"uniqueItems": True},
            description="a judge panel: distinct backend names ('default': the environment's); the verdict is the majority. "
            "Not with `backend`",
        ),
    ] = None
    response_models: list[str] | None = None
    exclude_same_family: Annotated[
        bool, Field(description="leave out judges of an author's model family (needs response_models)")
    ] = False

    def answer_names(self) -> list[str]:
        """What each answer is called in a self-preference warning, one per model of `response_models`."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _panel(self) -> Self:
        if self.backends is not None:
            if self.backend is not None:
                raise PydanticCustomError("call", "give either 'backend' (one judge) or 'backends' (a panel), not both")
            repeated = sorted({b for b in self.backends if self.backends.count(b) > 1})
            if repeated:
                raise PydanticCustomError("call", f"'backends' must name each backend once; repeated: {', '.join(repeated)}")
        if self.response_models is None:
            if self.exclude_same_family:
                raise PydanticCustomError("call", "'exclude_same_family' needs 'response_models' (which model wrote each answer)")
            return self
        answers = len(self.answer_names())
        if len(self.response_models) != answers:
            raise PydanticCustomError(
                "call", f"'response_models' must name one model per answer: {answers} ({self.ANSWERS_SAID}), got {len(self.response_models)}"
            )
        return self


class ComparePairArgs(PairArgs, PairImagesArgs, PanelArgs):
    tool: ClassVar[str] = "compare_pair"
    ANSWERS_SAID: ClassVar[str] = "response_a, response_b"

    goal: Annotated[Goal, Field(description="ask which answer is worse (GRP) or better")] = "worse"
    template: Annotated[Template, Field(description="sop: judge answers first (Arena-Hard); cot; direct")] = "sop"
    swap: Annotated[
        bool | Literal["auto"],
        Field(description='true: both orders, a winner only when they agree; false: one order; "auto": the second order '
              "only when the first is unsure (swap_margin)"),
    ] = True
    swap_margin: Annotated[
        float | None,
        Field(ge=0.0, le=1.0, description=f'swap "auto": run the second order when |p_A - p_B| is under this (default {DEFAULT_SWAP_MARGIN:g})'),
    ] = None
    max_tokens: Annotated[
        int | None,
        Field(ge=1, le=MAX_TOKENS_LIMIT,
              description=f"answer budget in tokens (default {PAIR_MAX_TOKENS})"),
    ] = None
    response_models: Annotated[
        list[ModelName] | None,
        Field(min_length=2, max_length=2, description='who wrote response_a and response_b, e.g. ["gpt-4o", "claude-sonnet-4-5"]; '
              "same-family judges are flagged"),
    ] = None

    def answer_names(self) -> list[str]:
        return list(self.ANSWERS)

    def margin(self) -> float:
        """The |p_A - p_B| at which swap "auto" trusts the first order."""
        return DEFAULT_SWAP_MARGIN if self.swap_margin is None else self.swap_margin

    @model_validator(mode="after")
    def _margin_needs_auto(self) -> Self:
        if self.swap_margin is not None and self.swap != "auto":
            raise PydanticCustomError("call", f"'swap_margin' applies only with swap \"auto\" (swap is {str(self.swap).lower()})")
        return self


class InferInstructionRewardArgs(JudgingArgs):
    tool: ClassVar[str] = "infer_instruction_reward"

    instruction: Annotated[Instruction, Field(description="the instruction (with context: the system prompt) the responses follow")]
    responses: Annotated[
        list[AnswerLike], JUDGED, Field(min_length=1, max_length=MAX_RESPONSES, description="candidate responses, each a string or a trajectory")
    ]
    context: Annotated[
        messages.OptionalPromptLike, JUDGED, Field(description="a user prompt or conversation; then `instruction` is a system prompt")
    ] = None
    similarity: Annotated[
        Similarity, Field(description="f1: word-level F1; rouge_l: ROUGE-L F-measure; token_sort: rapidfuzz token_sort_ratio")
    ] = "f1"
    prompt_variant: Annotated[FlipVariant, Field(description="the FLIP paper's inference prompt")] = 1
    answer_order: Annotated[
        AnswerOrder,
        Field(description="reasoning_first: the paper's; instruction_first: for small models that loop in the explanation"),
    ] = "reasoning_first"


class GradeScoreOptionsArgs(UserInputsArgs, PanelArgs):
    tool: ClassVar[str] = "grade_score_options"
    ANSWERS_SAID: ClassVar[str] = "one per option"

    instruction: Annotated[PromptLike, JUDGED, Field(description="the question or task the options answer: a string or a conversation")]
    options: Annotated[
        list[AnswerLike], JUDGED, Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS, description="candidate options, each a string or a trajectory"),
    ]
    prompt_variant: Annotated[GradeVariant, Field(description="the Grade Score paper's judge prompt A.1-A.4")] = 2
    unrelated_option: Annotated[bool, Field(description="add an option answering another instruction, as a sanity check")] = False
    response_models: Annotated[
        list[ModelName] | None,
        Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS,
              description="who wrote each option, one per option; same-family judges are flagged"),
    ] = None

    option_images: Annotated[
        list[ImageList] | None,
        Field(max_length=MAX_OPTIONS, description="images that are part of each option, one list per option (null or [] for none), "
              "as `images`"),
    ] = None

    IMAGE_FIELDS: ClassVar[tuple[str, ...]] = ("images", "option_images")

    def answer_names(self) -> list[str]:
        return [f"options[{i}]" for i in range(len(self.options))]

    @model_validator(mode="after")
    def _one_list_per_option(self) -> Self:
        if self.option_images is not None and len(self.option_images) != len(self.options):
            raise PydanticCustomError(
                "call", f"'option_images' must hold one list per option: {len(self.options)}, got {len(self.option_images)}"
            )
        return self

    @field_validator("options")
    @classmethod
    def _distinct(cls, options: list[Any]) -> list[Any]:
        seen: dict[tuple[str, str], int] = {}
        for i, option in enumerate(options):
            key = messages.identity(option)
            if key in seen:
                raise argument_error(f"must not repeat an option: options[{i}] is identical to options[{seen[key]}]")
            seen[key] = i
        return options


class LweJudgeArgs(PairArgs, PairImagesArgs):
    tool: ClassVar[str] = "lwe_judge"

    session: Session = "default"
    selective: Annotated[bool, Field(description="only cases judged inconsistently in both orders take the meta-prompt path")] = True
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE, description="feedback items per refinement (used when the session is created)")] = 4
    learn_from_labels: Annotated[
        bool, Field(description="record_label on this session's verdicts feeds its refinement (used when the session is created)")
    ] = True


class LweSessionShowArgs(ToolArgs):
    tool: ClassVar[str] = "lwe_session_show"

    session: Session = "default"


class LweSessionArgs(ToolArgs):
    tool: ClassVar[str] = "lwe_session"

    action: Annotated[Action, Field(description="show, reset to the initial meta-prompt, or roll back to `version`")] = "show"
    session: Session = "default"
    version: Annotated[int | None, Field(ge=1, le=MAX_VERSION, description="for rollback: the version to restore")] = None

    @model_validator(mode="after")
    def _version_for_rollback(self) -> Self:
        if self.action == "rollback" and self.version is None:
            raise PydanticCustomError("call", "'version' is required for action 'rollback'")
        if self.action != "rollback" and self.version is not None:
            raise PydanticCustomError("call", "'version' is only used with action 'rollback'")
        return self


class JudgeStatsArgs(ToolArgs):
    tool: ClassVar[str] = "judge_stats"

    last: Annotated[
        int, Field(ge=1, le=MAX_LAST, description="the recent window: the newest `last` verdicts")
    ] = DEFAULT_LAST


class RecordLabelArgs(ToolArgs):
    tool: ClassVar[str] = "record_label"

    verdict_id: Annotated[
        str, Field(pattern=VERDICT_ID_PATTERN, description="the `verdict_id` a judging tool returned")
    ]
    label: LabelValue
    note: Annotated[OptionalNote, Field(description="why (kept in the database only)")] = None
