"""The SDK floor for perf/ratios.py: an MCPServer whose tools do nothing, served over stdio or streamable HTTP the
same way judge-mcp is (same SDK, same uvicorn settings), so a tool call's cost beyond it is judge-mcp's own.

`noop` takes and returns a string. `shaped` has compare_pair's arguments and output model and returns a fixed
result without calling anything: what the SDK spends on a tool of that shape (argument validation, the output
model's JSON and structured content), which a do-nothing string tool does not show.

    python perf/noop_server.py stdio
    python perf/noop_server.py http PORT
"""

from __future__ import annotations

import sys
from typing import Literal

import anyio

from mcp.server.mcpserver import MCPServer

from judge_mcp.contract.results import ComparePairResult, PairTrial, UsageOut

server = MCPServer(name="noop", log_level="WARNING")


@server.tool()
async def noop(prompt: str) -> str:
    """Return the prompt unchanged."""
    return prompt


TRIAL = dict(label="[[A>B]]", rationale="own answer\n\nevaluation", parse_ok=True)
RESULT = ComparePairResult(
    model="openai/scripted-model", usage=UsageOut(calls=2, prompt_tokens=20, completion_tokens=10, latency_ms=2.0), winner=None,
    consistent=False, trials=[PairTrial(order="AB", better="A", **TRIAL), PairTrial(order="BA", better="B", **TRIAL)], goal="worse", template="sop",
)


@server.tool()
async def shaped(
    prompt: str, response_a: str, response_b: str, goal: Literal["worse", "better"] = "worse", template: Literal["sop", "cot", "direct"] = "sop",
    swap: bool = True, max_tokens: int | None = None, backend: str | None = None,
) -> ComparePairResult:
    """compare_pair's arguments and output model; returns a fixed result."""
    return RESULT


async def _http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_http, int(sys.argv[2]))
