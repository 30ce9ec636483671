"""The `Mcp-Param-*` header check of streamable HTTP (mcp.shared.inbound.validate_mcp_param_headers) is skipped for a
tool whose input schema declares no `x-mcp-header` (JudgeServer._tool_input_schema), where its answer could only be
"no mismatch", and kept for one that declares one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from mcp.shared.inbound import validate_mcp_param_headers
from pydantic import Field

from judge_mcp.server.build import build_server
from tests.helpers import make_app

HEADERS = {"mcp-param-region": "eu", "mcp-param-prompt": "other", "content-type": "application/json"}


def _server(tmp_path: Path):
    return build_server(make_app({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:9/v1",
                                  "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": str(tmp_path / "j.db")}))


def test_no_tool_of_ours_has_a_schema_to_check_and_the_check_would_pass_anyway(tmp_path: Path):
    server = _server(tmp_path)
    tools = server._tool_manager.list_tools()
    assert len(tools) >= 8
    for tool in tools:
        assert server._tool_input_schema(tool.name) is None, tool.name
        # what skipping stands for: the SDK's check of the full schema finds no mismatch, whatever the headers say
        assert validate_mcp_param_headers(tool.parameters, {"prompt": "q", "region": "us"}, HEADERS) is None, tool.name
    assert server._tool_input_schema("no_such_tool") is None


def test_a_tool_that_declares_a_header_keeps_its_check(tmp_path: Path):
    server = _server(tmp_path)

    @server.tool()
    def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Answer from a region."""
        return region

    schema = server._tool_input_schema("routed")
    assert schema is not None and schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert server._tool_input_schema("routed") is schema  # found once, then from memory
    assert validate_mcp_param_headers(schema, {"region": "us"}, HEADERS) is not None  # eu in the header, us in the body
    assert validate_mcp_param_headers(schema, {"region": "eu"}, HEADERS) is None
