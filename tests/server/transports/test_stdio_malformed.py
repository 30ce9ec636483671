"""Over stdio, every line gets an answer. A real `judge-mcp serve` process is sent lines the SDK
cannot read: each gets a JSON-RPC error (the request's id when readable), and the server keeps serving."""

from __future__ import annotations

import json

from testkit.server_process import server_env
from tests.helpers import INIT, ROOT, stdio_exchange


def test_unreadable_lines_get_json_rpc_errors_and_the_server_keeps_serving(tmp_path):
    env = server_env("http://127.0.0.1:9/v1", tmp_path / "j.db", PYTHONPATH=str(ROOT))  # run from tmp_path: the checkout on the path
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
    replies = stdio_exchange(lines, env, tmp_path, lambda replies: replies[-1].get("id") == 10)
    by_id = {r.get("id"): r for r in replies if r.get("id") is not None}
    assert by_id[7]["error"]["code"] == -32602 and "lone surrogate" in by_id[7]["error"]["message"]
    assert by_id[8]["error"]["code"] == -32602 and "nested too deeply" in by_id[8]["error"]["message"]
    assert by_id[9]["error"]["code"] == -32600
    parse_errors = [r for r in replies if r.get("id") is None and "error" in r]
    assert [r["error"]["code"] for r in parse_errors] == [-32700, -32700]  # the non-JSON line and the bare nesting
    assert "compare_pair" in {t["name"] for t in by_id[10]["result"]["tools"]}  # still serving afterwards
    assert "result" in by_id[1]
