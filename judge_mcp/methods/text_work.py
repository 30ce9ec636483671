"""Text work on large inputs runs in a worker thread, not on the event loop.

Defusing, prompt building, answer parsing and similarity are linear in their text (tests/methods/test_linear_text.py),
but a call with several 50,000-character texts still spends tens of milliseconds on them; on the event loop that is
tens of milliseconds during which no other client's call, cache hit included, makes progress. Above OFF_LOOP_CHARS
characters of text the work goes to a worker thread (the loop keeps serving between the interpreter's thread
switches); below it the thread hop would cost more than the work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

from judge_mcp.contract import messages

T = TypeVar("T")

OFF_LOOP_CHARS = 16_000  # ~2 ms of defusing or parsing; the hop to a thread costs ~0.1 ms


async def run(fn: Callable[..., T], *args: Any, size: int, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, in a worker thread when `size` (the characters of text it reads) is OFF_LOOP_CHARS or
    more, else here."""
    if size < OFF_LOOP_CHARS:
        return fn(*args, **kwargs)
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def chars(*texts: Any) -> int:
    """The characters of text the judged values hold (strings, conversations and trajectories; None counts 0)."""
    return sum(messages.chars(t) for t in texts)
