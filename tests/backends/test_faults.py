"""Backend faults at the tool level, through the MCP client (in memory) against a scripted server on 127.0.0.1.

Every fault kind is tried twice: transient (each distinct request fails once, then is answered), where the tool must
end in the correct verdict with the retry visible in the verdict log; and persistent, where the tool must end in a
tool error naming the backend and the cause (or, for answers that arrive but cannot be read, an unparsed trial) within
its time bound. Either way the same server then answers the next call correctly.
"""

from __future__ import annotations

import re

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client

from testkit.scripted_judges import CASES, GOOD, PAIR, Faulty
from testkit.scripted_servers import Reply
from judge_mcp.storage.verdict_log import VerdictLog

TIMEOUT_S = 0.5
HANG_S = 3.0

# name -> (the faulty reply, substring of the tool error's cause; None: the answer arrives but cannot be read)
FAULTS: dict[str, tuple[Callable[[], Reply], str | None]] = {
    "429_retry_after": (lambda: Reply(status=429, headers={"retry-after": "0.2"}), "HTTP 429"),
    "429_no_retry_after": (lambda: Reply(status=429), "HTTP 429"),
    "500": (lambda: Reply(status=500), "HTTP 500"),
    "502": (lambda: Reply(status=502), "HTTP 502"),
    "503": (lambda: Reply(status=503), "HTTP 503"),
    "connection_reset": (lambda: Reply(drop=True), "connection error"),
    "hang_past_timeout": (lambda: Reply(content="late", delay_s=HANG_S), f"timed out after {TIMEOUT_S:g}s"),
    "truncated_json": (lambda: Reply(raw_body=b'{"id": "x", "choices": [{"index": 0, "message": {"content": "[[A'), "not JSON"),
    "invalid_json": (lambda: Reply(raw_body=b"<html><body>502 Bad Gateway</body></html>"), "not JSON"),
    "json_without_choices": (lambda: Reply(raw_body=b'{"object": "chat.completion"}'), "no choices"),
    "empty_content": (lambda: Reply(content=""), None),
    "cut_by_max_tokens": (lambda: Reply(content='{"own_answer": "Canberra is the capital and', finish_reason="length"), None),
}
BACKEND_FAULTS = [name for name, (_, cause) in FAULTS.items() if cause is not None]
ENV = {"JUDGE_MCP_TIMEOUT_S": str(TIMEOUT_S), "JUDGE_MCP_MAX_RETRIES": "1"}
# The tools and their known verdicts (CASES) and the fault wrapper (Faulty): testkit/scripted_judges.py.


def bound_s(attempts: int = 2) -> float:
    """The contract's bound: timeout_s per attempt, plus backoff (<= 0.5 s per retry here), plus slack for the
    re-ask and the machine (2 shared cores)."""
    return 2 * (TIMEOUT_S * attempts + 0.5 * (attempts - 1)) + 3.0


async def _call(client: Client, tool: str, arguments: dict) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    return result, time.perf_counter() - start


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_transient_fault_ends_in_the_correct_verdict(mcp_app, fault: str) -> None:
    make, _ = FAULTS[fault]
    faulty = Faulty(make, "once")
    server, backend = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, elapsed = await _call(client, "compare_pair", PAIR)
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data["winner"] == "B" and data["consistent"] is True
    assert faulty.faults == 2  # each order failed once
    assert elapsed < bound_s() + (HANG_S if fault == "hang_past_timeout" else 0)
    row = VerdictLog(server.app.store).recent("compare_pair")[0]
    if FAULTS[fault][1] is not None:  # a backend fault: retried, and the retry is in the verdict log
        assert data["usage"]["calls"] == 2 and all(t["reasked"] is False for t in data["trials"])
        assert all(call["attempts"] == 2 and len(call["retried_errors"]) == 1 for call in row["calls"])
    else:  # an answer that could not be read: re-asked once with the format reminder, then read
        assert all(t["reasked"] for t in data["trials"]) and data["usage"]["calls"] == 4


async def test_retry_after_header_is_waited_for_at_the_tool_level(mcp_app) -> None:
    faulty = Faulty(lambda: Reply(status=429, headers={"retry-after": "1"}), "once")
    server, _ = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, elapsed = await _call(client, "compare_pair", {**PAIR, "swap": False})
    assert not result.is_error and result.structured_content["winner"] == "B"
    assert elapsed >= 0.95  # the server asked for a second; jittered backoff alone would be <= 0.5 s
    retried = VerdictLog(server.app.store).recent("compare_pair")[0]["calls"][0]["retried_errors"]
    assert retried[0]["retry_in_s"] == 1.0 and "HTTP 429" in retried[0]["error"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_429_asking_for_an_hour_fails_at_once_naming_the_wait(mcp_app, kind: str) -> None:
    """Retry-After: 3600 at the default settings (timeout 120 s, 3 retries): the tool used to wait 20 s (the longest
    backoff) three times and ask again against the server's word, 60 s, then fail without saying what was asked."""
    faulty = Faulty(lambda: Reply(status=429, headers={"retry-after": "3600"}), "always")
    server, backend = mcp_app(faulty, kind, JUDGE_MCP_MAX_RETRIES="3")
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert result.is_error
    text = result.content[0].text
    assert "HTTP 429" in text and "not retried: the server asks to wait 3600s" in text, text
    # at most one request per order, none repeated early (the first failure may cancel the other order before it is sent)
    assert 1 <= len(backend.requests) == len({json.dumps(r, sort_keys=True) for r in backend.requests}) <= 2
    assert VerdictLog(server.app.store).recent("compare_pair") == []


async def test_an_openai_refusal_is_shown_in_the_unparsed_trial(mcp_app) -> None:
    """OpenAI's structured outputs put a refusal in `message.refusal` with `content: null`. The trial used to say
    parse_ok false with an empty rationale, the model's reason dropped; now the refusal is the trial's text."""
    refusal = "I'm sorry, I cannot help with comparing these answers."
    body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 5, "completion_tokens": 9},
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None, "refusal": refusal}}]})
    server, backend = mcp_app(lambda p: Reply(raw_body=body.encode()))
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", {**PAIR, "swap": False})
    assert not result.is_error
    data = result.structured_content
    [trial] = data["trials"]
    assert data["winner"] is None and trial["parse_ok"] is False and trial["reasked"] is True
    assert refusal in trial["rationale"], trial


@pytest.mark.parametrize("fault", BACKEND_FAULTS)
async def test_persistent_fault_is_a_clear_tool_error_and_the_server_keeps_serving(mcp_app, fault: str) -> None:
    make, cause = FAULTS[fault]
    faulty = Faulty(make, "always")
    server, backend = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, elapsed = await _call(client, "compare_pair", PAIR)
        assert result.is_error
        text = result.content[0].text
        assert re.search(r"backend 'default' \(openai at http://127\.0\.0\.1:\d+/v1, model [^)]+\) failed after 2 attempts", text) and cause in text, text
        assert elapsed < bound_s() + (HANG_S if fault == "hang_past_timeout" else 0)
        # The same server, the same session: the backend recovers and the next call is judged.
        faulty.mode = "never"
        after, _ = await _call(client, "compare_pair", PAIR)
    assert not after.is_error and after.structured_content["winner"] == "B"
    assert [r["output"]["winner"] for r in VerdictLog(server.app.store).recent("compare_pair")] == ["B"]  # failures log no verdict


@pytest.mark.parametrize("fault", ["empty_content", "cut_by_max_tokens"])
async def test_persistently_unreadable_answers_stay_unparsed_not_guessed(mcp_app, fault: str) -> None:
    faulty = Faulty(FAULTS[fault][0], "always")
    server, _ = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, _ = await _call(client, "compare_pair", PAIR)
        assert not result.is_error
        data = result.structured_content
        assert data["winner"] is None and data["consistent"] is False
        assert [t["parse_ok"] for t in data["trials"]] == [False, False] and all(t["reasked"] for t in data["trials"])
        faulty.mode = "never"
        after, _ = await _call(client, "compare_pair", PAIR)
        # A truncated answer is a real answer and is cached like any other (temperature 0 would repeat it); an empty
        # one is not cached, so the recovered backend is asked again.
        other, _ = await _call(client, "compare_pair", {**PAIR, "prompt": "Which city is Australia's capital?"})
    assert other.structured_content["winner"] == "B"
    if fault == "empty_content":
        assert after.structured_content["winner"] == "B" and after.structured_content["usage"]["cached_calls"] == 0
    else:
        assert after.structured_content["winner"] is None and after.structured_content["usage"]["cached_calls"] == 4


@pytest.mark.parametrize("tool", list(CASES))
@pytest.mark.parametrize("fault", ["503", "connection_reset", "truncated_json"])
async def test_every_tool_survives_a_transient_fault(mcp_app, tool: str, fault: str) -> None:
    arguments, verdict, expected = CASES[tool]
    faulty = Faulty(FAULTS[fault][0], "once")
    server, _ = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, _ = await _call(client, tool, arguments)
    assert not result.is_error, result.content[0].text
    assert verdict(result.structured_content) == expected
    assert faulty.faults >= 2


@pytest.mark.parametrize("tool", list(CASES))
@pytest.mark.parametrize("fault", ["503", "connection_reset", "hang_past_timeout", "invalid_json"])
async def test_every_tool_reports_a_persistent_fault_and_then_serves(mcp_app, tool: str, fault: str) -> None:
    arguments, verdict, expected = CASES[tool]
    make, cause = FAULTS[fault]
    faulty = Faulty(make, "always")
    server, _ = mcp_app(faulty, **ENV)
    async with Client(server) as client:
        result, elapsed = await _call(client, tool, arguments)
        assert result.is_error
        text = result.content[0].text
        assert "backend 'default'" in text and cause in text, text
        assert "internal error" not in text
        assert elapsed < bound_s() + (HANG_S if fault == "hang_past_timeout" else 0)
        faulty.mode = "never"
        after, _ = await _call(client, tool, arguments)
    assert not after.is_error, after.content[0].text
    assert verdict(after.structured_content) == expected


async def test_one_fatal_order_cancels_the_other_instead_of_hanging(mcp_app) -> None:
    """compare_pair runs both orders concurrently: a 400 on one order (not retried) must not leave the call waiting on
    the other order's slow answer."""

    def responder(payload: dict) -> Reply | str:
        text = payload["messages"][-1]["content"]
        first = text.split("<|The Start of Assistant A's Answer|>\n", 1)[1]
        if first.startswith(GOOD):  # the BA order
            return Reply(status=400)
        return Reply(content=json.dumps({"own_answer": "", "evaluation": "", "verdict": "[[B>A]]"}), delay_s=HANG_S)

    server, _ = mcp_app(responder, JUDGE_MCP_TIMEOUT_S="10", JUDGE_MCP_MAX_RETRIES="1")
    async with Client(server) as client:
        result, elapsed = await _call(client, "compare_pair", PAIR)
    assert result.is_error and "HTTP 400" in result.content[0].text and "backend 'default'" in result.content[0].text
    assert elapsed < HANG_S - 0.5
