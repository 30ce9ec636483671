"""Every tool on reasoning judges, end to end (the official client -> the server -> the backend -> a scripted server
answering as each kind of reasoning model does, testkit/reasoning_servers.py): OpenAI's reasoning models (known up
front by name, or learned from their 400s once), Claude with extended thinking, an open-weight server with
`reasoning_content`, one with inline `<think>`. Reasoning is never the verdict nor a rationale; an answer cut off
after reasoning is unparsed, with a warning naming the reasoning tokens and the setting to raise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from testkit.reasoning_servers import REASONING_MARK, AnthropicThinker, InlineThink, OpenAIReasoner, ReasoningField
from testkit.scripted_judges import CAPITAL_Q, CASES, GOOD

ALL_CASES: dict[str, tuple[dict[str, Any], Any, Any]] = {
    **CASES,
    "score_response": ({"instruction": CAPITAL_Q, "response": GOOD, "criteria": [{"name": "correct"}]}, lambda d: d["overall"], 9.0),
}
KEY = {"JUDGE_MCP_API_KEY": "sk-test"}


async def call(server: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def no_reasoning_in(result: dict[str, Any]) -> None:
    """No rationale, explanation or label of the result holds the scripted reasoning."""
    assert REASONING_MARK not in json.dumps(result)


@pytest.mark.parametrize("tool", list(ALL_CASES))
async def test_a_known_reasoning_model_judges_every_tool_without_a_refused_request(mcp_app, tool: str) -> None:
    arguments, verdict, expected = ALL_CASES[tool]
    model = OpenAIReasoner()
    server, backend = mcp_app(model, JUDGE_MCP_MODEL="gpt-5-mini", **KEY)
    result = await call(server, tool, arguments)
    assert verdict(result) == expected
    assert model.refusals == 0 and model.answered == len(backend.requests)  # known up front: no round trip wasted
    for payload in backend.requests:
        assert "max_tokens" not in payload and "temperature" not in payload and "top_p" not in payload and "logprobs" not in payload
        assert payload["max_completion_tokens"] > 16384  # the method's answer budget + the default reasoning budget
    assert result["usage"]["reasoning_tokens"] == 600 * result["usage"]["calls"]
    warned = [w for w in result["warnings"] if "cannot honour temperature 0" in w]
    assert len(warned) == 1 and "gpt-5-mini" in warned[0]  # said once per result, however many calls


async def test_a_model_not_known_up_front_is_refused_once_then_every_tool_goes_through(mcp_app) -> None:
    model = OpenAIReasoner()
    server, backend = mcp_app(model, JUDGE_MCP_MODEL="acme-reasoner-1", **KEY)
    async with Client(server) as client:
        arguments, verdict, expected = ALL_CASES["compare_pair"]
        first = await client.call_tool("compare_pair", {**arguments, "swap": False})  # one call: each 400 exactly once
        assert not first.is_error and verdict(first.structured_content) == expected
        # max_tokens' 400, then temperature's, then logprobs' (compare_pair asks for token probabilities): once each
        assert model.refused == {"max_tokens": 1, "temperature": 1, "logprobs": 1} and len(backend.requests) == 4
        for tool, (arguments, verdict, expected) in ALL_CASES.items():
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text
            assert verdict(result.structured_content) == expected, tool
    # learned for this backend and model: never refused again, whatever tool
    assert model.refused == {"max_tokens": 1, "temperature": 1, "logprobs": 1}
    assert [("max_tokens" in p, "temperature" in p) for p in backend.requests[:3]] == [(True, True), (False, True), (False, False)]
    assert all("max_completion_tokens" in p and "temperature" not in p and "logprobs" not in p for p in backend.requests[3:])


async def test_the_first_call_records_what_it_dropped(mcp_app, tmp_path) -> None:
    from judge_mcp.storage.sqlite import SqliteEngine
    from judge_mcp.storage.verdict_log import VerdictLog

    server, _ = mcp_app(OpenAIReasoner(), JUDGE_MCP_MODEL="acme-reasoner-1", **KEY)
    arguments, _, _ = CASES["compare_pair"]
    await call(server, "compare_pair", {**arguments, "swap": False})
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        row = VerdictLog(store).recent("compare_pair", tenant="local")[0]
    finally:
        store.close()
    assert row["calls"][0]["dropped_parameters"] == ["max_tokens", "temperature", "logprobs"]
    assert row["usage"]["reasoning_tokens"] == 600


async def test_reasoning_that_eats_the_budget_is_unparsed_and_names_the_setting(mcp_app) -> None:
    model = OpenAIReasoner(reasoning_tokens=600)
    server, backend = mcp_app(model, JUDGE_MCP_MODEL="gpt-5-mini", JUDGE_MCP_REASONING_BUDGET_TOKENS="0", **KEY)
    arguments, _, _ = ALL_CASES["score_response"]
    result = await call(server, "score_response", arguments)
    assert result["overall"] is None and result["scores"][0]["samples"] == [None]  # never an empty verdict
    assert len(backend.requests) == 1  # not re-asked: the same budget would be spent the same way
    assert backend.requests[0]["max_completion_tokens"] == 512
    cut = [w for w in result["warnings"] if "token limit" in w]
    assert len(cut) == 1 and "512 reasoning tokens" in cut[0] and "reasoning_budget_tokens" in cut[0], result["warnings"]


async def test_the_default_reasoning_budget_leaves_the_answer_room(mcp_app) -> None:
    server, backend = mcp_app(OpenAIReasoner(reasoning_tokens=600), JUDGE_MCP_MODEL="o4-mini", **KEY)
    arguments, verdict, expected = ALL_CASES["score_response"]
    result = await call(server, "score_response", arguments)
    assert verdict(result) == expected and backend.requests[0]["max_completion_tokens"] == 512 + 16384


@pytest.mark.parametrize("tool", list(ALL_CASES))
async def test_claude_with_extended_thinking_judges_every_tool(mcp_app, tool: str) -> None:
    arguments, verdict, expected = ALL_CASES[tool]
    model = AnthropicThinker()
    server, backend = mcp_app(model, "anthropic", JUDGE_MCP_MODEL="claude-sonnet-4-5", JUDGE_MCP_THINKING_BUDGET_TOKENS="2048", **KEY)
    result = await call(server, tool, arguments)
    assert verdict(result) == expected and model.refused == 0
    for payload in backend.requests:
        assert payload["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert "temperature" not in payload and payload["max_tokens"] > 2048
    no_reasoning_in(result)
    assert any("cannot honour temperature 0 (extended thinking is on)" in w for w in result["warnings"])


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
@pytest.mark.parametrize("tool", ["compare_pair", "score_response", "infer_instruction_reward"])
async def test_an_open_weight_server_s_reasoning_field_is_never_the_verdict(mcp_app, tool: str, field: str) -> None:
    arguments, verdict, expected = ALL_CASES[tool]
    server, backend = mcp_app(ReasoningField(field), JUDGE_MCP_MODEL="qwen3-8b")
    async with Client(server) as client:
        first = await client.call_tool(tool, arguments)
        sent = len(backend.requests)
        again = await client.call_tool(tool, {**arguments, "response" if "response" in arguments else "prompt": GOOD + " Surely."}
                                       if tool != "infer_instruction_reward" else {**arguments, "responses": [*arguments["responses"], "Perth."]})
        assert len(backend.requests) > sent
    for result in (first.structured_content, again.structured_content):
        assert verdict(result) == expected
        no_reasoning_in(result)
    # a reply that carried reasoning marks the model as reasoning: the calls sent after it get the default budget
    assert backend.requests[0]["max_tokens"] < 16384 and all(p["max_tokens"] > 16384 for p in backend.requests[sent:])


@pytest.mark.parametrize("tool", list(ALL_CASES))
async def test_inline_think_holding_the_wrong_verdict_is_taken_out_before_parsing(mcp_app, tool: str) -> None:
    arguments, verdict, expected = ALL_CASES[tool]
    server, _ = mcp_app(InlineThink(), JUDGE_MCP_MODEL="deepseek-r1-distill", JUDGE_MCP_REASONING_BUDGET_TOKENS="2000")
    result = await call(server, tool, arguments)
    assert verdict(result) == expected
    no_reasoning_in(result)


async def test_an_inline_think_cut_off_is_unparsed_with_the_reason(mcp_app) -> None:
    arguments, _, _ = CASES["compare_pair"]
    server, backend = mcp_app(InlineThink(reasoning_tokens=5000), JUDGE_MCP_MODEL="deepseek-r1-distill", JUDGE_MCP_STRUCTURED_OUTPUT="off")
    result = await call(server, "compare_pair", {**arguments, "swap": False})
    assert result["winner"] is None and result["trials"][0]["parse_ok"] is False and result["trials"][0]["unparsed_reason"] == "truncated"
    assert REASONING_MARK not in result["trials"][0]["rationale"]
    assert len(backend.requests) == 1  # a text answer, yet neither continued nor re-asked
    assert any("characters of reasoning" in w and "JUDGE_MCP_REASONING_BUDGET_TOKENS" in w for w in result["warnings"]), result["warnings"]


async def test_a_reasoning_judge_over_every_transport(connect) -> None:
    """The official client over memory, stdio and streamable HTTP, on an OpenAI reasoning model not known up front."""
    model = OpenAIReasoner()
    arguments, verdict, expected = CASES["compare_pair"]
    async with connect(model, JUDGE_MCP_MODEL="acme-reasoner-2", JUDGE_MCP_REASONING_EFFORT="low", **KEY) as judged:
        result = await judged.client.call_tool("compare_pair", arguments)
        refused = sum(model.refused.values())
        again = await judged.client.call_tool("compare_pair", {**arguments, "prompt": arguments["prompt"] + " Briefly."})
        assert sum(model.refused.values()) == refused
    assert not result.is_error and not again.is_error, result.content[0].text
    assert verdict(result.structured_content) == expected == verdict(again.structured_content)
    # learned from the first judgment's 400s (its two orders may both have met them, in flight together), never again
    assert set(model.refused) == {"max_tokens", "temperature", "logprobs"} and all(1 <= n <= 2 for n in model.refused.values())
    assert all(p["reasoning_effort"] == "low" for p in judged.backend.requests)
    assert result.structured_content["usage"]["reasoning_tokens"] > 0
    row = judged.verdicts("compare_pair")[0]
    assert row["usage"]["reasoning_tokens"] == again.structured_content["usage"]["reasoning_tokens"]


async def test_an_answer_from_the_call_cache_keeps_its_warning_and_its_reasoning(mcp_app, tmp_path) -> None:
    from judge_mcp.storage.sqlite import SqliteEngine
    from judge_mcp.storage.verdict_log import VerdictLog

    server, backend = mcp_app(InlineThink(reasoning_tokens=2000), JUDGE_MCP_MODEL="o3-mini", **KEY)
    arguments, verdict, expected = CASES["compare_pair"]
    first = await call(server, "compare_pair", arguments)
    again = await call(server, "compare_pair", arguments)
    assert again["usage"]["cached_calls"] == 2 and len(backend.requests) == 2
    assert verdict(again) == expected and [w for w in again["warnings"] if "temperature" in w] == [w for w in first["warnings"] if "temperature" in w]
    store = SqliteEngine(tmp_path / "judge.db")
    try:
        rows = VerdictLog(store).recent("compare_pair", tenant="local")
    finally:
        store.close()
    for row in rows:  # the verdict log keeps the reasoning's start and its length, apart from the answer's text
        for record in row["calls"]:
            assert record["reasoning"].startswith(REASONING_MARK) and len(record["reasoning"]) <= 4001
            assert record["reasoning_chars"] > 4000 and REASONING_MARK not in record["text"]
