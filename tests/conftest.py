"""Shared fixtures: scripted model servers on 127.0.0.1, a temp store, a CallContext wired to both, and the real MCP server
on a scripted backend. What they build is made by tests/helpers.py (the one place for servers, apps and ports)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import socket
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from testkit.scripted_servers import Responder, ScriptedServer
from judge_mcp.calls.cache import CallCache
from judge_mcp.calls.context import CallContext
from judge_mcp.storage.sqlite import SqliteEngine
from tests.connect import TRANSPORTS, judged
from tests.helpers import app_env, http_backend, make_app, start_scripted


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `model` run the embedded model, which needs the optional `local` extra (xllamacpp): skipped, with
    the reason, where it is not installed, except under CI, where a skip would hide a missing install step."""
    if item.get_closest_marker("model") is not None and importlib.util.find_spec("xllamacpp") is None:
        reason = "the embedded model needs the `local` extra (xllamacpp): pip install 'judge-mcp[local]'"
        if os.environ.get("CI"):
            pytest.fail(f"model tests cannot run under CI: {reason}")
        pytest.skip(reason)


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
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SqliteEngine]:
    """An SQLite store in a temp file; a test decorated `@on_both_engines` (tests/engines.py) also runs with a
    PostgreSQL store on a new database of the session's server."""
    if getattr(request, "param", "sqlite") == "postgresql":
        from judge_mcp.storage.postgres import PostgresEngine

        s = PostgresEngine(request.getfixturevalue("postgres_url"))
    else:
        s = SqliteEngine(tmp_path / "judge.db")
    yield s
    s.close()


@pytest.fixture
def scripted() -> Iterator[callable]:
    """scripted(responder, kind="openai") -> a started scripted server ("anthropic": the Messages wire format),
    stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(responder: Responder, kind: str = "openai") -> ScriptedServer:
        server = start_scripted(responder, kind)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
async def make_backend(scripted) -> AsyncIterator[callable]:
    """make_backend(responder, kind="openai", **backend_kwargs) -> (backend, server): the remote backend of that wire
    format on a scripted server (name "scripted", model "scripted-model" unless given); closed after the test."""
    backends = []

    def make(responder: Responder, kind: str = "openai", **kwargs):
        server = scripted(responder, kind)
        backend = http_backend(server, **kwargs)
        backends.append(backend)
        return backend, server

    yield make
    for backend in backends:
        await backend.aclose()


@pytest.fixture
async def make_judge(scripted, store) -> AsyncIterator[callable]:
    """make_judge(responder, **backend_kwargs) -> (CallContext, ScriptedServer): a real OpenAI-compatible backend over HTTP,
    closed after the test."""
    cache = CallCache(store)
    judges: list[CallContext] = []

    def make(responder: Responder, **kwargs) -> tuple[CallContext, ScriptedServer]:
        server = scripted(responder)
        kwargs.setdefault("max_retries", 1)
        kwargs.setdefault("backoff_base_s", 0.01)
        judges.append(CallContext(http_backend(server, **kwargs), cache, store))
        return judges[-1], server

    yield make
    for judge in judges:
        await judge.backend.aclose()


@pytest.fixture(params=TRANSPORTS)
def connect(request: pytest.FixtureRequest, scripted, tmp_path: Path) -> callable:
    """connect(responder, kind="openai", **env) -> an async context manager yielding a `Judged` (tests/connect.py):
    the official client connected to judge-mcp over this run's transport, the server wired to a scripted backend of
    that wire format; `env` adds or overrides settings (JUDGE_MCP_MAX_RETRIES is 1 unless given). A test using this
    fixture runs once per transport: in memory, over stdio, over streamable HTTP."""
    return partial(judged, request.param, scripted, tmp_path)


@pytest.fixture
async def mcp_app(scripted, tmp_path: Path):
    """mcp_app(responder, kind="openai", **env) -> (MCPServer, ScriptedServer): the real server wired to a scripted
    backend of that wire format; `env` adds or overrides settings (JUDGE_MCP_MAX_RETRIES is 1 unless given).

    Connect with `async with mcp.Client(server) as client` (in memory). The database is a temp file.
    """
    from judge_mcp.server.build import build_server

    apps = []

    def make(responder: Responder, kind: str = "openai", **env: str):
        backend = scripted(responder, kind)
        app = make_app(app_env(backend, tmp_path / "judge.db", **{"JUDGE_MCP_MAX_RETRIES": "1", **env}))
        apps.append(app)
        return build_server(app), backend

    yield make
    for app in apps:
        await app.aclose()  # the backends' HTTP sessions, then the store



_DATABASES = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server for the session (testkit/postgres_server.py), stopped at the end. Skipped where no server
    binaries exist, except under CI, where .ci/run installs them and a skip would hide a missing install step."""
    from testkit.postgres_server import PostgresServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tests cannot run under CI: {reason}")
        pytest.skip(reason)
    server = PostgresServer.start()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server: Any, request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database on the session's PostgreSQL server, one per test."""
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name.lower())[:40] + f"_{os.getpid()}_{next(_DATABASES)}"
    return postgres_server.create_database(name)
