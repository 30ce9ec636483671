"""Issue 12, item 6: tool metadata an agent can act on, each bullet through the official MCP client: unknown
arguments named, limits in the input schema, readable type errors, truthful annotations, descriptions that say
when to use a tool and what it costs, `consistent: null` for one order, MCP prompts, resource-not-found."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from judge_mcp.server import split_options
from tests.judge_script import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge

JUDGING_TOOLS = ("compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge")


async def _error(client: Client, tool: str, arguments: dict) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, arguments)
    text = result.content[0].text
    assert "pydantic" not in text and "https://" not in text and "[type=" not in text, text  # no raw dumps
    return text


async def test_unknown_arguments_are_named(mcp_app) -> None:
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        text = await _error(client, "compare_pair", {**PAIR, "temprature": 0.5})
        both = await _error(client, "lwe_session_show", {"session": "s", "verbose": True, "x": 1})
    assert "unknown argument 'temprature'" in text and "compare_pair takes" in text and "response_a" in text
    assert "unknown arguments 'verbose', 'x'" in both
    assert backend.requests == []  # refused before any model call


async def test_limits_live_in_the_input_schema(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    for name, schema in tools.items():
        assert schema.get("additionalProperties") is False, name
    flip_props, grade_props = tools["infer_instruction_reward"]["properties"], tools["grade_score_options"]["properties"]
    assert (flip_props["responses"]["minItems"], flip_props["responses"]["maxItems"]) == (1, 16)
    assert flip_props["responses"]["items"]["maxLength"] == 50_000
    assert (grade_props["options"]["minItems"], grade_props["options"]["maxItems"]) == (2, 10)
    assert flip_props["prompt_variant"]["enum"] == [1, 2, 3] and grade_props["prompt_variant"]["enum"] == [1, 2, 3, 4]
    for tool in ("compare_pair", "lwe_judge"):
        for field in ("prompt", "response_a", "response_b"):
            assert tools[tool]["properties"][field]["maxLength"] == 50_000
    lwe_props = tools["lwe_judge"]["properties"]
    assert lwe_props["session"]["pattern"] == "^[A-Za-z0-9_.-]{1,64}$"
    assert (lwe_props["batch_size"]["minimum"], lwe_props["batch_size"]["maximum"]) == (1, 64)
    version = next(p for p in tools["lwe_session"]["properties"]["version"]["anyOf"] if p.get("type") == "integer")
    assert (version["minimum"], version["maximum"]) == (1, 2**31 - 1)


@pytest.mark.parametrize(
    "tool, arguments, expected",
    [
        ("infer_instruction_reward", {"instruction": "x", "responses": "just one string"}, "'responses' must be a list of strings, got str"),
        ("infer_instruction_reward", {"instruction": "x", "responses": ["ok", 7]}, "'responses[1]' must be a string, got 7"),
        ("infer_instruction_reward", {"instruction": "x", "responses": ["r"] * 17}, "'responses' must hold 1 to 16 items, got 17"),
        ("grade_score_options", {"instruction": "x", "options": ["only one"]}, "'options' must hold 2 to 10 items, got 1"),
        ("grade_score_options", {"instruction": "x", "options": ["a", "b"], "prompt_variant": 7}, "'prompt_variant' must be one of 1, 2, 3, 4; got 7"),
        ("compare_pair", {"prompt": "p", "response_a": "a"}, "'response_b' is required"),
        ("compare_pair", {**PAIR, "swap": "sometimes"}, "'swap' must be true, false or \"auto\", got 'sometimes'"),
        ("compare_pair", {**PAIR, "response_a": "x" * 50_001}, "'response_a' is 50,001 characters; the limit is 50,000"),
        ("lwe_judge", {**PAIR, "session": "default\n"}, "'session' must match ^[A-Za-z0-9_.-]{1,64}$"),
        ("lwe_judge", {**PAIR, "batch_size": 0}, "'batch_size' must be a whole number from 1 to 64, got 0"),
        ("lwe_session", {"action": "rollback", "session": "s", "version": 2**63}, f"'version' must be a whole number from 1 to {2**31 - 1}, got {2**63}"),
    ],
)
async def test_type_and_range_errors_read_like_the_methods_errors(mcp_app, tool: str, arguments: dict, expected: str) -> None:
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        text = await _error(client, tool, arguments)
    assert expected in text, text
    assert backend.requests == []


async def test_annotations_tell_the_truth(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    assert tools["lwe_judge"].idempotent_hint is False and tools["lwe_judge"].destructive_hint is False
    assert tools["compare_pair"].idempotent_hint is True and tools["compare_pair"].read_only_hint is False
    show, admin = tools["lwe_session_show"], tools["lwe_session"]
    assert show.read_only_hint is True and show.destructive_hint is False
    assert admin.destructive_hint is True and admin.read_only_hint is False


async def test_descriptions_say_when_to_use_and_the_cost(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        tools = {t.name: t.description for t in (await client.list_tools()).tools}
    costs = {"compare_pair": "2 backend calls", "infer_instruction_reward": "n backend calls", "grade_score_options": "n backend calls", "lwe_judge": "up to 9"}
    for name, description in tools.items():
        assert not any(line.startswith(" ") for line in description.splitlines()), name  # no docstring indentation
        assert "Use it" in description or "use lwe_session_show" in description or "Read-only" in description, name
    for name, cost in costs.items():
        assert "Cost:" in tools[name] and cost in tools[name], name
    assert "No backend calls" in tools["lwe_session"] and "No backend calls" in tools["lwe_session_show"]


async def test_one_order_is_neither_consistent_nor_inconsistent(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        one = await client.call_tool("compare_pair", {**PAIR, "swap": False})
        both = await client.call_tool("compare_pair", PAIR)
    assert one.structured_content["consistent"] is None and one.structured_content["winner"] == "B"
    assert both.structured_content["consistent"] is True


async def test_read_only_show_and_the_destructive_admin_agree(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        assert not (await client.call_tool("lwe_judge", {**PAIR, "session": "s"})).is_error
        shown = await client.call_tool("lwe_session_show", {"session": "s"})
        admin = await client.call_tool("lwe_session", {"action": "show", "session": "s"})
        missing = await _error(client, "lwe_session_show", {"session": "nope"})
    assert shown.structured_content == admin.structured_content
    assert "unknown session 'nope'" in missing


async def test_prompts_fill_the_matching_tool_call(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        assert client.server_capabilities.prompts is not None
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        drafts = await client.get_prompt("compare_drafts", {"task": "Write a haiku", "draft_a": "first draft", "draft_b": "second draft"})
        best = await client.get_prompt("pick_best", {"question": "Capital of Australia?", "options": "Sydney\nCanberra\n\nMelbourne"})
    assert {"compare_drafts", "pick_best"} <= set(listed)
    assert {a.name for a in listed["compare_drafts"].arguments} == {"task", "draft_a", "draft_b"}
    text = drafts.messages[0].content.text
    assert "compare_pair" in text and "first draft" in text and "second draft" in text and "Write a haiku" in text
    best_text = best.messages[0].content.text
    assert "grade_score_options" in best_text and '["Sydney", "Canberra", "Melbourne"]' in best_text


def test_pick_best_splits_options_by_line_or_by_separator() -> None:
    assert split_options("a\n\n b \n") == ["a", "b"]
    assert split_options("def f():\n    return 1\n---\ndef f():\n    return 2\n") == ["def f():\n    return 1", "def f():\n    return 2"]


async def test_an_unknown_session_resource_is_not_found(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        with pytest.raises(MCPError) as err:
            await client.read_resource("lwe://sessions/nope/meta-prompt")
    assert err.value.error.code == -32602  # resource not found (SEP-2164), not an internal error (-32603)
    assert "unknown session 'nope'" in err.value.error.message


async def test_valid_calls_still_work_for_every_judging_tool(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    calls = {
        "compare_pair": PAIR,
        "infer_instruction_reward": {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD], "prompt_variant": 2},
        "grade_score_options": {"instruction": CAPITAL_Q, "options": '["a", "b"]'},  # a JSON string, as some clients send
        "lwe_judge": {**PAIR, "session": "ok.session-1", "batch_size": 64},
    }
    async with Client(server) as client:
        for tool, arguments in calls.items():
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, (tool, result.content[0].text)
