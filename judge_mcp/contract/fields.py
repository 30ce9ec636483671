"""The building blocks of the tools' argument models (args.py): the limits, the choices, the checks a JSON Schema
cannot state, and the annotated field types that carry both into each input schema."""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from judge_mcp.contract import images as imagelib


# ---- limits ------------------------------------------------------------------------------------------------------
MAX_TEXT_CHARS = 50_000  # one prompt, response, option or instruction
MAX_CRITERIA_CHARS = 10_000  # the caller's rubric (`criteria`)
MAX_REFERENCE_CHARS = MAX_TEXT_CHARS  # a reference answer (`reference`)
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
MAX_NOTE_CHARS = 2_000  # record_label's note
VERDICT_ID_PATTERN = r"^[0-9a-f]{32}$"  # a verdict's id (verdict_writes.new_verdict_id)
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
def argument_error(message: str) -> PydanticCustomError:
    """An argument's problem; validation.py puts the argument's name in front ("'prompt' is empty")."""
    return PydanticCustomError("argument", message)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise argument_error("contains a NUL character")
    return value


def checked_text(value: str) -> str:
    """Judged text: no NUL character, not blank (pydantic has refused lone surrogates and checked the length)."""
    if not _no_nul(value).strip():
        raise argument_error("is empty")
    return value


def _optional_text(value: str | None) -> str | None:
    """Optional text: blank means absent (a form-filling client sends an empty optional string)."""
    return None if value is None or not _no_nul(value).strip() else value


def blank_is_absent(value: Any) -> Any:
    """Before an optional text's own checks: a blank string, the empty one too, is absent (its minLength 1 would
    refuse "" while "  " passed as absent)."""
    return None if isinstance(value, str) and not value.strip() and "\x00" not in value else value


_ABSENT_IF_BLANK = BeforeValidator(blank_is_absent)


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


def checked_image(value: str, info: ValidationInfo) -> str:
    """A data: URI of a PNG, JPEG, WebP or GIF image within the size limit (imagelib.decode says what is wrong); or,
    where the validation context's `image_paths` policy allows it (stdio), a file path, read into such a URI."""
    try:
        if imagelib.is_data_or_url(value):
            imagelib.decode(value)
            return value
        policy = (info.context or {}).get("image_paths", imagelib.NO_PATHS)
        return imagelib.read_path(value, policy)
    except ValueError as exc:
        raise argument_error(str(exc)) from None


class _Judged:
    """Marks an argument the judge reads as text: it counts towards the call's size limit."""


JUDGED = _Judged()

# ---- argument types ------------------------------------------------------------------------------------------------
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(checked_text)]
OptionalText = Annotated[Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None, _ABSENT_IF_BLANK, AfterValidator(_optional_text)]
OptionalCriteria = Annotated[Annotated[str, Field(min_length=1, max_length=MAX_CRITERIA_CHARS)] | None, _ABSENT_IF_BLANK,
                             AfterValidator(_optional_text)]
OptionalReference = Annotated[Annotated[str, Field(min_length=1, max_length=MAX_REFERENCE_CHARS)] | None, _ABSENT_IF_BLANK,
                              AfterValidator(_optional_text)]
ImageUri = Annotated[str, Field(max_length=imagelib.MAX_IMAGE_CHARS), AfterValidator(checked_image)]
IMAGE_FORMAT = (f"data:image/(png|jpeg|webp|gif);base64 URIs of at most {imagelib.MAX_IMAGE_BYTES // 2**20} MiB decoded, no URLs; "
                 "over stdio also file paths inside JUDGE_MCP_IMAGE_DIRS")
ImageList = Annotated[list[ImageUri] | None, Field(max_length=imagelib.MAX_IMAGES)]
Prompt = Annotated[Text, JUDGED, Field(description="the user prompt both answers respond to")]
Instruction = Annotated[Text, JUDGED]
OptionalNote = Annotated[Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)] | None, _ABSENT_IF_BLANK, AfterValidator(_optional_text)]
# record_label's correct answer: "A", "B" or "tie" for a pair; an option's or response's index, or its exact text
LabelValue = Annotated[
    int | Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(checked_text)],
    Field(description='"A", "B" or "tie" (compare_pair, lwe_judge); the best 0-based index or exact text (grade_score_options, '
          "infer_instruction_reward); the overall score, a whole number (score_response)"),
]
ModelName = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_CHARS), AfterValidator(checked_text)]
Session = Annotated[str, Field(pattern=SESSION_PATTERN, description="each session has its own meta-prompt")]
FlipVariant = Annotated[Literal[1, 2, 3], BeforeValidator(_whole_number)]
GradeVariant = Annotated[Literal[1, 2, 3, 4], BeforeValidator(_whole_number)]
FLIP_VARIANTS: tuple[int, ...] = get_args(get_args(FlipVariant)[0])
GRADE_VARIANTS: tuple[int, ...] = get_args(get_args(GradeVariant)[0])


@cache
def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


@cache
def judged_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The arguments marked JUDGED: the text the judge reads, whose sizes add up to the call's."""
    return tuple(name for name, field in model.model_fields.items() if JUDGED in field.metadata)


JUDGES = ("backend", "backends", "response_models", "exclude_same_family")  # listed last in every input schema


# what a caller brings besides the judged texts (UserInputsArgs): after the tool's own arguments, before who judges
BROUGHT = ("criteria", "reference", "images", "response_a_images", "response_b_images", "option_images")


def judges_last(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Schema properties in declaration order, what a caller brings next to last, who judges last; the title the SDK
    used to give (`<tool>Arguments`)."""
    props = schema.get("properties", {})

    def rank(k: str) -> int:
        return 100 + JUDGES.index(k) if k in JUDGES else 50 + BROUGHT.index(k) if k in BROUGHT else 0

    schema["properties"] = {k: props[k] for k in sorted(props, key=rank)}
    schema["title"] = f"{getattr(model, 'tool', model.__name__)}Arguments"
