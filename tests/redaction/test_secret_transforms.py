"""Credentials in the forms an echo takes: base64(`user:KEY`) (the Basic credential sent for a base URL with
userinfo), the key in base64, hex, reversed, split across lines. A real `judge-mcp -v serve --transport http` talks
to a backend whose URL holds `judge:KEY@`, and the backend echoes the credential it got in an error body (the tool
error), in its answers (the database rows) and in a response header (the -v log). None of the forms reaches a
client, a database file or stderr. A base URL with a password that is not an http(s) URL, or that does not parse,
is a configuration error that shows no password and no traceback."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.redaction import REDACTED, redact
from testkit.server_process import HttpServer, clean_env, free_port, server_env
from tests.helpers import ROOT, as_reply, token_client
from testkit.scripted_judges import PAIR, UniversalJudge
from testkit.scripted_servers import Reply

USER, KEY = "judge", "sk-url-SECRET-1f2e3d4c5b6a"
TOKEN = "http-token-for-transforms-77"
BASIC = base64.b64encode(f"{USER}:{KEY}".encode()).decode()


def forms(key: str) -> dict[str, str]:
    """The key as an echo may carry it."""
    return {
        "basic": base64.b64encode(f"{USER}:{key}".encode()).decode(),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64 shifted": base64.b64encode(b"xy" + key.encode()).decode(),
        "urlsafe base64": base64.urlsafe_b64encode(b"!" + key.encode()).decode().rstrip("="),
        "hex": key.encode().hex(),
        "HEX": key.encode().hex().upper(),
        "reversed": key[::-1],
        "split across lines": key[:9] + "\n    " + key[9:],
        "split by spaces": " ".join(key),
        "split by zero-width characters": "\u200b".join(key[:10]) + "\ufeff" + "\u2060\u200d".join(key[10:]),
    }


SHIFTED_CORES = {  # the part of a shifted encoding that depends on the key alone: what must not survive
    "base64 shifted": lambda s: s[3:-2],
    "urlsafe base64": lambda s: s[2:-2],
}


@pytest.mark.parametrize("name", list(forms(KEY)))
def test_every_transformed_form_of_a_key_is_redacted(name: str) -> None:
    echoed = forms(KEY)[name]
    text = redact(f"the server said: {echoed} (end)", [KEY, f"{USER}:{KEY}"])
    assert REDACTED in text and text.endswith(" (end)"), text
    core = SHIFTED_CORES.get(name, lambda s: s)(echoed)
    assert core not in text and KEY not in text


def test_zero_width_characters_elsewhere_in_the_text_are_kept() -> None:
    text = f"a\u200bb {' '.join(KEY)} c\ufeffd"
    assert redact(text, [KEY]) == f"a\u200bb {REDACTED} c\ufeffd"


def test_short_secrets_are_not_matched_in_transformed_forms() -> None:
    assert redact("abcd dcba 61626364", ["abcd"]) == f"{REDACTED} dcba 61626364"  # 4 characters: itself only


class EchoingBackend:
    """A 500 whose body echoes the Authorization header, then answers carrying it and every transformed form of the
    key (the database rows), then judges with the credential in a response header (the -v log)."""

    def __init__(self) -> None:
        self.judge, self.n, self.server = UniversalJudge(), 0, None

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        self.n += 1
        sent = self.server.headers[-1].get("authorization", "")
        if self.n == 1:
            return Reply(status=500, raw_body=f"proxy error; request headers: Authorization: {sent}".encode())
        if self.n == 2:
            return Reply(content="echo: " + " | ".join([sent, *forms(KEY).values()]))
        reply = as_reply(self.judge(payload))
        reply.headers["x-echo-authorization"] = sent
        reply.headers["x-echo-forms"] = " ".join(v for v in forms(KEY).values() if "\n" not in v)
        return reply


def test_url_credentials_and_their_forms_reach_no_client_no_database_and_no_log(scripted, tmp_path: Path) -> None:
    echoing = EchoingBackend()
    backend = scripted(echoing)
    echoing.server = backend
    url = backend.base_url.replace("http://", f"http://{USER}:{KEY}@")
    db, log = tmp_path / "forms.db", tmp_path / "stderr.log"
    server = HttpServer(server_env(url, db, JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_HTTP_TOKEN=TOKEN), log=log, verbose=True)
    seen: list[str] = []

    async def run() -> None:
        http, client = token_client(server.url, TOKEN)
        async with http, client:
            for _ in range(3):
                r = await client.call_tool("compare_pair", {**PAIR, "swap": False})
                seen.append(r.content[0].text if r.is_error else json.dumps(r.structured_content))

    try:
        anyio.run(run)
    finally:
        server.stop()
    assert backend.headers[0]["authorization"] == f"Basic {BASIC}"  # the credential was really sent
    assert "HTTP 500" in seen[0]
    needles = {"key": KEY, **{n: SHIFTED_CORES.get(n, lambda s: s)(v) for n, v in forms(KEY).items()}}
    for name, needle in needles.items():
        assert all(needle not in text for text in seen), (name, seen)
    text = log.read_text(errors="replace")
    assert "x-echo-authorization" in text.lower() or "DEBUG" in text
    for name, needle in needles.items():
        assert needle not in text, (name, [line for line in text.splitlines() if needle in line][:2])
    for path in sorted(tmp_path.glob("forms.db*")):
        data = path.read_bytes()
        for name, needle in needles.items():
            assert needle.encode() not in data, (path.name, name)
    conn = sqlite3.connect(str(db))
    try:
        stored = json.dumps(conn.execute("SELECT response FROM call_cache").fetchall())
    finally:
        conn.close()
    assert stored.count(REDACTED) >= len(forms(KEY))  # the echoes were there, blanked


@pytest.mark.parametrize(
    "url, problem",
    [
        (f"ftp://u:{KEY}@example.com/v1", "must be an http(s) URL"),
        (f"http://u:{KEY}@[::1/v1", "is not a valid URL"),
        (f"http://u:{KEY}@example.com:port/v1", "is not a valid URL"),
    ],
)
def test_a_bad_base_url_is_a_clear_error_that_shows_no_password(url: str, problem: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"JUDGE_MCP_BASE_URL": url, "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": str(tmp_path / "x.db")})
    assert problem in str(info.value) and KEY not in str(info.value) and "***@" in str(info.value)
    env = clean_env(JUDGE_MCP_BASE_URL=url, JUDGE_MCP_MODEL="m", JUDGE_MCP_DB=str(tmp_path / "x.db"))
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", str(free_port())],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert problem in proc.stderr and KEY not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
