"""Conversations and agent trajectories: what `prompt`, `instruction`, `context` and the judged answers take besides a
string (the contract (docs/tools.md), "Conversations and agent trajectories").

- A **conversation** is 1..MAX_MESSAGES chat messages, oldest first: `{role, content, tool_calls, tool_call_id,
  images}`, roles system, user, assistant and tool; the answers respond to its last message.
- A **trajectory** is the same list holding only the agent's turns: `assistant` messages (with their tool calls)
  and the `tool` results they saw.

`PromptLike` (a string or a conversation) and `AnswerLike` (a string or a trajectory) are argument types: their
schema is the union, with one shared `$defs` entry per message model; their validator dispatches on the JSON type
itself, so a bad message gets one sentence naming the message's index and the field ("message 2: 'role' must be
one of ...; got 'robot'") rather than pydantic's report for every member of the union, and a bad string gets
exactly the sentence it got before. The checks: roles, tool calls only on assistant messages and tool_call_id only
on tool messages, every tool result answering an earlier call of the same list, call ids unique, no user or system
turn in a trajectory, no empty message, at most MAX_CONVERSATION_CHARS characters of text in all. All linear.

methods/transcript.py renders both into what the judge reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, WrapValidator, model_validator
from pydantic_core import PydanticCustomError

from judge_mcp.contract import validation as arg_errors
from judge_mcp.contract.fields import checked_image, blank_is_absent, MAX_TEXT_CHARS, MAX_TOTAL_CHARS, Text
from judge_mcp.contract import images as imagelib

MAX_MESSAGES = 200  # messages in one conversation or trajectory
MAX_CONVERSATION_CHARS = MAX_TOTAL_CHARS  # all the text of one conversation or trajectory (contents, tool names, arguments)
MAX_TOOL_CALLS = 32  # tool calls in one assistant message
# What the transcript adds around each tool call (methods/transcript.py, prompts/transcript_tool_call.txt: its two
# fences with the call's number, at most "200.32"), counted with the call's text by the size limits
TOOL_CALL_FRAMING = 80
MAX_ARGUMENT_DEPTH = 64  # levels of nesting in a tool call's arguments object
ID_PATTERN = r"^[A-Za-z0-9_.:@/-]{1,128}$"  # a tool call's id and a tool's name: printed in the transcript's fence lines
Role = Literal["system", "user", "assistant", "tool"]
AGENT_ROLES = ("assistant", "tool")  # a trajectory's roles


def _lean(schema: dict[str, Any]) -> None:
    """A message model's schema as small as it can say the same (every judging tool's tools/list entry carries it):
    no titles, no defaults, an optional field as its type alone (it may be left out; null is accepted as absent)."""
    schema.pop("title", None)
    props = schema.get("properties", {})
    for name, prop in props.items():
        members = [m for m in prop.get("anyOf", []) if m != {"type": "null"}]
        if len(members) == 1 and len(prop["anyOf"]) == 2:
            prop = props[name] = {**members[0], **{k: v for k, v in prop.items() if k not in ("anyOf", "default")}}
        prop.pop("title", None)
        prop.pop("default", None)


_ImageUri = Annotated[str, Field(max_length=imagelib.MAX_IMAGE_CHARS), AfterValidator(checked_image)]  # as `images` (described there)
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, json_schema_extra=_lean, defer_build=True)


class ToolCall(BaseModel):
    """A tool call: id (what the tool result's tool_call_id names), the tool's name, its arguments (a JSON string
    as the model wrote it, or an object)."""

    model_config = _STRICT

    id: Annotated[str, Field(pattern=ID_PATTERN)]
    name: Annotated[str, Field(pattern=ID_PATTERN)]
    arguments: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | dict[str, Any] = ""

    @model_validator(mode="after")
    def _depth(self) -> ToolCall:
        """Arguments nest at most MAX_ARGUMENT_DEPTH levels of objects and lists (checked without recursion), so
        writing them is safe; a string or number inside the deepest one is no level of its own."""
        level: list[Any] = [self.arguments] if isinstance(self.arguments, dict) else []
        for _ in range(MAX_ARGUMENT_DEPTH):
            level = [v for item in level for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (dict, list))]
            if not level:
                return self
        raise PydanticCustomError("argument", f"has arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels")

    def arguments_text(self) -> str:
        """The arguments as the judge reads them: the string as given, an object as compact JSON."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class Message(BaseModel):
    """A message. tool_calls (assistant only): [{id, name, arguments}]; tool_call_id (tool only): an earlier call's
    id; images: as `images`. 1-200 messages, each text up to 50,000 characters, 200,000 in all."""

    model_config = _STRICT

    role: Role
    content: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=MAX_TOOL_CALLS)] | None = None
    tool_call_id: Annotated[str, Field(pattern=ID_PATTERN)] | None = None
    images: Annotated[list[_ImageUri], Field(max_length=imagelib.MAX_IMAGES)] | None = None

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise PydanticCustomError("argument", f"has 'tool_calls': only an assistant message makes tool calls (role is '{self.role}')")
        if self.tool_call_id is not None and self.role != "tool":
            raise PydanticCustomError("argument", f"has 'tool_call_id': only a tool message answers a call (role is '{self.role}')")
        if self.role == "tool" and self.tool_call_id is None:
            raise PydanticCustomError("argument", "is a tool message without 'tool_call_id' (the id of the call it answers)")
        if self.content is not None and "\x00" in self.content:
            raise PydanticCustomError("argument", "has a NUL character in 'content'")
        if not (self.content or "").strip() and not self.tool_calls and not self.images and self.role != "tool":  # a tool may return nothing
            raise PydanticCustomError("argument", "is empty: give 'content'" + (" or 'tool_calls'" if self.role == "assistant" else ""))
        return self

    def chars(self) -> int:
        """The message's text in characters: its content, each tool call's name and arguments."""
        calls = sum(len(c.name) + len(c.arguments_text()) for c in self.tool_calls or ())
        return len(self.content or "") + calls

    def size(self) -> int:
        """What the size limits count: the text (chars), the ids, which the transcript prints too (each tool call's
        id and the tool_call_id, up to 128 characters each), and each tool call's fences (TOOL_CALL_FRAMING): without
        them, thousands of empty calls sent the model over ten times the characters counted."""
        calls = self.tool_calls or ()
        return self.chars() + len(self.tool_call_id or "") + sum(len(c.id) + TOOL_CALL_FRAMING for c in calls)


Conversation = list[Message]
_MESSAGES = TypeAdapter(list[Message])
_TEXT: TypeAdapter[str] = TypeAdapter(Text)


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("argument", message)


def _where(loc: Sequence[Any]) -> str:
    """A location inside one message as a field name: ('tool_calls', 0, 'name') -> "tool_calls[0].name"."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _field_schema(loc: Sequence[Any]) -> dict[str, Any]:
    """The JSON schema of the field at `loc` inside a message (for the limits a sentence quotes)."""
    return arg_errors.schema_at(_MESSAGES.json_schema(), (0, *loc))


_FIELDS = frozenset(Message.model_fields) | frozenset(ToolCall.model_fields)


def _inner(error: Any) -> tuple[Any, ...]:
    """The error's location inside its message without pydantic's union member tags ('constrained-str',
    'dict[str,any]'); an unknown field keeps its name."""
    loc = tuple(error["loc"][1:])
    if error["type"] == "extra_forbidden":
        return loc
    return tuple(p for p in loc if not isinstance(p, str) or p in _FIELDS)


def _mismatch(error: Any) -> bool:
    """An error that says only that the value is not of a union member's type."""
    return str(error["type"]).endswith("_type") or error["type"] in ("none_required", "is_instance_of")


def _errors(errors: list[Any]) -> list[Any]:
    """The errors worth a sentence. A value that fits no member of a union (a tool call's `arguments`: a string or an
    object) gets one error per member: where a member of the value's own type failed (a string too long), only that
    member's errors; where none did, one error saying which types the field takes."""
    by_place: dict[tuple[Any, ...], list[Any]] = {}
    for e in errors:
        by_place.setdefault((e["loc"][0], *_inner(e)), []).append(e)
    out = []
    for place, group in by_place.items():
        tagged = [e for e in group if len(e["loc"]) > len(place)]  # errors of union members
        if len(tagged) < 2:
            out += group
            continue
        kept = [e for e in group if not _mismatch(e)]
        out += kept or [{**tagged[0], "type": "union", "loc": place}]
    return out


def _sentence(error: Any) -> str:
    """One message's problem: 'message 2: 'role' must be one of ...'."""
    loc = tuple(error["loc"])
    index, inner = loc[0], _inner(error)
    if error["type"] == "union":
        return f"message {index}: {arg_errors.union(_where(inner), _field_schema(inner), error.get('input'))}"
    if error["type"] == "model_type" and not inner:
        return f"message {index} must be an object with 'role' and 'content', got {type(error.get('input')).__name__}"
    if not inner:
        return f"message {index} {error['msg']}" if error["type"] == "argument" else f"message {index}: {error['msg']}"
    if error["type"] == "extra_forbidden":
        model = ToolCall if len(inner) > 1 else Message
        return f"message {index}: unknown field '{_where(inner)}'; {model.__name__} takes {', '.join(model.model_fields)}"
    write = arg_errors.WRITERS.get(error["type"], arg_errors.other)
    return f"message {index}: {write(_where(inner), error, _field_schema(inner))}"


def _messages(value: list[Any], info: ValidationInfo, kind: str) -> list[Message]:
    """The list validated as messages, then as a whole (see the module doc)."""
    if not value:
        raise _fail(f"is an empty {kind}: give 1 to {MAX_MESSAGES} messages")
    if len(value) > MAX_MESSAGES:
        raise _fail(f"holds {len(value)} messages; the limit for one {kind} is {MAX_MESSAGES}")
    try:
        messages = _MESSAGES.validate_python(value, strict=True, context=info.context)
    except ValidationError as exc:
        raise _fail("; ".join(dict.fromkeys(_sentence(e) for e in _errors(exc.errors())))) from None
    check(messages, kind)
    return messages


def check(messages: Sequence[Message], kind: str) -> None:
    """The checks across messages: a trajectory's roles, tool results answering earlier calls, unique call ids, the
    total size (PydanticCustomError naming the message)."""
    calls: dict[str, str] = {}
    size = 0
    for i, m in enumerate(messages):
        if kind == "trajectory" and m.role not in AGENT_ROLES:
            raise _fail(f"message {i} has role '{m.role}': a trajectory holds only the agent's turns ('assistant' and 'tool' messages)")
        for call in m.tool_calls or ():
            if call.id in calls:
                raise _fail(f"message {i}: tool call id '{call.id}' is used twice in one {kind}")
            calls[call.id] = call.name
        if m.tool_call_id is not None and m.tool_call_id not in calls:
            raise _fail(f"message {i}: a tool result for call '{m.tool_call_id}', but no earlier assistant message makes that call")
        size += m.size()
    if size > MAX_CONVERSATION_CHARS:
        framing = f" (each tool call counting {TOOL_CALL_FRAMING} for its fences)" if any(m.tool_calls for m in messages) else ""
        raise _fail(f"is a {kind} of {size:,} characters of text{framing}; the limit is {MAX_CONVERSATION_CHARS:,}")


def _either(kind: str):
    def validate(value: Any, handler: Any, info: ValidationInfo) -> str | list[Message]:
        if isinstance(value, str):
            try:
                return _TEXT.validate_python(value, strict=True)
            except ValidationError as exc:  # the string's own sentence, as for a plain text argument
                e = exc.errors()[0]
                raise PydanticCustomError(e["type"], e["msg"], e.get("ctx")) from None
        if isinstance(value, list):
            return _messages(value, info, kind)
        got = repr(value) if value is None or isinstance(value, (bool, int, float)) else type(value).__name__
        raise _fail(f"must be a string or a {kind} (a list of messages), got {got}")

    return validate


CONVERSATION_DOC = "or a conversation (Messages, oldest first)"
TRAJECTORY_DOC = "or a trajectory (the agent's assistant and tool Messages)"
ConversationList = Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
PromptLike = Annotated[Text | ConversationList, WrapValidator(_either("conversation"))]
AnswerLike = Annotated[Text | ConversationList, WrapValidator(_either("trajectory"))]
Trajectory = list[Message]  # validated as AnswerLike's list member: assistant and tool messages only


# ---- reading a validated value ---------------------------------------------------------------------------------------
def is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], Message)


def chars(value: str | Sequence[Message] | None) -> int:
    """A judged value's text in characters (a string's length; a conversation's contents, tool names, arguments)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    return sum(m.chars() for m in value)


def size(value: str | Sequence[Message] | None) -> int:
    """A judged value's size as the limits count it: chars, and a conversation's ids (Message.size)."""
    if value is None or isinstance(value, str):
        return chars(value)
    return sum(m.size() for m in value)


def image_uris(values: Iterable[Any]) -> Iterator[str]:
    """The image URIs inside the conversations and trajectories among `values` (lists of them too: options)."""
    for value in values:
        if is_messages(value):
            for m in value:
                yield from m.images or ()
        elif isinstance(value, list):
            yield from image_uris(value)


def logged(value: Any) -> Any:
    """A dumped argument as the verdict log keeps it: every message's images as SHA-256, media type and size."""
    if isinstance(value, list):
        return [logged(v) for v in value]
    if isinstance(value, dict) and "role" in value and value.get("images"):
        return {**value, "images": [imagelib.decode(uri).described() for uri in value["images"]]}
    return value


def identity(value: str | Sequence[Message]) -> tuple[str, str]:
    """A hashable key that is equal for equal values (a repeated option), a string and a list never equal."""
    if isinstance(value, str):
        return ("text", value)
    return ("messages", json.dumps([m.model_dump(exclude_none=True) for m in value], ensure_ascii=False, sort_keys=True))


OptionalPromptLike = Annotated[PromptLike | None, BeforeValidator(blank_is_absent)]
