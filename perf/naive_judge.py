"""The naive judge judge-mcp is held to: an MCPServer written with the same SDK, one tool that sends the judged pair
to an OpenAI-compatible backend (at NAIVE_BASE_URL) in one chat completion, with httpx, the SDK's own HTTP client,
and returns the reply's text. What any judging server built on the SDK pays per call; no verdict log, no second
order, no parsing. perf/cold_start.py starts it over stdio, perf/call_cpu.py over stdio and streamable HTTP
(served as perf/noop_server.py serves the SDK floor: same SDK, same uvicorn settings).

    NAIVE_BASE_URL=http://127.0.0.1:PORT/v1 python perf/naive_judge.py stdio
    NAIVE_BASE_URL=http://127.0.0.1:PORT/v1 python perf/naive_judge.py http PORT
"""

import os
import sys

import anyio
import httpx
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="naive-judge", log_level="WARNING")
client = None


@server.tool()
async def judge(prompt: str, response_a: str, response_b: str) -> str:
    """Which response answers the prompt better, A or B."""
    global client
    if client is None:
        client = httpx.AsyncClient(timeout=60)
    content = f"Question: {prompt}\n\nResponse A: {response_a}\n\nResponse B: {response_b}\n\nWhich is better?"
    reply = await client.post(
        os.environ["NAIVE_BASE_URL"] + "/chat/completions",
        json={"model": "scripted", "messages": [{"role": "user", "content": content}]},
    )
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"]


async def _http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_http, int(sys.argv[2]))
