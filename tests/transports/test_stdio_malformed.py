"""Over stdio, every line gets an answer. A real `judge-mcp serve` process is sent lines the SDK
cannot read: each gets a JSON-RPC error (the request's id when readable), and the server keeps serving."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from tests.helpers import INIT, ROOT, server_env


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
    # A client keeps stdin open until it has its replies (at EOF the session ends and drops requests in flight),
    # so stdin is closed only once the last request is answered.
    proc = subprocess.Popen(
        [sys.executable, "-m", "judge_mcp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    replies: list[dict] = []

    def read() -> None:
        for line in proc.stdout:
            if line.strip():
                replies.append(json.loads(line))
                if replies[-1].get("id") == 10:
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    reader.join(timeout=60)
    proc.stdin.close()
    proc.wait(timeout=30)
    by_id = {r.get("id"): r for r in replies if r.get("id") is not None}
    assert by_id[7]["error"]["code"] == -32602 and "lone surrogate" in by_id[7]["error"]["message"]
    assert by_id[8]["error"]["code"] == -32602 and "nested too deeply" in by_id[8]["error"]["message"]
    assert by_id[9]["error"]["code"] == -32600
    parse_errors = [r for r in replies if r.get("id") is None and "error" in r]
    assert [r["error"]["code"] for r in parse_errors] == [-32700, -32700]  # the non-JSON line and the bare nesting
    assert "compare_pair" in {t["name"] for t in by_id[10]["result"]["tools"]}  # still serving afterwards
    assert "result" in by_id[1]
