"""The SDK floor for bench/perf.py: an MCPServer whose one tool does nothing, served over stdio or streamable HTTP
the same way judge-mcp is (same SDK, same uvicorn settings), so a tool call's cost beyond it is judge-mcp's own.

    python bench/noop_server.py stdio
    python bench/noop_server.py http PORT
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="noop", log_level="WARNING")


@server.tool()
async def noop(prompt: str) -> str:
    """Return the prompt unchanged."""
    return prompt


async def _http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_http, int(sys.argv[2]))
