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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from judge_mcp import prompts
from judge_mcp.backends.base import ChatRequest, Completion, Message
from judge_mcp.methods.judge import Judge

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


async def complete_text(judge: Judge, request: ChatRequest) -> tuple[Completion, str, bool]:
    """(last completion, full text, continued): send `request`, and while a text answer stops for length, send the
    partial answer back and ask the model to continue it (at most CONTINUATIONS times); the pieces are joined."""
    completion = await judge.complete(request)
    text, continued, messages = completion.text, False, request.messages
    for n in range(CONTINUATIONS):
        if completion.finish_reason != "length" or completion.structured or not completion.text:
            break
        messages = messages + (Message("assistant", completion.text), Message("user", prompts.load("continue.txt")))
        completion = await judge.complete(replace(request, messages=messages, purpose=f"{request.purpose}:continue{n + 1}"))
        text, continued = text + completion.text, True
    return completion, text, continued


async def ask(judge: Judge, request: ChatRequest, parse: Callable[[str], T | None], reminder: str) -> Parsed[T]:
    """Send `request` (continuing a cut-off text answer, see complete_text); if `parse` returns None, re-ask once
    in the same conversation with `reminder`."""
    first, text, continued = await complete_text(judge, request)
    value = parse(text)
    if value is not None or judge.no_reask:  # no_reask: the papers' strict rule, an unparsed answer stays unparsed
        return Parsed(value, text, first, False, continued)
    follow_up = replace(
        request,
        messages=request.messages + (Message("assistant", text), Message("user", reminder)),
        purpose=f"{request.purpose}:reask",
    )
    second = await judge.complete(follow_up)
    return Parsed(parse(second.text), second.text, second, True, continued)


def rank_by_score(scored: list[tuple[int, float | None]]) -> tuple[list[int], int | None, list[int]]:
    """(ranking, best_index, tied_best) from (index, score) pairs, score None for an unparsed answer.

    Parsed by score, highest first, ties in index order; unparsed after them in index order. `best_index` is the
    single parsed index with the top score; null when nothing parsed or the top is shared, and then `tied_best`
    lists the indices sharing it.
    """
    parsed = sorted(((index, score) for index, score in scored if score is not None), key=lambda p: (-p[1], p[0]))
    ranking = [index for index, _ in parsed] + sorted(index for index, score in scored if score is None)
    if not parsed:
        return ranking, None, []
    top = [index for index, score in parsed if score == parsed[0][1]]
    return (ranking, None, top) if len(top) > 1 else (ranking, top[0], [])


def first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (concurrent trials raise groups); `exc` itself when it is no group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def run_each(
    judge: Judge, count: int, one: Callable[[int], Awaitable[T]], done_message: Callable[[int, T], str] | None = None
) -> list[T]:
    """`one(k)` for every k in 0..count-1, all at once (the backend's concurrency limit applies); the results in k
    order. With `done_message`, progress is reported as each finishes (done, count, done_message(k, result)). One
    failure cancels the rest and is raised as itself (a BackendError, say), not as an exception group; the first to
    fail is raised. Cancelled from outside, it cancels every one and waits for them to end before it stops, so none
    outlives the call (structured, as a task group). Plain asyncio tasks rather than an anyio task group: the group
    cost ~0.4 ms of CPU per compare_pair in process (docs/performance.md, session 6)."""
    results: list[T | None] = [None] * count
    finished = 0

    async def run(k: int) -> None:
        nonlocal finished
        results[k] = result = await one(k)
        finished += 1
        if done_message is not None:
            await judge.progress(finished, count, done_message(k, result))

    loop = asyncio.get_running_loop()
    over = loop.create_future()  # set when every one has ended, or at the first failure
    errors: list[BaseException] = []
    running = count

    def ended(task: asyncio.Task[None]) -> None:
        nonlocal running
        running -= 1
        if task.cancelled():  # by _cancel_and_wait, after the first failure; else from elsewhere, which is a failure
            error = None if over.done() else asyncio.CancelledError()
        else:
            error = task.exception()
        if error is not None:
            errors.append(error)
        if (errors or running == 0) and not over.done():
            over.set_result(None)

    tasks = [loop.create_task(run(k)) for k in range(count)]
    for task in tasks:
        task.add_done_callback(ended)
    try:
        if count:
            await over
    finally:
        if running:  # a failure, or this call was cancelled: the rest are cancelled, and waited for
            await _cancel_and_wait(tasks)
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]  # every slot is filled when none failed


async def _cancel_and_wait(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait until each has ended, even if the caller is cancelled meanwhile (re-raised after)."""
    for task in tasks:
        task.cancel()
    cancelled = False
    while pending := [task for task in tasks if not task.done()]:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
