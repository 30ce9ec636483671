"""Secrets: the backend key and the HTTP token never reach a log line or the database, and the HTTP transport turns
away every request without the exact bearer token.

A real `judge-mcp -v serve --transport http` (debug logging to stderr) runs with a key and a token configured, against
a scripted backend that fails in ways that tempt a leak (a 401 and a 500 whose bodies echo the key, a 200 whose
content echoes it) and then answers normally; every tool is called. Afterwards stderr, the database file, its WAL and
shared-memory files are searched for the key and the token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from testkit.scripted_servers import Reply, chat_body
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge
from testkit.server_process import HttpServer, server_env
from tests.helpers import ACCEPT, INIT, as_reply, token_client

KEY = "sk-live-SECRETKEY-4f7d2a9c81e0"
TOKEN = "http-token-SECRETTOKEN-9b3e55"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("compare_pair", PAIR),
    ("infer_instruction_reward", {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]}),
    ("grade_score_options", {"instruction": CAPITAL_Q, "options": [BAD, GOOD]}),
    ("lwe_judge", {**PAIR, "session": "secrets"}),
    ("lwe_session", {"action": "show", "session": "secrets"}),
]


class LeakyBackend:
    """Fails the first four requests with the key echoed back (401 body, 500 body, 200 content, 200 content
    JSON-escaped), then judges with the key echoed in a response header."""

    def __init__(self) -> None:
        self.judge = UniversalJudge()
        self.n = 0
        self.server = None  # set after start: the ScriptedServer (to read the key it was sent)

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        self.n += 1
        sent = self.server.headers[-1].get("authorization", "") if self.server else ""
        if self.n == 1:
            return Reply(status=401, raw_body=json.dumps({"error": {"message": f"Incorrect API key provided: {sent}"}}).encode())
        if self.n == 2:
            return Reply(status=500, raw_body=f"internal error while checking {sent}".encode())
        if self.n == 3:
            return Reply(content=f"your key was {sent}")
        if self.n == 4:  # a right verdict with the key echoed JSON-escaped: a raw-text search of the body misses it
            answer = json.loads(self.judge(payload))
            answer["evaluation"] = f"your key was {sent}"
            escaped = "".join(f"\\u{ord(c):04x}" for c in sent)
            return Reply(raw_body=json.dumps(chat_body(json.dumps(answer))).replace(sent, escaped).encode())
        reply = self.judge(payload)
        reply = as_reply(reply)
        reply.headers["x-echo-authorization"] = sent  # httpcore's debug log prints response headers
        return reply


def test_key_and_token_appear_in_no_log_line_and_no_database_file(scripted, tmp_path: Path) -> None:
    leaky = LeakyBackend()
    backend = scripted(leaky)
    leaky.server = backend
    db, log = tmp_path / "secrets.db", tmp_path / "stderr.log"
    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_API_KEY=KEY, JUDGE_MCP_HTTP_TOKEN=TOKEN), log=log, verbose=True)
    errors: list[str] = []
    results: dict[str, Any] = {}

    async def run() -> None:
        http, client = token_client(server.url, TOKEN)
        async with http, client:
            for _ in range(3):  # the leaky answers: each a tool error or an unparsed trial, never the key
                r = await client.call_tool("compare_pair", {**PAIR, "swap": False})
                if r.is_error:
                    errors.append(r.content[0].text)
                else:
                    results.setdefault("leaky", []).append(r.structured_content)
            for tool, args in CALLS:
                r = await client.call_tool(tool, args)
                assert not r.is_error, (tool, r.content[0].text)
                results[tool] = r.structured_content

    try:
        anyio.run(run)
    finally:
        server.stop()
    assert backend.headers[0]["authorization"] == f"Bearer {KEY}"  # the key was really sent...
    assert any("HTTP 401" in e for e in errors) and any("HTTP 500" in e for e in errors)
    assert all(KEY not in e for e in errors)  # ...but came back in no tool error
    assert all(KEY not in json.dumps(r) for r in results.values())
    assert results["compare_pair"]["winner"] == "B"

    text = log.read_text(errors="replace")
    assert "DEBUG" in text  # -v really logged at debug level
    for secret in (KEY, TOKEN):
        lines = [line for line in text.splitlines() if secret in line]
        assert lines == [], f"{secret!r} in the log: {lines[:3]}"
    files = sorted(tmp_path.glob("secrets.db*"))
    assert db in files
    for path in files:
        data = path.read_bytes()
        for secret in (KEY, TOKEN):
            assert secret.encode() not in data, (path.name, secret)
            assert secret.encode("utf-16-le") not in data
    # and the database does hold the calls: the search above looked at real content
    import sqlite3

    conn = sqlite3.connect(str(db))
    try:
        rows = conn.execute("SELECT calls FROM verdicts").fetchall()
        assert len(rows) >= len(CALLS) - 1
        assert "[redacted]" in " ".join(r[0] for r in rows)  # the echoed key was replaced, not just dropped
    finally:
        conn.close()


@pytest.fixture
def token_server(scripted, tmp_path: Path):
    backend = scripted(UniversalJudge())
    server = HttpServer(server_env(backend.base_url, tmp_path / "auth.db", JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_HTTP_TOKEN=TOKEN), log=tmp_path / "auth.log")
    yield server
    server.stop()




@pytest.mark.parametrize(
    "headers, where",
    [
        ({}, "missing"),
        ({"authorization": "Bearer wrong-token"}, "wrong"),
        ({"authorization": f"Bearer {TOKEN}x"}, "longer"),
        ({"authorization": f"Bearer {TOKEN[:-1]}"}, "prefix"),
        ({"authorization": f"Basic {TOKEN}"}, "other scheme"),
        ({"authorization": TOKEN}, "no scheme"),
        ({"authorization": "Bearer"}, "empty"),
        ({"x-api-key": TOKEN}, "other header"),
    ],
)
async def test_http_rejects_missing_or_wrong_tokens(token_server, headers: dict, where: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for method in ("POST", "GET", "DELETE"):
            r = await http.request(method, token_server.url, json=INIT if method == "POST" else None, headers={**ACCEPT, **headers})
            assert r.status_code == 401, (where, method, r.status_code)
            assert TOKEN not in r.text and "wrong-token" not in r.text
        r = await http.post(f"{token_server.url}?token={TOKEN}", json=INIT, headers=ACCEPT)
        assert r.status_code == 401  # a token in the URL is not accepted either
        ok = await http.post(token_server.url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    text = token_server.log_path.read_text(errors="replace")
    assert TOKEN not in text
