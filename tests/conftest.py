"""Shared fixtures: a scripted OpenAI-compatible server on 127.0.0.1, a temp store, and a Judge wired to both."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge_mcp.methods.call_cache import CallCache
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.methods.judge import Judge
from judge_mcp.store import Store
from tests.scripted import Responder, ScriptedServer


@pytest.fixture(autouse=True)
def _no_real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to 127.0.0.1 only: refuse any other address."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and self.family in (socket.AF_INET, socket.AF_INET6):
            if not (host.startswith("127.") or host in ("::1", "localhost")):
                raise OSError(f"test tried to reach {host!r}; tests may only use loopback")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "judge.db")
    yield s
    s.close()


@pytest.fixture
def scripted() -> Iterator[callable]:
    """scripted(responder) -> a started ScriptedServer, stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(responder: Responder) -> ScriptedServer:
        server = ScriptedServer(responder).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def make_judge(scripted, store):
    """make_judge(responder, **backend_kwargs) -> (Judge, ScriptedServer): a real OpenAI-compatible backend over HTTP."""
    backends: list[OpenAICompatBackend] = []
    cache = CallCache(store)

    def make(responder: Responder, **kwargs) -> tuple[Judge, ScriptedServer]:
        server = scripted(responder)
        kwargs.setdefault("max_retries", 1)
        kwargs.setdefault("backoff_base_s", 0.01)
        backend = OpenAICompatBackend("scripted", "scripted-model", base_url=server.base_url, **kwargs)
        backends.append(backend)
        return Judge(backend, cache, store), server

    return make


@pytest.fixture
def mcp_app(scripted, tmp_path: Path):
    """mcp_app(responder, **env) -> (MCPServer, ScriptedServer): the real server wired to a scripted backend.

    Connect with `async with mcp.Client(server) as client` (in memory). The database is a temp file.
    """
    from judge_mcp.app import App
    from judge_mcp.config import load_settings
    from judge_mcp.server import build_server

    apps = []

    def make(responder: Responder, **env: str):
        backend = scripted(responder)
        values = {
            "JUDGE_MCP_BACKEND": "openai",
            "JUDGE_MCP_BASE_URL": backend.base_url,
            "JUDGE_MCP_MODEL": "scripted-model",
            "JUDGE_MCP_DB": str(tmp_path / "judge.db"),
            "JUDGE_MCP_MAX_RETRIES": "1",
            **env,
        }
        app = App(load_settings(values))
        apps.append(app)
        return build_server(app), backend

    yield make
    for app in apps:
        app.store.close()

