"""/healthz and /readyz (judge_mcp/server/transports/probes.py, storage/health.py): answered before the token check with a
status word and nothing else; readiness follows the database (reachable, migrated); `serve --stateless` is an HTTP
option, also set by JUDGE_MCP_HTTP_STATELESS."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import httpx
import pytest

from judge_mcp.cli.main import main
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.storage.health import readiness
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.server.transports.admission import Admission, Gate
from judge_mcp.server.transports.probes import with_probes


async def _inner(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"the mcp app"})


def m900_not_yet(tx) -> None:
    pass


async def _get(app, path: str, method: str = "GET") -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        return await http.request(method, path)


async def test_probes_answer_before_the_token_check_and_nothing_else(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    app = with_probes(Gate(_inner, Admission(), "a-token-of-sixteen-chars"), partial(readiness, store))
    live, ready = await _get(app, "/healthz"), await _get(app, "/readyz")
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert (await _get(app, "/healthz", "HEAD")).content == b""
    assert (await _get(app, "/readyz", "POST")).status_code == 405
    assert (await _get(app, "/mcp")).status_code == 401  # everything else still needs the token
    assert (await _get(app, "/healthz/x")).status_code == 401
    store.close()


async def test_readiness_follows_the_database(tmp_path: Path) -> None:
    store = SqliteEngine(tmp_path / "judge.db")
    behind = with_probes(_inner, partial(readiness, store, [*MIGRATIONS, m900_not_yet]))  # a migration it lacks
    answer = await _get(behind, "/readyz")
    assert (answer.status_code, answer.json()) == (503, {"status": "not ready", "reason": "migrations not applied"})
    store.close()
    gone = await _get(with_probes(_inner, partial(readiness, store)), "/readyz")
    assert (gone.status_code, gone.json()) == (503, {"status": "not ready", "reason": "database unreachable"})
    assert "judge.db" not in gone.text  # nothing about the database itself


def test_stateless_is_an_http_option_and_an_environment_flag(monkeypatch, capsys) -> None:
    assert load_settings({"JUDGE_MCP_HTTP_STATELESS": "1"}).http_stateless
    assert not load_settings({}).http_stateless
    with pytest.raises(ConfigError, match="JUDGE_MCP_HTTP_STATELESS must be 1 or 0"):
        load_settings({"JUDGE_MCP_HTTP_STATELESS": "maybe"})
    assert main(["serve", "--stateless"]) == 2
    assert "--stateless applies to --transport http only" in capsys.readouterr().err
