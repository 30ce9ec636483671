"""server/tools.py's front door, `invoke`: the MCP server's tools and the Python API both call it, so a tool call
gets the same checks, tenant, telemetry and settings' warnings whichever door it comes through."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from judge_mcp import Judge, JudgeError
from judge_mcp.storage.verdict_log import VerdictLog
from testkit.scripted_judges import PAIR, UniversalJudge
from tests.helpers import app_env

TYPO = "JUDGE_MCP_TIMEOUT is not a judge-mcp setting and is ignored (did you mean JUDGE_MCP_TIMEOUT_S?)"


async def test_both_doors_answer_alike_with_the_settings_warnings_in_results_and_errors(mcp_app, tmp_path: Path) -> None:
    """The same calls over MCP and through the Python API: the same verdict, the misspelt variable in its warnings;
    the same error messages (over MCP with the SDK's "Error executing tool" before them), each naming the variable
    too; both verdict rows the `local` tenant's."""
    server, backend = mcp_app(UniversalJudge(), JUDGE_MCP_TIMEOUT="5")
    bad = [{**PAIR, "swap": "sideways"}, {**PAIR, "backend": "nope"}]
    async with Client(server) as client:
        served = await client.call_tool("compare_pair", PAIR)
        refused = [(await client.call_tool("compare_pair", arguments)).content[0].text for arguments in bad]
    api_env = app_env(backend, tmp_path / "api.db", JUDGE_MCP_MAX_RETRIES="1", JUDGE_MCP_TIMEOUT="5")
    async with Judge(env=api_env) as judge:
        called = await judge.compare_pair(**PAIR)
        raised = []
        for arguments in bad:
            with pytest.raises(JudgeError) as error:
                await judge.compare_pair(**arguments)
            raised.append(str(error.value))
        api_rows = VerdictLog(judge.app.store).recent("compare_pair", tenant="local")
    assert served.structured_content["winner"] == called.winner == "B"
    assert [w for w in served.structured_content["warnings"] if TYPO in w] and [w for w in called.warnings if TYPO in w]
    assert refused == [f"Error executing tool compare_pair: {message}" for message in raised]
    assert all(TYPO in message for message in raised) and "swap" in raised[0] and "nope" in raised[1]
    assert len(VerdictLog(server.app.store).recent("compare_pair", tenant="local")) == len(api_rows) == 1
