"""Bounded retries with exponential backoff, full jitter and `Retry-After`.

A timed-out attempt is retried fewer times than a refused one (`max_timeout_retries`): a server that sent nothing
for a whole timeout is more likely hung than busy, and every retry of it costs another full timeout, where a 429 or
a 5xx comes back at once. A deadline, when given, bounds the whole loop: no wait or attempt starts past it."""

from __future__ import annotations

import datetime as _dt
from email.utils import parsedate_to_datetime

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from judge_mcp.backends.errors import RetryableError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3  # attempts = max_retries + 1
    max_timeout_retries: int = 1  # of those retries, how many may follow a timed-out attempt
    base_s: float = 0.5
    max_s: float = 20.0

    def delay(self, retry_no: int, retry_after: float | None = None) -> float:
        """Delay before retry number `retry_no` (1-based). A server's Retry-After wins, capped at max_s (a longer one
        is waited for in full within the call's deadline, else not retried at all: run_with_retries)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_s)
        ceiling = min(self.max_s, self.base_s * (2 ** (retry_no - 1)))
        return random.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


async def run_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[Exception, int, float], None] | None = None,
    deadline: Callable[[], float | None] = lambda: None,
) -> tuple[T, int]:
    """Run `fn` until it succeeds, raises a non-retryable error, or the attempts run out.

    Retryable: `RetryableError` and `TimeoutError` (a per-attempt timeout; at most `policy.max_timeout_retries` of
    them are retried). `deadline()`: the anyio clock time past which no retry starts (None: no deadline); a retry
    whose wait would end past it is not made, and the last error is raised, saying so. A server's `Retry-After` is
    waited for in full when it ends before the deadline, even past `policy.max_s` (a sooner retry would be refused
    again); one that does not, or any past `policy.max_s` without a deadline, is not waited for at all: the error is
    raised at once, saying what the server asked. Returns (result, attempts used).
    """
    attempt = timeouts = 0
    while True:
        attempt += 1
        try:
            return await fn(), attempt
        except (RetryableError, TimeoutError) as exc:
            timeouts += isinstance(exc, TimeoutError)
            if attempt > policy.max_retries or timeouts > policy.max_timeout_retries:
                raise
            asked = exc.retry_after if isinstance(exc, RetryableError) else None
            end = deadline()
            if isinstance(exc, RetryableError) and asked is not None and asked > policy.max_s:  # sooner would be refused again
                left = None if end is None else end - anyio.current_time()
                if left is None or asked >= left:
                    bound = (f"longer than the {policy.max_s:g}s a retry waits at most" if left is None
                             else f"past the call's time bound ({max(left, 0):.0f}s left)")
                    raise _not_retried(exc, f"the server asks to wait {asked:g}s, {bound}") from exc
                delay = asked  # within the call's bound: the whole wait, not a capped one refused again
            else:
                delay = policy.delay(attempt, asked)
            if end is not None and anyio.current_time() + delay >= end:
                if isinstance(exc, RetryableError):
                    raise _not_retried(exc, f"a wait of {round(delay, 2):g}s would end past the call's time bound") from exc
                raise
            if on_retry is not None:
                on_retry(exc, attempt, delay)
            await anyio.sleep(delay)


def _not_retried(exc: RetryableError, why: str) -> RetryableError:
    """The error that ends the retries early: `exc`, its cause saying why no retry was made."""
    return RetryableError(f"{exc.cause} (not retried: {why})", status=exc.status, retry_after=exc.retry_after)
