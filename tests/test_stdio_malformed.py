"""Issue 14, item 6: over stdio, every line gets an answer. A real `judge-mcp serve` process is sent lines the SDK
cannot read: each gets a JSON-RPC error (the request's id when readable), and the server keeps serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def test_unreadable_lines_get_json_rpc_errors_and_the_server_keeps_serving(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_DB=str(tmp_path / "j.db"), PYTHONPATH=str(ROOT))
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"compare_pair","arguments":{"prompt":"\\ud800"}}}',
        "this is not json",
        '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"compare_pair","arguments":{"prompt":' + deep + "}}}",
        deep,
        '{"jsonrpc":"2.0","id":9,"method":5}',
        json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "judge_mcp", "serve"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    by_id = {r.get("id"): r for r in replies if r.get("id") is not None}
    assert by_id[7]["error"]["code"] == -32602 and "lone surrogate" in by_id[7]["error"]["message"]
    assert by_id[8]["error"]["code"] == -32602 and "nested too deeply" in by_id[8]["error"]["message"]
    assert by_id[9]["error"]["code"] == -32600
    parse_errors = [r for r in replies if r.get("id") is None and "error" in r]
    assert [r["error"]["code"] for r in parse_errors] == [-32700, -32700]  # the non-JSON line and the bare nesting
    assert "compare_pair" in {t["name"] for t in by_id[10]["result"]["tools"]}  # still serving afterwards
    assert "result" in by_id[1]
