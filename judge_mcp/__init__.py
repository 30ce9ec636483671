"""judge-mcp: an MCP server that gives coding agents and chat clients a judge they can call.

`from judge_mcp import Judge` gives the same tools as a Python API (judge_mcp/api.py), imported on first use so
that starting the server loads none of it twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge_mcp._version import __version__

__all__ = ["Judge", "JudgeError", "__version__"]

if TYPE_CHECKING:
    from judge_mcp.api import Judge, JudgeError


def __getattr__(name: str) -> Any:
    if name in ("Judge", "JudgeError"):
        # lazy: the Python API loads for `from judge_mcp import Judge`, never for the server
        from judge_mcp import api

        return getattr(api, name)
    raise AttributeError(f"module 'judge_mcp' has no attribute {name!r}")
