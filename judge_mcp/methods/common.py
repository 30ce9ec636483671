"""The ask-parse-reask loop every method uses: one re-ask with a format reminder, then report unparsed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import anyio

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
    if value is not None or judge.no_reask:  # no_reask: the papers' strict rule, an unparsed answer stays unparsed
        return Parsed(value, first.text, first, False)
    follow_up = replace(
        request,
        messages=request.messages + (Message("assistant", first.text), Message("user", reminder)),
        purpose=f"{request.purpose}:reask",
    )
    second = await judge.complete(follow_up)
    return Parsed(parse(second.text), second.text, second, True)


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
    failure cancels the rest and is raised as itself (a BackendError, say), not as an exception group."""
    results: list[T | None] = [None] * count
    finished = 0

    async def run(k: int) -> None:
        nonlocal finished
        results[k] = result = await one(k)
        finished += 1
        if done_message is not None:
            await judge.progress(finished, count, done_message(k, result))

    try:
        async with anyio.create_task_group() as tg:
            for k in range(count):
                tg.start_soon(run, k)
    except BaseExceptionGroup as group:
        raise first_error(group)  # noqa: B904 - the group stays attached as its context
    return results  # type: ignore[return-value]  # every slot is filled once the group exits without error
