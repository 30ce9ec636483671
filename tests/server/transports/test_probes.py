"""/healthz and /readyz (judge_mcp/server/transports/probes.py, storage/health.py): answered before the token check with a
status word and nothing else; readiness follows the database (reachable, migrated); `serve --stateless` is an HTTP
option, also set by JUDGE_MCP_HTTP_STATELESS. Probes answered cheaply and without a worker thread the tools use."""

from __future__ import annotations

import socket
import threading
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from judge_mcp.cli.main import main
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.storage.health import readiness
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.server.transports.admission import Admission, Gate, admitted_protocol
from judge_mcp.server.transports.probes import fast_answer, with_probes
from tests.helpers import ThreadedUvicorn


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


# ---- issue 46: a probe flood must not slow other clients' calls --------------------------------------------------------
@pytest.mark.parametrize(("request_bytes", "expected"), [
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", (True, False)),
    (b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", (False, False)),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (True, True)),
    (b"GET /healthz HTTP/1.0\r\nUser-Agent: ApacheBench/2.3\r\n\r\n", (True, True)),  # HTTP/1.0: closed after
    (b"HEAD /healthz HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", (False, False)),
    (b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", None),  # needs the database: the ASGI path
    (b"GET /healthz HTTP/1.1\r\nContent-Length: 2\r\n\r\n", None),  # a body follows
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /mcp HTTP/1.1\r\n\r\n", None),  # pipelined: h11 parses them
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", None),  # headers not finished
    (b"POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n", None),
])
def test_a_plain_healthz_request_is_answered_whole_and_anything_else_is_left_to_the_asgi_path(request_bytes: bytes, expected) -> None:
    answer = fast_answer(request_bytes)
    if expected is None:
        assert answer is None
        return
    with_body, close = expected
    response, closes = answer
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and closes == close and (b"connection: close" in head) == close
    assert body == (b'{"status": "ok"}' if with_body else b"") and b"content-length: 16" in head


def test_healthz_is_answered_by_the_protocol_without_a_request_to_the_app(tmp_path: Path) -> None:
    """On 254e9ed every probe went through uvicorn's request cycle (a task per request) and the ASGI stack: ~2,100
    probes/s took the event loop's whole time (perf/probe_flood.py). Now a kept-alive connection's plain GET /healthz
    never reaches the app, and admission still counts it (working, then idle)."""
    seen: list[str] = []

    async def app(scope, receive, send) -> None:
        seen.append(scope.get("path", scope["type"]))
        await _inner(scope, receive, send)

    admission = Admission()
    with ThreadedUvicorn(with_probes(app, None), http=admitted_protocol(admission), limit_concurrency=None) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=15) as sock:
            answers = [_exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") for _ in range(50)]
            other = _exchange(sock, b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", end=b"0\r\n\r\n")  # the same connection
            after = _exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            counts = admission.counts()
        with socket.create_connection(("127.0.0.1", served.port), timeout=15) as sock:  # HTTP/1.0 (ApacheBench): then closed
            sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            old = b""
            while chunk := sock.recv(4096):
                old += chunk
    assert old.startswith(b"HTTP/1.1 200 OK") and old.endswith(b'{"status": "ok"}') and b"connection: close" in old
    assert all(a.startswith(b"HTTP/1.1 200 OK") and a.endswith(b'{"status": "ok"}') for a in answers + [after])
    assert other.startswith(b"HTTP/1.1 200") and b"the mcp app" in other and seen == ["/other"]
    assert counts == {"pending": 0, "working": 0, "idle": 1}


def _exchange(sock: socket.socket, request: bytes, end: bytes = b"}") -> bytes:
    sock.sendall(request)
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    return data


async def test_readiness_takes_no_worker_thread_of_the_shared_limiter(tmp_path: Path) -> None:
    """With every thread of anyio's shared limiter busy (the tools' work), /readyz is still answered (on 254e9ed it
    waited for one of them)."""
    store = SqliteEngine(tmp_path / "judge.db")
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens, release = 1, threading.Event()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(partial(anyio.to_thread.run_sync, release.wait, abandon_on_cancel=True))
            await anyio.sleep(0)
            while limiter.borrowed_tokens != 1:
                await anyio.sleep(0.01)
            with anyio.fail_after(30):  # a deadlock guard, not a timing
                answer = await _get(with_probes(_inner, partial(readiness, store)), "/readyz")
            release.set()
    finally:
        limiter.total_tokens = 40
        release.set()
        store.close()
    assert (answer.status_code, answer.json()) == (200, {"status": "ready"})


async def test_concurrent_readiness_probes_share_one_check() -> None:
    checks, gate = 0, anyio.Event()

    async def ready() -> str | None:
        nonlocal checks
        checks += 1
        await gate.wait()
        return None

    app = with_probes(_inner, ready)
    answers: list[int] = []

    async def probe() -> None:
        answers.append((await _get(app, "/readyz")).status_code)

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(probe)
        while checks == 0:
            await anyio.sleep(0.01)
        await anyio.sleep(0.05)
        gate.set()
    assert answers == [200] * 20 and checks == 1
