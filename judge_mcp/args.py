"""The tools' arguments: one pydantic model per tool, the one place where an argument and its default are written.

Each model is at once
- the tool's MCP input schema: limits, enums and descriptions, `additionalProperties: false` (tools.py);
- what the tool's method receives (`pairwise.compare_pair(judge, ComparePairArgs)`), what a panel's combine reads
  (methods/panel.py), what the verdict log keeps (`logged`) and what the bench builds (judge_mcp/bench/methods.py);
- what judge_stats reads to know which tools judge two answers (`PairArgs.ANSWERS`).

Types are strict, as the schema says: a JSON boolean is not a number (`max_tokens: true` is refused, not read as
1), a number is not a boolean (`swap: 0`), a string is neither (over MCP, tools.py first decodes a value a client
sent as JSON text inside a string, "4096" or "true", for the arguments that take no free text). Checks a JSON
Schema cannot state are validators here: NUL characters and blank text, the size of a whole call, repeated
options, swap_margin without swap "auto", `backend` with `backends`, one author per answer, a rollback's version.
A failed check is an InputError whose message arg_errors.py writes: one sentence per problem, naming the argument.

Adding an argument is one field on one model, or on a base shared by several tools (`PairArgs`: the prompt and
two answers of compare_pair and lwe_judge; `PanelArgs`: the panel of compare_pair and grade_score_options), plus
the method that reads it. A field the judge reads as text is marked `JUDGED`: it counts towards the call's size.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from judge_mcp import arg_errors

# ---- limits ------------------------------------------------------------------------------------------------------
MAX_TEXT_CHARS = 50_000  # one prompt, response, option or instruction
MAX_TOTAL_CHARS = 200_000  # all judged text of one call together
MAX_RESPONSES = 16  # infer_instruction_reward
MIN_OPTIONS, MAX_OPTIONS = 2, 10  # grade_score_options
MIN_MEMBERS, MAX_MEMBERS = 2, 8  # a judge panel (`backends`)
MAX_BACKEND_CHARS = 64  # a backend name
MAX_MODEL_CHARS = 200  # a model name in `response_models`
MAX_TOKENS_LIMIT = 32768  # the largest compare_pair `max_tokens` a caller may ask for
PAIR_MAX_TOKENS = 4096  # compare_pair's answer budget when `max_tokens` is omitted: JudgeBench's Arena-Hard judge setting
DEFAULT_SWAP_MARGIN = 0.5  # swap "auto" without swap_margin: the second order runs unless |p_A - p_B| >= this (p >= 0.75)
MAX_BATCH_SIZE = 64  # lwe_judge
MAX_VERSION = 2**31 - 1  # lwe_session
DEFAULT_LAST, MAX_LAST = 100, 1_000_000  # judge_stats' recent window
SESSION_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"  # JSON Schema `pattern` (ECMA: `$` is the end of the text)
_SESSION_RE = re.compile(SESSION_PATTERN[1:-1])  # used with fullmatch: "default\n" is refused

# ---- choices -----------------------------------------------------------------------------------------------------
Goal = Literal["worse", "better"]
Template = Literal["sop", "cot", "direct"]
Similarity = Literal["f1", "rouge_l", "token_sort"]
AnswerOrder = Literal["reasoning_first", "instruction_first"]
Action = Literal["show", "reset", "rollback"]
GOALS: tuple[str, ...] = get_args(Goal)
TEMPLATES: tuple[str, ...] = get_args(Template)
SIMILARITIES: tuple[str, ...] = get_args(Similarity)
ANSWER_ORDERS: tuple[str, ...] = get_args(AnswerOrder)
ACTIONS: tuple[str, ...] = get_args(Action)


class InputError(ValueError):
    """Bad tool input; the message is shown to the caller as is."""


# ---- checks a JSON Schema cannot state ---------------------------------------------------------------------------
def _fail(message: str) -> PydanticCustomError:
    """An argument's problem; arg_errors.py puts the argument's name in front ("'prompt' is empty")."""
    return PydanticCustomError("argument", message)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise _fail("contains a NUL character")
    return value


def _text(value: str) -> str:
    """Judged text: no NUL character, not blank (pydantic has refused lone surrogates and checked the length)."""
    if not _no_nul(value).strip():
        raise _fail("is empty")
    return value


def _optional_text(value: str | None) -> str | None:
    """Optional text: blank means absent (a form-filling client sends an empty optional string)."""
    return None if value is None or not _no_nul(value).strip() else value


def _whole_number(value: Any) -> Any:
    """An int choice (prompt_variant): a boolean or a float is not one of 1, 2, 3 even where Python says 1 == True."""
    if type(value) is not int:
        raise PydanticCustomError("literal_error", "not one of the choices")
    return value


def check_session(value: Any) -> str:
    """A session name given outside an argument model (resources, the CLI)."""
    if not isinstance(value, str) or not _SESSION_RE.fullmatch(value):
        raise InputError(f"'session' must match {SESSION_PATTERN}; got {value!r}")
    return value


class _Judged:
    """Marks an argument the judge reads as text: it counts towards the call's size limit."""


JUDGED = _Judged()

# ---- argument types ------------------------------------------------------------------------------------------------
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(_text)]
OptionalText = Annotated[Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None, AfterValidator(_optional_text)]
Prompt = Annotated[Text, JUDGED, Field(description="the user prompt both answers respond to")]
Instruction = Annotated[Text, JUDGED]
ModelName = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_CHARS), AfterValidator(_text)]
Session = Annotated[str, Field(pattern=SESSION_PATTERN, description="session name, [A-Za-z0-9_.-]{1,64}; each has its own meta-prompt")]
FlipVariant = Annotated[Literal[1, 2, 3], BeforeValidator(_whole_number)]
GradeVariant = Annotated[Literal[1, 2, 3, 4], BeforeValidator(_whole_number)]
FLIP_VARIANTS: tuple[int, ...] = get_args(get_args(FlipVariant)[0])
GRADE_VARIANTS: tuple[int, ...] = get_args(get_args(GradeVariant)[0])


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


@cache
def _judged(model: type[BaseModel]) -> tuple[str, ...]:
    """The arguments marked JUDGED: the text the judge reads, whose sizes add up to the call's."""
    return tuple(name for name, field in model.model_fields.items() if JUDGED in field.metadata)


JUDGES = ("backend", "backends", "response_models", "exclude_same_family")  # listed last in every input schema


def _judges_last(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Schema properties in declaration order, who judges last; the title the SDK used to give (`<tool>Arguments`)."""
    props = schema.get("properties", {})
    schema["properties"] = {k: props[k] for k in sorted(props, key=lambda k: JUDGES.index(k) + 1 if k in JUDGES else 0)}
    schema["title"] = f"{getattr(model, 'tool', model.__name__)}Arguments"


# ---- the models ----------------------------------------------------------------------------------------------------
class ToolArgs(BaseModel):
    """One tool's (or one bench method's) arguments. `tool` names it in messages and in the method table."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, json_schema_extra=_judges_last)
    tool: ClassVar[str] = ""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        """The model from a mapping of arguments, or an InputError naming each problem."""
        if not isinstance(data, Mapping):
            raise InputError(f"{cls.tool} takes named arguments (an object), got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
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
        return _schema(cls)

    def logged(self) -> dict[str, Any]:
        """The arguments as the verdict log keeps them: what was given or defaulted, without `backend` (a column of
        its own) and without absent optional ones."""
        return self.model_dump(exclude={"backend"}, exclude_none=True)

    @model_validator(mode="after")
    def _call_size(self) -> Self:
        size = 0
        for name in _judged(type(self)):
            value = getattr(self, name)
            size += sum(len(v) for v in value) if isinstance(value, list) else len(value or "")
        if size > MAX_TOTAL_CHARS:
            raise PydanticCustomError("call", f"the inputs add up to {size:,} characters; the limit for one call is {MAX_TOTAL_CHARS:,}")
        return self


class JudgingArgs(ToolArgs):
    """A judging method's arguments: which backend judges."""

    backend: Annotated[
        str | None, Field(max_length=MAX_BACKEND_CHARS, description="a backend named in the JUDGE_MCP_CONFIG TOML file; default: the environment's")
    ] = None


class PairArgs(JudgingArgs):
    """A prompt and two answers to it (compare_pair, lwe_judge, the bench's Arena-Hard baseline)."""

    ANSWERS: ClassVar[tuple[str, str]] = ("response_a", "response_b")

    prompt: Prompt
    response_a: Annotated[Text, JUDGED, Field(description="answer A")]
    response_b: Annotated[Text, JUDGED, Field(description="answer B")]


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
            description=f"a judge panel: {MIN_MEMBERS}-{MAX_MEMBERS} distinct backend names (JUDGE_MCP_CONFIG; 'default' is the "
            "environment's); each judges concurrently and the verdict is the majority of those that answered. Not with `backend`",
        ),
    ] = None
    response_models: list[str] | None = None
    exclude_same_family: Annotated[
        bool, Field(description="leave out every judge of the same model family as an answer's author (needs response_models)")
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


class ComparePairArgs(PairArgs, PanelArgs):
    tool: ClassVar[str] = "compare_pair"
    ANSWERS_SAID: ClassVar[str] = "response_a, response_b"

    goal: Annotated[Goal, Field(description="ask which answer is worse (GRP, default) or better")] = "worse"
    template: Annotated[Template, Field(description="sop: judge answers first (Arena-Hard); cot; direct")] = "sop"
    swap: Annotated[
        bool | Literal["auto"],
        Field(description='true: judge both orders (default), winner only when they agree; false: one order; "auto": '
              "the second order only when the first is not confident (see swap_margin) or has no probabilities"),
    ] = True
    swap_margin: Annotated[
        float | None,
        Field(ge=0.0, le=1.0, description='swap "auto" only: run the second order when the first\'s |p_A - p_B| is under this '
              f"(default {DEFAULT_SWAP_MARGIN:g}, i.e. p < {0.5 + DEFAULT_SWAP_MARGIN / 2:g})"),
    ] = None
    max_tokens: Annotated[
        int | None,
        Field(ge=1, le=MAX_TOKENS_LIMIT,
              description=f"answer budget in tokens, 1..{MAX_TOKENS_LIMIT} (default: {PAIR_MAX_TOKENS}, JudgeBench's Arena-Hard judge)"),
    ] = None
    response_models: Annotated[
        list[ModelName] | None,
        Field(min_length=2, max_length=2, description="the models that wrote response_a and response_b, e.g. [\"gpt-4o\", \"claude-sonnet-4-5\"]: "
              "a judge of the same family gets a warning"),
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

    instruction: Annotated[Instruction, Field(description="the instruction (or, with context, the system prompt) the responses should follow")]
    responses: Annotated[list[Text], JUDGED, Field(min_length=1, max_length=MAX_RESPONSES, description=f"1 to {MAX_RESPONSES} candidate responses")]
    context: Annotated[OptionalText, JUDGED, Field(description="optional user prompt or conversation; then `instruction` is a system prompt")] = None
    similarity: Annotated[
        Similarity, Field(description="f1 (word-level F1, default), rouge_l (ROUGE-L F-measure) or token_sort (rapidfuzz token_sort_ratio)")
    ] = "f1"
    prompt_variant: Annotated[FlipVariant, Field(description="the FLIP paper's inference prompt 1 (default), 2 or 3")] = 1
    answer_order: Annotated[
        AnswerOrder,
        Field(description="reasoning_first: the paper's answer order (default); instruction_first: for small models that loop in the explanation"),
    ] = "reasoning_first"


class GradeScoreOptionsArgs(PanelArgs):
    tool: ClassVar[str] = "grade_score_options"
    ANSWERS_SAID: ClassVar[str] = "one per option"

    instruction: Annotated[Instruction, Field(description="the question or task the options answer")]
    options: Annotated[
        list[Text], JUDGED, Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS, description=f"{MIN_OPTIONS} to {MAX_OPTIONS} candidate options")
    ]
    prompt_variant: Annotated[GradeVariant, Field(description="the Grade Score paper's judge prompt A.1-A.4 (1..4, default 2)")] = 2
    unrelated_option: Annotated[bool, Field(description="add an option answering a different instruction as a sanity check")] = False
    response_models: Annotated[
        list[ModelName] | None,
        Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS,
              description="the model that wrote each option, one per option: a judge of the same family gets a warning"),
    ] = None

    def answer_names(self) -> list[str]:
        return [f"options[{i}]" for i in range(len(self.options))]

    @field_validator("options")
    @classmethod
    def _distinct(cls, options: list[str]) -> list[str]:
        seen: dict[str, int] = {}
        for i, option in enumerate(options):
            if option in seen:
                raise _fail(f"must not repeat an option: options[{i}] is identical to options[{seen[option]}]")
            seen[option] = i
        return options


class LweJudgeArgs(PairArgs):
    tool: ClassVar[str] = "lwe_judge"

    session: Session = "default"
    selective: Annotated[bool, Field(description="only cases judged inconsistently in both orders take the meta-prompt path")] = True
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE, description="feedback items per refinement (used when the session is created)")] = 4


class LweSessionShowArgs(ToolArgs):
    tool: ClassVar[str] = "lwe_session_show"

    session: Session = "default"


class LweSessionArgs(ToolArgs):
    tool: ClassVar[str] = "lwe_session"

    action: Annotated[Action, Field(description="show the session, reset to the initial meta-prompt, or roll back to `version`")] = "show"
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
        int, Field(ge=1, le=MAX_LAST, description=f"size of the recent window: the newest `last` verdicts (default {DEFAULT_LAST})")
    ] = DEFAULT_LAST
