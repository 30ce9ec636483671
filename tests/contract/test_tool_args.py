"""The tools' argument models (judge_mcp/contract/args.py) as the server publishes and applies them: strict types over MCP
(a boolean is not a number, a number not a boolean), a value sent as JSON text in a string still read as that
value, each model the tool's input schema and what its method receives and logs, and a tool called alone."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from judge_mcp.server import tools
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.args import ComparePairArgs, InferInstructionRewardArgs, LweJudgeArgs
from judge_mcp.methods import registry
from judge_mcp.storage.verdict_log import VerdictLog
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge

FLIP = {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]}
GRADE = {"instruction": CAPITAL_Q, "options": [BAD, GOOD]}

# A boolean where a number is meant, a number where a boolean is meant: each refused, naming the argument.
CONFUSED = [
    ("compare_pair", {**PAIR, "max_tokens": True}, "'max_tokens' must be a whole number from 1 to 32768, got True"),
    ("compare_pair", {**PAIR, "swap": "auto", "swap_margin": True}, "'swap_margin' must be a number from 0 to 1, got True"),
    ("infer_instruction_reward", {**FLIP, "prompt_variant": True}, "'prompt_variant' must be one of 1, 2, 3; got True"),
    ("infer_instruction_reward", {**FLIP, "prompt_variant": 1.0}, "'prompt_variant' must be one of 1, 2, 3; got 1.0"),
    ("grade_score_options", {**GRADE, "prompt_variant": True}, "'prompt_variant' must be one of 1, 2, 3, 4; got True"),
    ("lwe_judge", {**PAIR, "batch_size": True}, "'batch_size' must be a whole number from 1 to 64, got True"),
    ("lwe_session", {"action": "rollback", "session": "s", "version": True}, "'version' must be a whole number from 1 to 2147483647, got True"),
    ("judge_stats", {"last": True}, "'last' must be a whole number from 1 to 1000000, got True"),
    ("compare_pair", {**PAIR, "swap": 0}, "'swap' must be true, false or \"auto\", got 0"),
    ("compare_pair", {**PAIR, "swap": 1}, "'swap' must be true, false or \"auto\", got 1"),
    ("lwe_judge", {**PAIR, "selective": 1}, "'selective' must be true or false, got 1"),
    ("grade_score_options", {**GRADE, "unrelated_option": 0}, "'unrelated_option' must be true or false, got 0"),
    ("compare_pair", {**PAIR, "response_models": ["a", "b"], "exclude_same_family": 1}, "'exclude_same_family' must be true or false, got 1"),
    ("compare_pair", {**PAIR, "max_tokens": "true"}, "'max_tokens' must be a whole number from 1 to 32768, got True"),  # decoded, then refused
]


@pytest.mark.parametrize("tool, arguments, message", CONFUSED, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(CONFUSED)])
async def test_a_boolean_is_not_a_number_nor_a_number_a_boolean(mcp_app, tool: str, arguments: dict, message: str) -> None:
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    assert message in result.content[0].text, result.content[0].text
    assert backend.requests == []


async def test_values_sent_as_json_text_are_read_as_those_values(mcp_app) -> None:
    """Some clients send every argument as a string: "2048", "false", '["..."]' still mean what they say, while judged
    text stays text however much it looks like JSON."""
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        pair = await client.call_tool("compare_pair", {**PAIR, "max_tokens": "2048", "swap": "false"})
        flip = await client.call_tool("infer_instruction_reward", {"instruction": "123", "responses": f'["{GOOD}"]', "prompt_variant": "2"})
    assert not pair.is_error and pair.structured_content["swapped"] is False
    assert [r["max_tokens"] for r in backend.requests[:1]] == [2048]
    assert not flip.is_error and flip.structured_content["prompt_variant"] == 2 and len(flip.structured_content["results"]) == 1
    logged = VerdictLog(server.app.store).recent("infer_instruction_reward", limit=1)[0]["inputs"]
    assert logged["instruction"] == "123"


async def test_each_input_schema_is_its_argument_model(mcp_app) -> None:
    server, _ = mcp_app(UniversalJudge())
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == [spec.name for spec in tools.TOOLS]
    for spec in tools.TOOLS:
        args, result = spec.models()
        assert args.tool == spec.name
        assert listed[spec.name].input_schema == args.input_schema()
        assert listed[spec.name].output_schema["properties"].keys() == result.model_json_schema()["properties"].keys()
        method = registry.METHODS.get(spec.name)
        if method is not None:  # a judging tool runs the registered method with the same models
            assert (method.args, method.result) == (args, result), spec.name


async def test_a_tool_runs_alone_and_logs_its_arguments(mcp_app) -> None:
    """A tool is a plain function of the App and its argument model; what the verdict log keeps is the model's
    `logged()`: the defaults filled in, the absent optional arguments left out."""
    server, backend = mcp_app(UniversalJudge())
    args = ComparePairArgs.parse(PAIR)
    result = await tools.compare_pair(server.app, args)
    assert result.winner == "B" and result.goal == "worse" and result.template == "sop" and len(backend.requests) == 2
    logged = VerdictLog(server.app.store).recent("compare_pair", limit=1)[0]["inputs"]
    assert logged == args.logged() == {**PAIR, "goal": "worse", "template": "sop", "swap": True, "exclude_same_family": False}
    with pytest.raises(ToolError, match="unknown backend 'nope'"):
        await tools.compare_pair(server.app, ComparePairArgs.parse({**PAIR, "backend": "nope"}))


def test_a_method_takes_its_model_or_the_models_fields_never_both() -> None:
    args = LweJudgeArgs.parse(PAIR)
    assert LweJudgeArgs.of(args, {}) is args
    assert LweJudgeArgs.of(None, PAIR) == args and args.batch_size == LweJudgeArgs.default("batch_size") == 4
    with pytest.raises(TypeError):
        LweJudgeArgs.of(args, {"session": "x"})
    with pytest.raises(TypeError):
        InferInstructionRewardArgs.of(args, {})  # another tool's model
    with pytest.raises(InputError, match="unknown argument 'learn'"):
        LweJudgeArgs.parse({**PAIR, "learn": False})  # a method option, not a tool argument
