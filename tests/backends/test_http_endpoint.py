"""The HTTP endpoint of the remote backends. Replies are read as they stream, up to `max_response_bytes`: a huge
or endless body fails at once with a backend-named error (inside the per-attempt timeout) instead of filling
memory and the database; an error body is cut and the status still decides. The connection pool keeps one
connection per request the concurrency limit allows."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from judge_mcp.backends.base import user
from judge_mcp.backends.errors import BackendError
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from testkit.scripted_servers import Reply
from tests.helpers import Rendezvous


class EndlessServer:
    """Answers every request with 200 and a body that never ends (no content-length), until the client hangs up
    or `limit_bytes` were sent. Counts what it sent."""

    def __init__(self, limit_bytes: int = 256 * 1024 * 1024):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sent = 0
        self.limit = limit_bytes
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
                chunk = b'{"choices": [{"message": {"content": "' + b"x" * 65536
                try:
                    while self.sent < self.limit:
                        conn.sendall(chunk)
                        self.sent += len(chunk)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


async def test_an_endless_body_is_cut_at_the_limit_and_named():
    server = EndlessServer()
    backend = OpenAICompatBackend("endless", "m", base_url=server.base_url, max_retries=2, timeout_s=20, max_response_bytes=1024 * 1024)
    started = time.monotonic()
    try:
        with pytest.raises(BackendError) as err:
            await backend.complete(user("hi"))
    finally:
        await backend.aclose()
        server.close()
    assert time.monotonic() - started < 15  # failed as soon as the cap was passed, well inside timeout_s
    message = str(err.value)
    assert "backend 'endless'" in message and "1,048,576 bytes" in message and "max_response_bytes" in message
    assert err.value.attempts == 1  # the same request would get the same reply: not retried
    assert server.sent < 64 * 1024 * 1024


async def test_a_declared_oversized_body_is_refused_before_it_is_read(make_backend):
    big = b'{"choices": []}' + b" " * (3 * 1024 * 1024)
    backend, server = make_backend(lambda p: Reply(raw_body=big), name="big", model="m", max_retries=0, max_response_bytes=1024 * 1024)
    with pytest.raises(BackendError, match=r"reply of 3,145,743 bytes exceeds the limit of 1,048,576"):
        await backend.complete(user("hi"))
    await backend.aclose()


async def test_an_error_body_is_cut_and_the_status_decides(make_backend):
    huge_error = b'{"error": {"message": "overloaded"}}' + b" " * (2 * 1024 * 1024)
    backend, server = make_backend(lambda p: Reply(status=503, raw_body=huge_error), name="busy", model="m", max_retries=1, backoff_base_s=0.01, max_response_bytes=1024 * 1024)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("hi"))
    await backend.aclose()
    assert "HTTP 503" in str(err.value) and "overloaded" in str(err.value)
    assert err.value.attempts == 2 and len(server.requests) == 2  # retryable, as any 503


async def test_a_reply_under_the_limit_is_read_whole(make_backend):
    backend, server = make_backend(lambda p: Reply(content="y" * 200_000), name="ok", model="m", max_retries=0, max_response_bytes=1024 * 1024)
    completion = await backend.complete(user("hi"))
    await backend.aclose()
    assert completion.text == "y" * 200_000


@pytest.mark.parametrize("concurrency", [1, 8, 32])
async def test_the_pool_keeps_one_connection_per_allowed_request_alive(make_backend, concurrency: int):
    """`concurrency` in flight, twice over: `concurrency` connections in all, every allowed
    request on the wire at once, none reopened for the second burst (httpx's default pool kept 20 alive and
    reconnected above that)."""
    import anyio

    together = Rendezvous(concurrency, lambda p: "ok")  # each burst is answered only once all its requests are in flight
    backend, server = make_backend(together, name="pool", model="m", max_retries=0, concurrency=concurrency)
    for burst in range(2):
        async with anyio.create_task_group() as tg:
            for k in range(concurrency):
                tg.start_soon(backend.complete, user(f"burst {burst} call {k}"))
    await backend.aclose()
    assert len(server.requests) == 2 * concurrency and (together.met, together.broken) == (2 * concurrency, 0)
    assert server.max_in_flight == concurrency and len(server.connections) == concurrency


async def test_requests_are_utf8_json_named_judge_mcp_and_send_no_cookies(make_backend):
    set_cookie = Reply(content="ok", headers={"set-cookie": "session=abc; Path=/"})
    backend, server = make_backend(lambda p: set_cookie, name="ua", model="m", max_retries=0)
    await backend.complete(user("héllo ✓"))
    await backend.complete(user("again"))
    await backend.aclose()
    assert server.requests[0]["messages"][0]["content"] == "héllo ✓"
    assert server.headers[0]["content-type"] == "application/json"
    assert server.headers[0]["user-agent"].startswith("judge-mcp/")
    assert "cookie" not in server.headers[1]  # a judge's requests are independent: no cookie is kept


async def test_a_backend_serves_one_event_loop_after_another(scripted):
    """A session belongs to one event loop: a backend closed and used again from a new loop (a CLI run after
    another, a test) makes a new session instead of failing on the old loop's connections."""
    import asyncio

    server = scripted(lambda p: Reply(content="ok"))
    backend = OpenAICompatBackend("loops", "m", base_url=server.base_url, max_retries=0)

    def run_once() -> str:
        async def go() -> str:
            try:
                return (await backend.complete(user("hi"))).text
            finally:
                await backend.aclose()

        return asyncio.run(go())

    import threading

    results: list[str] = []
    for _ in range(2):  # asyncio.run inside a running loop is refused: each run gets a thread of its own
        thread = threading.Thread(target=lambda: results.append(run_once()))
        thread.start()
        thread.join(30)
    assert results == ["ok", "ok"] and len(server.requests) == 2


async def test_the_environments_proxy_carries_the_requests_unless_no_proxy_names_the_host(scripted, monkeypatch):
    """HTTP_PROXY is honoured (as httpx did), read once per session rather than in a worker thread per request: the
    scripted server stands in for the proxy of an endpoint where nothing listens (no DNS, no network)."""
    from judge_mcp.backends.errors import BackendError
    from testkit.server_process import free_port

    proxy = scripted(lambda p: Reply(content="via the proxy"))
    for name in ("HTTP_PROXY", "http_proxy"):  # without a scheme, as curl and httpx accept it
        monkeypatch.setenv(name, proxy.base_url.rsplit("/v1", 1)[0].removeprefix("http://"))
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    backend = OpenAICompatBackend("proxied", "m", base_url=nowhere, max_retries=0)
    try:
        assert (await backend.complete(user("hi"))).text == "via the proxy"
    finally:
        await backend.aclose()
    assert len(proxy.requests) == 1
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1")
    backend = OpenAICompatBackend("direct", "m", base_url=nowhere, max_retries=0)
    try:
        with pytest.raises(BackendError, match="connection error"):
            await backend.complete(user("hi"))
    finally:
        await backend.aclose()
    assert len(proxy.requests) == 1
