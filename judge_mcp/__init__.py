"""judge-mcp: an MCP server that gives coding agents and chat clients a judge they can call.

`from judge_mcp import Judge` gives the same tools as a Python API (judge_mcp/api.py), imported on first use so
that starting the server loads none of it twice. `Message` and `ToolCall` (judge_mcp/contract/messages.py) build the
conversations and trajectories the tools take (plain dicts work as well).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge_mcp._version import __version__

__all__ = ["Judge", "JudgeError", "Message", "ToolCall", "__version__"]

if TYPE_CHECKING:
    from judge_mcp.api import Judge, JudgeError
    from judge_mcp.contract.messages import Message, ToolCall


def __getattr__(name: str) -> Any:
    if name in ("Judge", "JudgeError"):
        # lazy: the Python API loads for `from judge_mcp import Judge`, never for the server
        from judge_mcp import api

        return getattr(api, name)
    if name in ("Message", "ToolCall"):
        # lazy: the message models load for `from judge_mcp import Message`, never for the server
        from judge_mcp.contract import messages

        return getattr(messages, name)
    raise AttributeError(f"module 'judge_mcp' has no attribute {name!r}")
