"""HTTP admission (judge_mcp/server/transports/admission.py), with real sockets on 127.0.0.1 (and 127.0.0.2 as another peer
address): unfinished and idle connections are bounded per peer apart from working requests, a wrong token is
refused as soon as the headers are in (before the body) and its connection closed, overload is a 503 with
Retry-After, and a client holding hundreds of half-sent requests no longer starves an authenticated one."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest

from judge_mcp.server.transports.admission import Admission, Gate, Limits, admitted_protocol
from testkit.server_process import HttpServer, server_env
from tests.helpers import ACCEPT, INIT, ThreadedUvicorn, closed_by_server, token_client
from testkit.scripted_judges import PAIR, UniversalJudge

TOKEN = "admission-token-0123456789abcdef"
HALF = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # headers never finished


class _Gated(ThreadedUvicorn):
    """uvicorn in a thread: the admission protocol and gate in front of an app whose requests wait for `release`."""

    def __init__(self, limits: Limits, token: str | None = None):
        self.release = threading.Event()
        self.calls = 0

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            self.calls += 1
            if scope["path"] == "/hold":
                await anyio.to_thread.run_sync(self.release.wait, 30)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

        self.admission = Admission(limits)
        super().__init__(Gate(app, self.admission, token), http=admitted_protocol(self.admission), limit_concurrency=None)

    def __exit__(self, *exc) -> None:
        self.release.set()
        super().__exit__(*exc)

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=15, source_address=(source, 0))

    def wait_for(self, predicate, what: str) -> None:
        """Poll the server's admission state (at most 15 s): it orders nothing by time, it waits for a state."""
        deadline = time.monotonic() + 15
        while not predicate():
            assert time.monotonic() < deadline, f"{what}: {self.admission.counts()}"
            time.sleep(0.01)


def _request(path: str = "/", extra: bytes = b"") -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n"


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_unfinished_connections_are_bounded_per_peer_and_the_oldest_go_first() -> None:
    with _Gated(Limits(pending_per_peer=4, pending_total=100, pending_grace_s=0.0)) as served:
        flood = [served.connect() for _ in range(10)]
        for sock in flood:
            sock.sendall(HALF)
        served.wait_for(lambda: served.admission.counts()["pending"] == 4, "the peer keeps 4 unfinished connections")
        assert all(closed_by_server(sock) for sock in flood[:6])  # the six oldest were closed
        other = [served.connect("127.0.0.2") for _ in range(4)]  # another address has a budget of its own
        served.wait_for(lambda: served.admission.counts()["pending"] == 8, "127.0.0.2's connections are all kept")
        for sock in other:  # and they are served: none was evicted by 127.0.0.1's flood
            sock.sendall(_request())
            assert _read_response(sock).startswith(b"HTTP/1.1 200")
        for sock in flood + other:
            sock.close()
    assert served.admission.evicted["pending"] == 6


def test_a_burst_of_connections_gets_its_grace_and_the_overall_bound_holds_whatever_their_age() -> None:
    with _Gated(Limits(pending_per_peer=4, pending_total=8, pending_grace_s=60)) as served:
        burst = [served.connect() for _ in range(6)]  # past the peer's bound, but young: all kept
        served.wait_for(lambda: served.admission.counts()["pending"] == 6, "the burst is kept")
        more = [served.connect("127.0.0.2") for _ in range(3)]  # 9 in all: past the overall bound, the oldest goes
        served.wait_for(lambda: served.admission.evicted["pending"] == 1, "one closed for the overall bound")
        assert closed_by_server(burst[0])
        for sock in burst[1:] + more:  # the others are still served
            sock.sendall(_request())
            assert _read_response(sock).startswith(b"HTTP/1.1 200")
        for sock in burst + more:
            sock.close()


def test_idle_connections_are_bounded_per_peer() -> None:
    with _Gated(Limits(idle_per_peer=2)) as served:
        socks = []
        for _ in range(4):  # four kept-alive connections, each idle after one request
            sock = served.connect()
            sock.sendall(_request())
            assert _read_response(sock).startswith(b"HTTP/1.1 200")
            socks.append(sock)
        served.wait_for(lambda: served.admission.counts()["idle"] == 2, "two idle connections kept")
        assert closed_by_server(socks[0]) and closed_by_server(socks[1])
        for sock in socks:
            sock.close()


def test_a_wrong_token_is_refused_when_the_headers_are_in_and_its_connection_closed() -> None:
    with _Gated(Limits(), token=TOKEN) as served:
        sock = served.connect()
        # a body of a megabyte is announced and never sent: the answer must not wait for it
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Length: 1000000\r\n\r\n")
        reply = _read_response(sock)
        assert reply.startswith(b"HTTP/1.1 401") and b"www-authenticate: bearer" in reply.lower()
        assert closed_by_server(sock)
        sock.close()
        good = served.connect()
        good.sendall(_request(extra=f"Authorization: Bearer {TOKEN}\r\n".encode()))
        assert _read_response(good).startswith(b"HTTP/1.1 200")
        good.close()
    assert served.calls == 1 and served.admission.refused["unauthorised"] == 1  # the app never saw the wrong one


def test_overload_is_a_503_with_retry_after() -> None:
    with _Gated(Limits(max_working=2, retry_after_s=3)) as served:
        held = [served.connect() for _ in range(2)]
        for sock in held:
            sock.sendall(_request("/hold"))
        served.wait_for(lambda: served.admission.working == 2, "two requests in progress")
        extra = served.connect()
        extra.sendall(_request())
        reply = _read_response(extra)
        assert reply.startswith(b"HTTP/1.1 503") and b"retry-after: 3" in reply.lower()
        assert closed_by_server(extra)
        served.release.set()
        assert all(_read_response(sock).startswith(b"HTTP/1.1 200") for sock in held)
        for sock in held + [extra]:
            sock.close()
    assert served.admission.refused["overloaded"] == 1


# ---- the real server -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flooder", ["127.0.0.1", "127.0.0.2"])  # the calling client's own address, or another
def test_hundreds_of_half_sent_requests_do_not_starve_authenticated_calls(scripted, tmp_path: Path, flooder: str) -> None:
    backend = scripted(UniversalJudge())
    env = server_env(backend.base_url, tmp_path / "j.db", JUDGE_MCP_HTTP_TOKEN=TOKEN, JUDGE_MCP_MAX_RETRIES="0")
    with HttpServer(env, log=tmp_path / "server.log") as server:
        flood: list[socket.socket] = []
        for _ in range(300):  # 300 half-sent requests held open (uvicorn's own cap was 256 connections)
            try:
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=15, source_address=(flooder, 0))
                sock.sendall(HALF)
                flood.append(sock)
            except OSError:
                break
        results: list = []

        async def calls() -> None:
            http, client = token_client(server.url, TOKEN)
            async with http, client:
                async with anyio.create_task_group() as tg:
                    for k in range(30):
                        tg.start_soon(one, client, k)

        async def one(client, k: int) -> None:
            r = await client.call_tool("compare_pair", {**PAIR, "prompt": f"{PAIR['prompt']} ({k})"})
            results.append(r)

        try:
            anyio.run(calls)
        finally:
            for sock in flood:
                sock.close()
    assert len(results) == 30 and not any(r.is_error for r in results)
    assert all(r.structured_content["winner"] == "B" for r in results)


def test_the_default_limits_follow_the_open_file_limit(monkeypatch) -> None:
    import resource

    from judge_mcp.server.transports import admission

    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 4096))
    small = admission.default_limits()
    assert small.max_working == small.pending_total == small.idle_total == 256 and small.pending_per_peer == 64
    monkeypatch.setattr(resource, "getrlimit", lambda which: (65536, 65536))
    assert admission.default_limits() == Limits()


def test_four_hundred_concurrent_requests_are_all_served(scripted, tmp_path: Path) -> None:
    """The default admits the load one server serves: 400 requests at once (uvicorn's cap of 256 refused a third)."""
    backend = scripted(UniversalJudge())
    env = server_env(backend.base_url, tmp_path / "j.db", JUDGE_MCP_HTTP_TOKEN=TOKEN)
    with HttpServer(env, log=tmp_path / "server.log") as server:
        statuses: list[int] = []

        async def main() -> None:
            limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
            headers = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(timeout=120, limits=limits) as http:
                async def one() -> None:
                    statuses.append((await http.post(server.url, json=INIT, headers=headers)).status_code)

                async with anyio.create_task_group() as tg:
                    for _ in range(400):
                        tg.start_soon(one)

        anyio.run(main)
    assert len(statuses) == 400 and set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}


# ---- what a refused client is told (issue 49 item 4) ---------------------------------------------------------------
def _leaves(exc: BaseException) -> str:
    """The text of an exception, or of every exception inside an exception group."""
    inner = getattr(exc, "exceptions", None)
    return " | ".join(_leaves(e) for e in inner) if inner else f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize(("token", "said"), [(None, "missing bearer token"), ("wrong", "wrong bearer token")])
def test_a_refused_token_is_a_json_rpc_error_the_official_client_shows(token: str | None, said: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    with _Gated(Limits(), token=TOKEN) as served:
        url = f"http://127.0.0.1:{served.port}/mcp"
        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        raw = httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=15)
        assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith('Bearer realm="judge-mcp", error="invalid_token"')
        body = raw.json()
        assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32001
        assert body["error"]["message"].startswith(said) and "JUDGE_MCP_HTTP_TOKEN" in body["error"]["message"]

        async def connect() -> str:
            http = httpx2.AsyncClient(headers=headers, timeout=15)
            try:
                async with http, Client(streamable_http_client(url, http_client=http)):
                    pass
            except Exception as exc:  # noqa: BLE001 - whatever the client raises, its text is what a user sees
                return _leaves(exc)
            return "connected"

        shown = anyio.run(connect)
    assert said in shown and "JUDGE_MCP_HTTP_TOKEN" in shown, shown
    assert served.calls == 0
