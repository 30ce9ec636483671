"""Tool metadata an agent can act on, through the official MCP client over every transport (the `connect` fixture):
unknown arguments named, the input schema's limits the ones enforced, readable type errors, truthful annotations,
descriptions that say when to use a tool and what it costs, `consistent: null` for one order, MCP prompts,
resource-not-found, and the tools' own arguments (answer_order, max_tokens) reaching the model."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from judge_mcp.methods.lwe import initial_meta_prompt
from judge_mcp.server.build import split_options
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge

JUDGING_TOOLS = ("compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge")


async def _error(client: Client, tool: str, arguments: dict) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, arguments)
    text = result.content[0].text
    assert "pydantic" not in text and "https://" not in text and "[type=" not in text, text  # no raw dumps
    return text


async def test_unknown_arguments_are_named(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        text = await _error(client, "compare_pair", {**PAIR, "temprature": 0.5})
        both = await _error(client, "lwe_session_show", {"session": "s", "verbose": True, "x": 1})
    assert "unknown argument 'temprature'" in text and "compare_pair takes" in text and "response_a" in text
    assert "unknown arguments 'verbose', 'x'" in both
    assert judged.backend.requests == []  # refused before any model call


def _text(prop: dict) -> dict:
    """The string member of a text argument that also takes a conversation or trajectory (its `anyOf`)."""
    return next(p for p in prop.get("anyOf", [prop]) if p.get("type") == "string")


def _messages(prop: dict) -> dict:
    return next(p for p in prop["anyOf"] if p.get("type") == "array")


def _limit_cases(schemas: dict[str, dict]) -> list[tuple[str, str, dict, dict]]:
    """(tool, argument, arguments at the limit its input schema declares, arguments just past it), for every declared
    limit; a schema that lost a limit fails here (KeyError)."""
    flip, grade = schemas["infer_instruction_reward"]["properties"], schemas["grade_score_options"]["properties"]
    lwe = schemas["lwe_judge"]["properties"]
    version = schemas["lwe_session"]["properties"]["version"]
    session_max = int(re.fullmatch(r"\^\[[^\]]+\]\{1,(\d+)\}\$", lwe["session"]["pattern"]).group(1))

    def responses(n: int, **extra: Any) -> dict:
        return {"instruction": RIGHT_INSTRUCTION, "responses": [f"{GOOD} ({k})" for k in range(n)], **extra}

    def options(n: int, **extra: Any) -> dict:
        return {"instruction": CAPITAL_Q, "options": [f"{GOOD} ({k})" for k in range(n)], **extra}

    def one_text(n: int) -> dict:
        return {"instruction": RIGHT_INSTRUCTION, "responses": ["x" * n]}

    cases = [
        ("infer_instruction_reward", "responses", responses(flip["responses"]["maxItems"]), responses(flip["responses"]["maxItems"] + 1)),
        ("infer_instruction_reward", "responses", responses(flip["responses"]["minItems"]), responses(flip["responses"]["minItems"] - 1)),
        ("infer_instruction_reward", "responses[0]", one_text(_text(flip["responses"]["items"])["maxLength"]),
         one_text(_text(flip["responses"]["items"])["maxLength"] + 1)),
        ("infer_instruction_reward", "prompt_variant", responses(2, prompt_variant=max(flip["prompt_variant"]["enum"])),
         responses(2, prompt_variant=max(flip["prompt_variant"]["enum"]) + 1)),
        ("grade_score_options", "options", options(grade["options"]["maxItems"]), options(grade["options"]["maxItems"] + 1)),
        ("grade_score_options", "options", options(grade["options"]["minItems"]), options(grade["options"]["minItems"] - 1)),
        ("grade_score_options", "prompt_variant", options(2, prompt_variant=max(grade["prompt_variant"]["enum"])),
         options(2, prompt_variant=max(grade["prompt_variant"]["enum"]) + 1)),
        ("lwe_judge", "session", {**PAIR, "session": "s" * session_max}, {**PAIR, "session": "s" * (session_max + 1)}),
        ("lwe_judge", "batch_size", {**PAIR, "session": "b", "batch_size": lwe["batch_size"]["maximum"]},
         {**PAIR, "session": "b", "batch_size": lwe["batch_size"]["maximum"] + 1}),
        ("lwe_judge", "batch_size", {**PAIR, "session": "b", "batch_size": lwe["batch_size"]["minimum"]},
         {**PAIR, "session": "b", "batch_size": lwe["batch_size"]["minimum"] - 1}),
        ("lwe_session", "version", {"action": "rollback", "session": "s", "version": version["maximum"]},
         {"action": "rollback", "session": "s", "version": version["maximum"] + 1}),
        ("lwe_session", "version", {"action": "rollback", "session": "s", "version": version["minimum"]},
         {"action": "rollback", "session": "s", "version": version["minimum"] - 1}),
    ]
    for tool in ("compare_pair", "lwe_judge"):
        for field in ("prompt", "response_a", "response_b"):
            limit = _text(schemas[tool]["properties"][field])["maxLength"]
            extra = {"session": "texts"} if tool == "lwe_judge" else {}
            cases.append((tool, field, {**PAIR, **extra, field: "x" * limit}, {**PAIR, **extra, field: "x" * (limit + 1)}))
            messages = _messages(schemas[tool]["properties"][field])["maxItems"]  # a conversation's or trajectory's length
            turn = {"role": "user" if field == "prompt" else "assistant", "content": "x"}
            cases.append((tool, field, {**PAIR, **extra, field: [turn] * messages}, {**PAIR, **extra, field: [turn] * (messages + 1)}))
    return cases


async def test_the_limits_in_the_input_schema_are_the_ones_enforced(connect) -> None:
    """Every limit a tool's input schema declares is where the tool starts refusing: at the limit the call is not
    refused for that argument, one past it the call is a tool error naming the argument; and every tool refuses an
    argument its schema does not list (additionalProperties false)."""
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        unknown = {name: await client.call_tool(name, {"not_an_argument": 1}) for name in schemas}
        outcomes = [(tool, name, await client.call_tool(tool, at), await client.call_tool(tool, past))
                    for tool, name, at, past in _limit_cases(schemas)]
    for name, schema in schemas.items():
        assert schema.get("additionalProperties") is False, name
        assert unknown[name].is_error and "unknown argument 'not_an_argument'" in unknown[name].content[0].text, name
    for tool, name, at, past in outcomes:
        at_text, past_text = at.content[0].text, past.content[0].text
        assert not (at.is_error and f"'{name}'" in at_text), (tool, name, at_text[:300])
        assert past.is_error and f"'{name}'" in past_text, (tool, name, past_text[:300])


TYPE_AND_RANGE_ERRORS = [
        ("infer_instruction_reward", {"instruction": "x", "responses": "just one string"}, "'responses' must be a list of strings or trajectories (lists of messages), got str"),
        ("infer_instruction_reward", {"instruction": "x", "responses": ["ok", 7]}, "'responses[1]' must be a string or a trajectory (a list of messages), got 7"),
        ("infer_instruction_reward", {"instruction": "x", "responses": ["r"] * 17}, "'responses' must hold 1 to 16 items, got 17"),
        ("grade_score_options", {"instruction": "x", "options": ["only one"]}, "'options' must hold 2 to 10 items, got 1"),
        ("grade_score_options", {"instruction": "x", "options": ["a", "b"], "prompt_variant": 7}, "'prompt_variant' must be one of 1, 2, 3, 4; got 7"),
        ("compare_pair", {"prompt": "p", "response_a": "a"}, "'response_b' is required"),
        ("compare_pair", {**PAIR, "swap": "sometimes"}, "'swap' must be true, false or \"auto\", got 'sometimes'"),
        ("compare_pair", {**PAIR, "response_a": "x" * 50_001}, "'response_a' is 50,001 characters; the limit is 50,000"),
        ("lwe_judge", {**PAIR, "session": "default\n"}, "'session' must match ^[A-Za-z0-9_.-]{1,64}$"),
        ("lwe_judge", {**PAIR, "batch_size": 0}, "'batch_size' must be a whole number from 1 to 64, got 0"),
        ("lwe_session", {"action": "rollback", "session": "s", "version": 2**63}, f"'version' must be a whole number from 1 to {2**31 - 1}, got {2**63}"),
]


async def test_type_and_range_errors_read_like_the_methods_errors(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        texts = [(expected, await _error(judged.client, tool, arguments)) for tool, arguments, expected in TYPE_AND_RANGE_ERRORS]
    for expected, text in texts:
        assert expected in text, (expected, text)
    assert judged.backend.requests == []


async def test_annotations_tell_the_truth(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    assert tools["lwe_judge"].idempotent_hint is False and tools["lwe_judge"].destructive_hint is False
    assert tools["compare_pair"].idempotent_hint is True and tools["compare_pair"].read_only_hint is False
    show, admin = tools["lwe_session_show"], tools["lwe_session"]
    assert show.read_only_hint is True and show.destructive_hint is False
    assert admin.destructive_hint is True and admin.read_only_hint is False


async def test_descriptions_say_when_to_use_and_the_cost(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        tools = {t.name: t.description for t in (await client.list_tools()).tools}
    costs = {"compare_pair": "2 backend calls", "infer_instruction_reward": "n backend calls", "grade_score_options": "n backend calls", "lwe_judge": "up to 9",
             "score_response": "criteria x samples backend calls"}
    for name, description in tools.items():
        assert not any(line.startswith(" ") for line in description.splitlines()), name  # no docstring indentation
        assert "Use it" in description or "use lwe_session_show" in description or "Read-only" in description, name
    for name, cost in costs.items():
        assert "Cost:" in tools[name] and cost in tools[name], name
    assert "No backend calls" in tools["lwe_session"] and "No backend calls" in tools["lwe_session_show"]


async def test_one_order_is_consistent_when_it_parsed_as_the_contract_says(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        one = await client.call_tool("compare_pair", {**PAIR, "swap": False})
        both = await client.call_tool("compare_pair", PAIR)
    assert one.structured_content["consistent"] is True and one.structured_content["winner"] == "B"
    assert one.structured_content["swapped"] is False and len(one.structured_content["trials"]) == 1
    assert both.structured_content["consistent"] is True


async def test_read_only_show_and_the_destructive_admin_agree(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        assert not (await client.call_tool("lwe_judge", {**PAIR, "session": "s"})).is_error
        shown = await client.call_tool("lwe_session_show", {"session": "s"})
        admin = await client.call_tool("lwe_session", {"action": "show", "session": "s"})
        missing = await _error(client, "lwe_session_show", {"session": "nope"})
    assert shown.structured_content == admin.structured_content
    assert "unknown session 'nope'" in missing


async def test_prompts_fill_the_matching_tool_call(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        assert client.server_capabilities.prompts is not None
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        drafts = await client.get_prompt("compare_drafts", {"task": "Write a haiku", "draft_a": "first draft", "draft_b": "second draft"})
        best = await client.get_prompt("pick_best", {"question": "Capital of Australia?", "options": "Sydney\nCanberra\n\nMelbourne"})
    assert {"compare_drafts", "pick_best"} <= set(listed)
    assert {a.name for a in listed["compare_drafts"].arguments if a.required} == {"task", "draft_a", "draft_b"}
    assert {a.name for a in listed["pick_best"].arguments if not a.required} == {"criteria", "reference"}
    text = drafts.messages[0].content.text
    assert "compare_pair" in text and "first draft" in text and "second draft" in text and "Write a haiku" in text
    assert "criteria" not in text and "reference" not in text  # neither given: the prompt says nothing of them
    best_text = best.messages[0].content.text
    assert "grade_score_options" in best_text and '["Sydney", "Canberra", "Melbourne"]' in best_text


def test_pick_best_splits_options_by_line_or_by_separator() -> None:
    assert split_options("a\n\n b \n") == ["a", "b"]
    assert split_options("def f():\n    return 1\n---\ndef f():\n    return 2\n") == ["def f():\n    return 1", "def f():\n    return 2"]


async def test_an_unknown_session_resource_is_not_found(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        with pytest.raises(MCPError) as err:
            await client.read_resource("lwe://sessions/nope/meta-prompt")
    assert err.value.error.code == -32602  # resource not found (SEP-2164), not an internal error (-32603)
    assert "unknown session 'nope'" in err.value.error.message


async def test_every_valid_session_name_has_its_resources(connect) -> None:
    """".." matches the session pattern ([A-Za-z0-9_.-]{1,64}) and lwe_judge makes the session, but the SDK's path-traversal
    check refused its resources as "Unknown resource"; a name that fails the pattern is still not found, naming it."""
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        for name in ("..", "...", "."):
            made = await client.call_tool("lwe_judge", {**PAIR, "session": name})
            assert not made.is_error and made.structured_content["session"] == name
            meta = (await client.read_resource(f"lwe://sessions/{name}/meta-prompt")).contents[0].text
            history = json.loads((await client.read_resource(f"lwe://sessions/{name}/history")).contents[0].text)
            assert meta == initial_meta_prompt() and [v["reason"] for v in history] == ["initial"]
        with pytest.raises(MCPError) as err:
            await client.read_resource("lwe://sessions/a%2F..%2Fb/history")
    assert err.value.error.code == -32602 and "'session' must match" in err.value.error.message


async def test_valid_calls_still_work_for_every_judging_tool(connect) -> None:
    calls = {
        "compare_pair": PAIR,
        "infer_instruction_reward": {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD], "prompt_variant": 2},
        "grade_score_options": {"instruction": CAPITAL_Q, "options": '["a", "b"]'},  # a JSON string, as some clients send
        "lwe_judge": {**PAIR, "session": "ok.session-1", "batch_size": 64},
        "score_response": {"instruction": CAPITAL_Q, "response": GOOD, "criteria": [{"name": "correct"}], "scale": "[1, 5]"},
    }
    async with connect(UniversalJudge()) as judged:
        for tool, arguments in calls.items():
            result = await judged.client.call_tool(tool, arguments)
            assert not result.is_error, (tool, result.content[0].text)


async def test_tools_take_answer_order_and_max_tokens(connect) -> None:
    def responder(payload):
        if "pairwise_verdict" in json.dumps(payload.get("response_format", {})):
            return json.dumps({"own_answer": "o", "evaluation": "e", "verdict": "[[A>B]]"})
        return json.dumps({"INFERRED INSTRUCTION": "Write a poem.", "REASONING": "r"})

    async with connect(responder) as judged:
        client = judged.client
        flip_out = await client.call_tool(
            "infer_instruction_reward", {"instruction": "Write a poem.", "responses": ["roses"], "answer_order": "instruction_first"}
        )
        pair_out = await client.call_tool("compare_pair", {"prompt": "Q", "response_a": "a", "response_b": "b", "max_tokens": 900})
        bad = await client.call_tool("compare_pair", {"prompt": "Q", "response_a": "a", "response_b": "b", "max_tokens": 0})
    assert flip_out.structured_content["answer_order"] == "instruction_first"
    assert [t["parse_ok"] for t in pair_out.structured_content["trials"]] == [True, True]
    assert {r["max_tokens"] for r in judged.backend.requests if "pairwise_verdict" in json.dumps(r.get("response_format", {}))} == {900}
    assert bad.is_error and "max_tokens" in str(bad.content[0].text)
