"""The official MCP client connected to judge-mcp over each transport, for tests whose body holds whatever the
transport (the model: python-sdk's tests/interaction, whose `connect` fixture runs one body per transport).

`connect(transport, settings, tmp_path)` is an async context manager yielding a connected `mcp.Client`:

- "memory": the MCP server built in this process (`build_server(App(settings))`), over the in-memory transport;
- "stdio": `judge-mcp serve` as a subprocess, over its stdin and stdout (its stderr goes to tmp_path/stdio.log);
- "http": `judge-mcp serve --transport http` as a subprocess on a free loopback port, with a bearer token, over
  streamable HTTP (its output goes to tmp_path/http.log).

`settings` are environment values (tests/helpers.app_env); a subprocess gets them on top of a clean environment. The
server has stopped when the context exits, so its database file can be read then. `judged` adds a scripted backend
and yields a `Judged`; the `connect` fixture (tests/conftest.py) runs a test once per transport with it. `ClientModel`
is the client's own model, as the official client's sampling callback (the `sampling` backend asks it).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client

from testkit.scripted_servers import Responder, ScriptedServer
from testkit.server_process import HttpServer, clean_env
from tests.helpers import ROOT, app_env, make_app, token_client

TRANSPORTS = ("memory", "stdio", "http")


@asynccontextmanager
async def over_memory(settings: dict[str, str], tmp_path: Path, **options: Any) -> AsyncIterator[Client]:
    from judge_mcp.server.build import build_server

    app = make_app(settings)
    try:
        async with Client(build_server(app), **options) as client:
            yield client
    finally:
        await app.aclose()


@asynccontextmanager
async def over_stdio(settings: dict[str, str], tmp_path: Path, **options: Any) -> AsyncIterator[Client]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=clean_env(**settings), cwd=str(ROOT))
    with open(tmp_path / "stdio.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60, **options) as client:
            yield client


@asynccontextmanager
async def over_http(settings: dict[str, str], tmp_path: Path, **options: Any) -> AsyncIterator[Client]:
    token = f"test-token-{uuid.uuid4().hex}"
    with HttpServer(clean_env(**settings, JUDGE_MCP_HTTP_TOKEN=token), log=tmp_path / "http.log") as server:
        http, client = token_client(server.url, token, **options)
        async with http, client:
            yield client


CONNECT: dict[str, Callable[..., AbstractAsyncContextManager[Client]]] = {
    "memory": over_memory, "stdio": over_stdio, "http": over_http,
}


def connect(transport: str, settings: dict[str, str], tmp_path: Path, **options: Any) -> AbstractAsyncContextManager[Client]:
    """The official client connected over `transport`; `options` go to `mcp.Client` (e.g. a sampling callback)."""
    return CONNECT[transport](settings, tmp_path, **options)


@dataclass
class Judged:
    """A client connected to judge-mcp: `backend` is the scripted model server it talks to, `db` the server's database
    file (complete once the connection has closed), `transport` the transport's name."""

    client: Client
    backend: ScriptedServer
    db: Path
    transport: str

    def verdicts(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The verdict log's rows (newest first), read from the database file."""
        from judge_mcp.storage.sqlite import SqliteEngine
        from judge_mcp.storage.verdict_log import VerdictLog

        store = SqliteEngine(self.db)
        try:
            return VerdictLog(store).recent(tool)
        finally:
            store.close()


@asynccontextmanager
async def judged(transport: str, scripted: Callable[..., ScriptedServer], tmp_path: Path, responder: Responder, kind: str = "openai",
                 **env: str) -> AsyncIterator[Judged]:
    """A scripted backend started with `scripted(responder, kind)`, and judge-mcp on it (database tmp_path/judge.db;
    JUDGE_MCP_MAX_RETRIES 1 unless `env` says otherwise) connected over `transport`."""
    backend = scripted(responder, kind)
    db = tmp_path / "judge.db"
    settings = app_env(backend, db, **{"JUDGE_MCP_MAX_RETRIES": "1", **env})
    async with connect(transport, settings, tmp_path) as client:
        yield Judged(client, backend, db, transport)


class ClientModel:
    """The MCP client's model, as the official client's `sampling_callback` (pass `sampling_callback=model` to
    `connect`): each sampling/createMessage request becomes the OpenAI-wire payload a scripted judge reads (the
    system prompt, then the messages' text), which `responder` answers; the answer goes back as a
    CreateMessageResult from `model`. `requests` keeps every request's parameters as received. A responder
    returning an `ErrorData` answers with that error (a user declining the request)."""

    def __init__(self, responder: Callable[[dict[str, Any]], Any], model: str = "client-model-1"):
        self.responder = responder
        self.model = model
        self.requests: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        from testkit.scripted_servers import Reply

        self.requests.append(params)
        messages = [{"role": "system", "content": params.system_prompt}] if params.system_prompt else []
        for m in params.messages:
            blocks = m.content_as_list
            messages.append({"role": m.role, "content": [{"type": "text", "text": b.text} for b in blocks if b.type == "text"]})
        answer = self.responder({"messages": messages, "max_tokens": params.max_tokens, "temperature": params.temperature})
        if isinstance(answer, types.ErrorData):
            return answer
        text = answer.content if isinstance(answer, Reply) else answer
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text or ""), model=self.model,
                                         stop_reason="endTurn")
