"""The one renderer of conversations and trajectories (judge_mcp/contract/messages.py) into the transcript a judge reads.

A plain string renders as the method's own defusing of it, so a string prompt or answer keeps today's prompt byte
for byte. A list of messages renders as one fenced block per message, numbered from 1 and naming its role (a tool
result: the call it answers and that call's tool):

    <|The Start of Message 2: assistant|>
    I'll look it up.
    <|The Start of Tool Call 2.1: search (id call_1)|>
    {"query": "weather in Paris"}
    <|The End of Tool Call 2.1|>
    <|The End of Message 2|>

Every piece of caller text inside (content, arguments) is defused by the method's own function (verdict tokens,
the template's fences) and then loses any imitation of these message and tool-call fences, so a tool's output can
neither write a verdict nor close its message and speak as another role. Tool names and call ids match
messages.ID_PATTERN, so they are safe in a fence line. A tool result with no content says so. A message's images go after the request's text as image
parts captioned with the message's number and its owner (the prompt, answer A or B as shown, an option), so they
move with their answer when the order is swapped. The same value renders the same in both orders.

Linear in the value's text (one pass per message, each defusing linear); the methods run it through
text_work.run, off the event loop past text_work.OFF_LOOP_CHARS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from judge_mcp.contract import images as imagelib
from judge_mcp import prompts
from judge_mcp.contract.messages import Message
from judge_mcp.methods.parsing import _defuse_fences, _SEP
from judge_mcp.methods.user_inputs import ImageGroups, Images, _caption

Value = str | Sequence[Message]

# Imitations of the transcript's own fences ("The End of Message 2", "The Start of Tool Call 2.1"), in any case,
# spacing or delimiters (parsing._fence_spans walks those); possessive throughout, as parsing's phrases are.
_FENCE_PHRASE = re.compile(
    rf"the{_SEP}++(start|end|beginning){_SEP}++of{_SEP}++(?:the{_SEP}++|an?{_SEP}++)?+(message|tool{_SEP}++call)"
    rf"(?:{_SEP}*+[0-9]++(?:\.[0-9]++)?+)?+",
    re.I,
)


def _fence_words(m: re.Match) -> str:
    where = "start" if m.group(1).lower() in ("start", "beginning") else "end"
    what = "message" if m.group(2).lower() == "message" else "tool call"
    return f"(quoted fence: {where} of a {what})"


def defuse_fences(text: str) -> str:
    """`text` without imitations of the transcript's fences. Linear."""
    return _defuse_fences(text, _FENCE_PHRASE, _fence_words, delimited_only=False)


def _clean(text: str, defuse: Callable[[str], str]) -> str:
    return defuse_fences(defuse(text)).strip("\n")


def _message(number: int, message: Message, defuse: Callable[[str], str], calls: dict[str, str]) -> str:
    parts = [_clean(message.content, defuse)] if message.content and message.content.strip() else []
    for k, call in enumerate(message.tool_calls or (), start=1):
        parts.append(prompts.render(
            "transcript_tool_call.txt", number=f"{number}.{k}", tool=call.name, id=call.id, arguments=_clean(call.arguments_text(), defuse)
        ).rstrip("\n"))
    if message.images:
        parts.append(prompts.render("transcript_images.txt", count=str(len(message.images))).rstrip("\n"))
    if not parts:  # a tool that returned nothing
        parts.append(prompts.load("transcript_empty_result.txt").rstrip("\n"))
    role: str = message.role
    if message.tool_call_id is not None:
        role = prompts.render("transcript_tool_result.txt", id=message.tool_call_id, tool=calls.get(message.tool_call_id, "?")).strip("\n")
    return prompts.render("transcript_message.txt", number=str(number), role=role, body="\n".join(parts)).rstrip("\n")


def render(value: Value, defuse: Callable[[str], str]) -> str:
    """The text the judge reads for `value`: `defuse(value)` for a string, else the fenced transcript (module doc)."""
    if isinstance(value, str):
        return defuse(value)
    calls = {call.id: call.name for m in value for call in m.tool_calls or ()}
    return "\n\n".join(_message(n, m, defuse, calls) for n, m in enumerate(value, start=1))


def plain(value: Value) -> str:
    """The caller's text of `value` (contents and arguments, blank-line separated): what a judge quoting it may copy
    (the parsers' echo and quotation checks)."""
    if isinstance(value, str):
        return value
    pieces: list[str] = []
    for m in value:
        pieces += [m.content] if m.content else []
        pieces += [call.arguments_text() for call in m.tool_calls or ()]
    return "\n\n".join(pieces)


# ---- images -------------------------------------------------------------------------------------------------------
def message_images(value: Any, owner: str) -> ImageGroups:
    """The image groups of `value`'s messages, one per message with images, captioned with its number and `owner`
    (what the transcript belongs to as shown: "the user's prompt", "Assistant A's answer", "Option 2")."""
    if isinstance(value, str) or value is None:
        return ()
    return tuple(
        (_caption("images_message.txt", number=str(n), owner=owner), tuple(imagelib.decode(u) for u in m.images))
        for n, m in enumerate(value, start=1) if m.images
    )


def owner(name: str, **values: str) -> str:
    return prompts.render(name, **values).strip("\n")


def pair_images(prompt: Any, first: Any, second: Any, prompt_images: Images, first_images: Images, second_images: Images) -> ImageGroups:
    """A pairwise request's image groups, answers in the order shown, each answer's argument images then its messages'
    (user_inputs.pair_images when no message holds an image)."""
    groups = (
        (_caption("images_prompt.txt"), prompt_images), *message_images(prompt, owner("owner_prompt.txt")),
        (_caption("images_answer_a.txt"), first_images), *message_images(first, owner("owner_answer_a.txt")),
        (_caption("images_answer_b.txt"), second_images), *message_images(second, owner("owner_answer_b.txt")),
    )
    return tuple(g for g in groups if g[1])


def option_images(instruction: Any, prompt_images: Images, shown: Sequence[Any], shown_images: Sequence[Images]) -> ImageGroups:
    """A Grade Score request's image groups: the instruction's, then each shown option's (its argument images, then its
    messages'), numbered as shown (user_inputs.option_images when no message holds an image)."""
    groups = [(_caption("images_prompt.txt"), prompt_images), *message_images(instruction, owner("owner_prompt.txt"))]
    for k, (value, images) in enumerate(zip(shown, shown_images), start=1):
        groups += [(_caption("images_option.txt", number=str(k)), images), *message_images(value, owner("owner_option.txt", number=str(k)))]
    return tuple(g for g in groups if g[1])


def _as_is(text: str) -> str:
    return text


def text(value: Value) -> str:
    """`value` as one string, not defused: a string itself, a list of messages its transcript (what keys a seed, and
    what a store keeps where it keeps text: LWE's feedback buffer)."""
    return render(value, _as_is)
