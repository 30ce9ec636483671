"""Every tool end to end on the Anthropic path: the official MCP client (over every transport) -> the server ->
AnthropicBackend -> a scripted Anthropic Messages server on 127.0.0.1 (real HTTP, real wire format); and its
overloaded (529) fault, retried once or reported (in memory: what happens behind the server)."""

from __future__ import annotations

import re

import json
from typing import Any

import pytest
from mcp import Client

from testkit.scripted_judges import CASES, Faulty, UniversalJudge
from testkit.scripted_servers import Reply

ANTHROPIC = {"JUDGE_MCP_MODEL": "claude-scripted", "JUDGE_MCP_API_KEY": "sk-ant-test", "JUDGE_MCP_TIMEOUT_S": "0.5", "JUDGE_MCP_MAX_RETRIES": "1"}


@pytest.fixture
def anthropic_app(mcp_app):
    """anthropic_app(responder) -> (MCPServer, scripted Anthropic server): mcp_app on the Messages wire format."""
    return lambda responder: mcp_app(responder, "anthropic", **ANTHROPIC)


@pytest.mark.parametrize("tool", list(CASES))
async def test_every_tool_over_the_anthropic_wire(connect, tool: str) -> None:
    arguments, verdict, expected = CASES[tool]
    async with connect(UniversalJudge(), "anthropic", **ANTHROPIC) as judged:
        result = await judged.client.call_tool(tool, arguments)
    backend = judged.backend
    assert not result.is_error, result.content[0].text
    assert verdict(result.structured_content) == expected
    assert result.structured_content["model"] == "anthropic/claude-scripted"
    assert backend.requests and all(p["model"] == "claude-scripted" for p in backend.requests)
    assert all(path.endswith("/v1/messages") for path in backend.paths)
    assert all(h.get("x-api-key") == "sk-ant-test" and h.get("anthropic-version") for h in backend.headers)
    # structured output goes as Anthropic's output_config, never as OpenAI's response_format
    assert not any("response_format" in p for p in backend.requests)
    assert any("output_config" in p for p in backend.requests)
    row = judged.verdicts(tool)[0]
    assert row["model"] == "anthropic/claude-scripted" and row["usage"]["calls"] == len(row["calls"]) - row["usage"]["cached_calls"]


def uncached(arguments: dict[str, Any]) -> dict[str, Any]:
    """The same case with a text changed that every model request carries (FLIP never shows the instruction, so
    a response is added there): nothing can come from the call cache."""
    if "responses" in arguments:
        return {**arguments, "responses": [*arguments["responses"], "Perth, I believe."]}
    if "prompt" in arguments:
        return {**arguments, "prompt": arguments["prompt"] + " Answer briefly."}
    return {**arguments, "instruction": arguments["instruction"] + " Answer briefly."}


@pytest.mark.parametrize("tool", list(CASES))
async def test_overloaded_529_is_retried_and_a_persistent_one_reported(anthropic_app, tool: str) -> None:
    arguments, verdict, expected = CASES[tool]
    faulty = Faulty(lambda: Reply(status=529), "once")
    server, _ = anthropic_app(faulty)
    async with Client(server) as client:
        ok = await client.call_tool(tool, arguments)
        assert not ok.is_error, ok.content[0].text
        assert verdict(ok.structured_content) == expected and faulty.faults >= 1
        faulty.mode = "always"
        failed = await client.call_tool(tool, uncached(arguments))
    assert failed.is_error
    text = failed.content[0].text
    assert re.search(r"backend 'default' \(anthropic at http://127\.0\.0\.1:\d+, model [^)]+\) failed after 2 attempts", text) and "HTTP 529" in text, text
    assert "sk-ant-test" not in json.dumps([c.model_dump() for c in failed.content])
