"""The ask-parse-reask loop every method uses: one re-ask with a format reminder, then report unparsed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from judge_mcp.backends.base import ChatRequest, Completion, Message
from judge_mcp.methods.judge import Judge

T = TypeVar("T")


@dataclass
class Parsed(Generic[T]):
    value: T | None  # None when still unparsed after the re-ask
    text: str  # the last answer's text
    completion: Completion
    reasked: bool

    @property
    def ok(self) -> bool:
        return self.value is not None


async def ask(judge: Judge, request: ChatRequest, parse: Callable[[str], T | None], reminder: str) -> Parsed[T]:
    """Send `request`; if `parse` returns None, re-ask once in the same conversation with `reminder`."""
    first = await judge.complete(request)
    value = parse(first.text)
    if value is not None:
        return Parsed(value, first.text, first, False)
    follow_up = replace(
        request,
        messages=request.messages + (Message("assistant", first.text), Message("user", reminder)),
        purpose=f"{request.purpose}:reask",
    )
    second = await judge.complete(follow_up)
    return Parsed(parse(second.text), second.text, second, True)
