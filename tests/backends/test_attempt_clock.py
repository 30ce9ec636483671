"""One cancel scope per attempt (backends/deadline.py): the attempt's own limit and the HTTP phases' share it, and
what runs out is reported as the scope that ran out used to report it."""

from __future__ import annotations

import anyio
import pytest

from judge_mcp.backends.client import post_json
from judge_mcp.backends.deadline import BODY, FIRST_BYTE, AttemptClock
from judge_mcp.backends.errors import AttemptTimeout
from judge_mcp.backends.openai_compat import OpenAICompatBackend

from tests.backends.test_time_bounds import StallingServer, stalling  # noqa: F401  (the fixture)


async def test_a_phase_that_runs_out_is_named() -> None:
    with pytest.raises(AttemptTimeout, match="had not arrived whole 0.05s later"):
        with AttemptClock(10.0) as clock:
            clock.phase(BODY, 0.05)
            await anyio.sleep(2)


async def test_a_phase_given_back_leaves_the_attempts_own_limit() -> None:
    """A backend that posts again (a refused parameter dropped) must not inherit the last post's phase deadline."""
    with AttemptClock(10.0) as clock:
        clock.phase(FIRST_BYTE, 0.05)
        clock.end_phase()
        await anyio.sleep(0.2)  # leaving the block raises nothing
    assert not clock.scope.cancelled_caught


async def test_the_attempts_own_limit_wins_when_it_is_the_earlier() -> None:
    """A retry with little of the call's bound left: the attempt's limit is what ran out, a bare TimeoutError (which
    Backend._attempt reports as the call's bound), not the phase's."""
    with pytest.raises(TimeoutError) as raised:
        with AttemptClock(0.05) as clock:
            clock.phase(FIRST_BYTE, 5.0)
            await anyio.sleep(2)
    assert type(raised.value) is TimeoutError


async def test_post_json_outside_an_attempt_keeps_its_own_phase_clocks(stalling) -> None:  # noqa: F811
    backend = OpenAICompatBackend("stall", "m", base_url=stalling.base_url)
    try:
        with anyio.fail_after(10):
            with pytest.raises(AttemptTimeout, match="the reply started but had not arrived whole 0.3s later"):
                await post_json(backend.session(), f"{stalling.base_url}/chat/completions", {"model": "m"}, {}, first_byte_s=5.0, body_s=0.3)
    finally:
        await backend.aclose()
