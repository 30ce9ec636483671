"""fanout.run_each on plain asyncio tasks (an anyio task group cost ~0.4 ms of CPU per
compare_pair). It keeps the task group's promises: the first failure cancels the rest and is raised as itself, and
when it is cancelled from outside, no task it started is still running once it stops."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from judge_mcp.calls.fanout import run_each


class _Judge:
    async def progress(self, *args) -> None:
        pass


async def test_run_each_raises_the_first_failure_as_itself_and_cancels_the_rest() -> None:
    ended: list[str] = []

    async def one(k: int) -> int:
        try:
            if k == 1:
                await asyncio.sleep(0.01)
                raise ValueError("order 1 failed")
            await asyncio.sleep(30)
            return k
        finally:
            ended.append(f"{k}")

    with anyio.fail_after(5), pytest.raises(ValueError, match="order 1 failed"):
        await run_each(_Judge(), 3, one)
    assert sorted(ended) == ["0", "1", "2"]  # the other two were cancelled and had ended when it raised
    assert await run_each(_Judge(), 3, lambda k: asyncio.sleep(0, k * 10)) == [0, 10, 20]
    assert await run_each(_Judge(), 0, one) == []


async def test_run_each_cancelled_from_outside_leaves_no_task_running() -> None:
    cleaned: list[int] = []
    started = asyncio.Event()

    async def one(k: int) -> None:
        try:
            started.set()
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.01)  # a clean-up that takes a moment: the caller must wait for it
            cleaned.append(k)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_each, _Judge(), 2, one)
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught and sorted(cleaned) == [0, 1]
