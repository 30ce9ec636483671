"""The ask-parse-reask loop every method uses: a text answer cut off at the token limit is continued (at most
CONTINUATIONS times), then an unparsed answer gets one re-ask with a format reminder, then it is reported unparsed.

Continuation (JudgeBench's rule for its Arena-Hard judge, see arena_hard.py): when a text-grammar answer stops for
length (`finish_reason == "length"`), the partial answer goes back as the assistant turn with
`prompts/continue.txt`, and the pieces are joined before parsing. A continuation is not a re-ask: it asks for no
new judgment, only the rest of this one, so it is sent under `judge.no_reask` too (JudgeBench continues in its
strict protocol). Answers decoded under a JSON schema are not continued: the continuation would be decoded
without the schema (a grammar cannot resume mid-object), so structured answers rely on bounded schemas instead
(every free-text field has a `maxLength` that fits the budget, see `bounded`); a cut-off one stays as it is and
is reported as truncated.

An answer cut off after reasoning (`Completion.cut_in_reasoning`: the limit reached by a model that reasoned first)
is neither continued nor re-asked: the same budget would be spent the same way. It stays unparsed unless what
arrived parses, and the call context adds a warning naming the reasoning spent and the setting to raise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from judge_mcp import prompts
from judge_mcp.backends.base import ChatRequest, Completion, Message
from judge_mcp.calls.context import CallContext
from judge_mcp.methods import text_work

T = TypeVar("T")

CONTINUATIONS = 2  # at most this many continuations of a cut-off text answer


@dataclass
class Parsed(Generic[T]):
    value: T | None  # None when still unparsed after the re-ask
    text: str  # the last answer's text
    completion: Completion
    reasked: bool
    continued: bool = False  # the answer was cut off at the token limit and the model was asked to continue it

    @property
    def truncated(self) -> bool:
        """The last answer stopped at the token limit (after any continuations)."""
        return self.completion.finish_reason == "length"

    @property
    def ok(self) -> bool:
        return self.value is not None


def bounded(schema: dict, caps: dict[str, int]) -> dict:
    """`schema` (an object schema) with `maxLength` set on the named free-text properties: the one place a method
    declares how long each field may grow, so constrained decoding must close the string and the JSON."""
    props = {name: ({**spec, "maxLength": caps[name]} if name in caps else spec) for name, spec in schema["properties"].items()}
    return {**schema, "properties": props}


async def complete_text(judge: CallContext, request: ChatRequest) -> tuple[Completion, str, bool]:
    """(last completion, full text, continued): send `request`, and while a text answer stops for length, send the
    partial answer back and ask the model to continue it (at most CONTINUATIONS times); the pieces are joined."""
    completion = await judge.complete(request)
    text, continued, messages = completion.text, False, request.messages
    for n in range(CONTINUATIONS):
        if completion.finish_reason != "length" or completion.structured or not completion.text or completion.cut_in_reasoning:
            break
        messages = messages + (Message("assistant", completion.text), Message("user", prompts.load("continue.txt")))
        completion = await judge.complete(replace(request, messages=messages, purpose=f"{request.purpose}:continue{n + 1}"))
        text, continued = text + completion.text, True
    return completion, text, continued


async def ask(
    judge: CallContext, request: ChatRequest, parse: Callable[[str], T | None], reminder: str, *, judged_chars: int = 0
) -> Parsed[T]:
    """Send `request` (continuing a cut-off text answer, see complete_text); if `parse` returns None, re-ask once
    in the same conversation with `reminder`. `judged_chars`: how much judged text `parse` reads besides the answer
    (a large answer or judged text is parsed in a worker thread, see text_work)."""
    first, text, continued = await complete_text(judge, request)
    value = await text_work.run(parse, text, size=len(text) + judged_chars)
    # no_reask: the papers' strict rule, an unparsed answer stays unparsed; an answer cut off after reasoning is not
    # re-asked either (the same budget would be spent the same way): the result's warnings name the setting to raise
    if value is not None or judge.no_reask or first.cut_in_reasoning:
        return Parsed(value, text, first, False, continued)
    follow_up = replace(
        request,
        messages=request.messages + (Message("assistant", text), Message("user", reminder)),
        purpose=f"{request.purpose}:reask",
    )
    second = await judge.complete(follow_up)
    value = await text_work.run(parse, second.text, size=len(second.text) + judged_chars)
    return Parsed(value, second.text, second, True, continued)
