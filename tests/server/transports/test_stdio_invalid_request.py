"""Over stdio, JSON that is not a JSON-RPC request gets an Invalid Request error (-32600) with a null id, as JSON-RPC
2.0 requires, instead of no reply: `{}`, `[]`, `42`, a batch, an id that is an object, `1.5`, `true` or `null`. A
notification (a method, no id) is never answered. Sent to a real `judge-mcp serve` process."""

from __future__ import annotations

import json

from testkit.server_process import server_env
from tests.helpers import INIT, ROOT, stdio_exchange

BAD_LINES = [
    "{}",
    "[]",
    "42",
    '"tools/list"',
    "null",
    json.dumps([{"jsonrpc": "2.0", "id": 20, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 21, "method": "ping"}]),
    json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}),
    json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}),
    json.dumps({"jsonrpc": "2.0", "id": True, "method": "tools/list"}),
    json.dumps({"jsonrpc": "2.0", "id": None, "method": "tools/list"}),
    json.dumps({"jsonrpc": "2.0", "result": {}}),
]


def test_json_that_is_not_a_request_gets_invalid_request_with_a_null_id(tmp_path):
    env = server_env("http://127.0.0.1:9/v1", tmp_path / "j.db", PYTHONPATH=str(ROOT))
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        *BAD_LINES,
        json.dumps({"jsonrpc": "2.0", "method": "no/such/notification", "params": 5}),  # a notification: no reply
        json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}),
    ]

    def done(replies: list[dict]) -> bool:
        return sum(1 for r in replies if r.get("id") is None) >= len(BAD_LINES) and any(r.get("id") == 10 for r in replies)

    replies = stdio_exchange(lines, env, tmp_path, done)
    errors = [r for r in replies if r.get("id") is None]
    assert len(errors) == len(BAD_LINES), replies
    assert all(r["jsonrpc"] == "2.0" and r["error"]["code"] == -32600 and "Invalid Request" in r["error"]["message"] for r in errors)
    messages = " | ".join(r["error"]["message"] for r in errors)
    assert "batch" in messages and "got 1.5" in messages and 'got {"a": 1}' in messages
    assert {r.get("id") for r in replies} == {1, None, 10}  # the initialize reply, the errors, tools/list; nothing else
    assert "compare_pair" in {t["name"] for t in next(r for r in replies if r.get("id") == 10)["result"]["tools"]}
