"""prompts/get with a missing, an unknown or no such prompt answers invalid params (-32602) naming the problem, over
every transport, and logs no traceback (the SDK alone answered -32603, "Error rendering prompt", with one)."""

from __future__ import annotations

import logging

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from testkit.scripted_judges import UniversalJudge

DRAFTS = {"task": "Write a haiku", "draft_a": "first draft", "draft_b": "second draft"}


async def _error(client: Client, name: str, arguments: dict[str, str]) -> MCPError:
    with pytest.raises(MCPError) as err:
        await client.get_prompt(name, arguments)
    return err.value


async def test_bad_prompt_arguments_are_invalid_params_naming_them(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        missing = await _error(client, "compare_drafts", {"task": "Write a haiku", "draft_a": "first draft"})
        extra = await _error(client, "compare_drafts", {**DRAFTS, "colour": "red"})
        both = await _error(client, "pick_best", {"question": "Which?", "option": "a\nb"})
        unknown = await _error(client, "no_such_prompt", {})
        fine = await client.get_prompt("compare_drafts", DRAFTS)  # the connection still serves
    for err in (missing, extra, both, unknown):
        assert err.error.code == -32602, (err.error.code, err.error.message)
    assert "missing required argument 'draft_b'" in missing.error.message
    assert "it takes task, draft_a, draft_b, criteria (optional), reference (optional)" in missing.error.message
    assert "unknown argument 'colour'" in extra.error.message and "missing" not in extra.error.message
    assert "missing required argument 'options'" in both.error.message and "unknown argument 'option'" in both.error.message
    assert "unknown prompt 'no_such_prompt'" in unknown.error.message
    assert "second draft" in fine.messages[0].content.text


async def test_a_bad_prompt_call_logs_no_traceback(mcp_app, caplog) -> None:
    server, _ = mcp_app(UniversalJudge())
    with caplog.at_level(logging.DEBUG):
        async with Client(server) as client:
            err = await _error(client, "compare_drafts", {"task": "t"})
    assert err.error.code == -32602
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
