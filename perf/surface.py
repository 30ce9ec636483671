"""What an agent pays to connect: the bytes of judge-mcp's `tools/list` answer, per tool (input schema, output
schema, description, the whole tool entry) and in total, with the approximate tokens (bytes / 4), beside a naive
one-tool judge's (an MCPServer with one `judge(prompt, response_a, response_b) -> str` tool, as in
perf/cold_start.py).

    .venv/bin/python -m perf.surface [--base OLD_CHECKOUT]

The bytes are the result's compact JSON as the SDK sends it (`model_dump(by_alias=True, mode="json",
exclude_none=True)`, mcp/server/runner.py; UTF-8, non-ASCII unescaped, as the stdio and HTTP transports write it),
without the JSON-RPC envelope. The server is the real one (build_server) on a temporary database; nothing is called.
`--base` measures another checkout's judge-mcp the same way (its package first on PYTHONPATH, in a child process)
and prints it in a column beside this one's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ListToolsResult

ROOT = Path(__file__).resolve().parents[1]


def wire_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def listed(server: MCPServer) -> dict[str, Any]:
    """The tools/list result as the server sends it."""
    return ListToolsResult(tools=await server.list_tools()).model_dump(by_alias=True, mode="json", exclude_none=True)


def naive_judge() -> MCPServer:
    server = MCPServer(name="naive-judge")

    @server.tool()
    async def judge(prompt: str, response_a: str, response_b: str) -> str:
        """Which response answers the prompt better, A or B."""
        return "A"

    return server


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """Per tool: its input schema, output schema, description and whole entry in bytes; and the whole result."""
    tools = {
        t["name"]: {"input": wire_bytes(t.get("inputSchema")), "output": wire_bytes(t.get("outputSchema", {})),
                    "description": len(t.get("description", "").encode()), "tool": wire_bytes(t)}
        for t in result["tools"]
    }
    return {"tools": tools, "total": wire_bytes(result)}


async def measure() -> dict[str, Any]:
    from judge_mcp.runtime.app import App
    from judge_mcp.config.settings import load_settings
    from judge_mcp.server.build import build_server

    with tempfile.TemporaryDirectory() as tmp:
        app = App(load_settings({"JUDGE_MCP_DB": str(Path(tmp) / "judge.db")}))
        try:
            judge = figures(await listed(build_server(app)))
        finally:
            await app.aclose()
    return {"judge-mcp": judge, "naive": figures(await listed(naive_judge()))}


def measure_base(checkout: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, __file__, "--json"], env=env, cwd=checkout, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _parts(label: str, figures: dict[str, Any]) -> str:
    """The input schemas', output schemas' and descriptions' bytes summed over the tools."""
    total = {part: sum(f[part] for f in figures["tools"].values()) for part in ("input", "output", "description")}
    return f"{label:<26}{total['input']:>8,}{total['output']:>8,}{total['description']:>8,}"


def report(now: dict[str, Any], base: dict[str, Any] | None) -> str:
    judge, naive = now["judge-mcp"], now["naive"]
    lines = [f"{'tool':<26}{'input':>8}{'output':>8}{'descr':>8}{'tool':>8}{'~tokens':>9}" + (f"{'base tool':>11}" if base else "")]
    for name, f in judge["tools"].items():
        old = (base or {}).get("judge-mcp", {}).get("tools", {}).get(name, {}).get("tool")
        lines.append(f"{name:<26}{f['input']:>8,}{f['output']:>8,}{f['description']:>8,}{f['tool']:>8,}{f['tool'] // 4:>9,}"
                     + (f"{old:>11,}" if base and old else f"{'-':>11}" if base else ""))
    n = len(judge["tools"])
    lines.append(_parts("all tools", judge) + (f"   base: {_parts('', base['judge-mcp']).strip()}" if base else ""))
    lines.append("")
    lines.append(f"judge-mcp tools/list: {judge['total']:,} bytes (~{judge['total'] // 4:,} tokens) for {n} tools, "
                 f"{judge['total'] // max(n, 1):,} per tool")
    if base:
        old = base["judge-mcp"]
        lines.append(f"base      tools/list: {old['total']:,} bytes (~{old['total'] // 4:,} tokens) for {len(old['tools'])} tools; "
                     f"now {judge['total'] / old['total']:.2f}x of it")
    lines.append(f"naive one-tool judge:  {naive['total']:,} bytes (~{naive['total'] // 4:,} tokens); judge-mcp per tool is "
                 f"{judge['total'] / max(n, 1) / naive['total']:.1f}x it")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="another checkout of judge-mcp to measure beside this one")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (what --base reads)")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(anyio.run(measure)))
        return
    base = measure_base(args.base.resolve()) if args.base else None
    print(report(anyio.run(measure), base))


if __name__ == "__main__":
    main()
