"""The HTTP transport's limits: DNS-rebinding checks on every loopback bind without a token, and connections that never
finish their headers are closed (a request in progress is not)."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import httpx
import pytest

from testkit.server_process import HttpServer, server_env
from judge_mcp.server.transports.http import header_timeout_protocol, rebinding_guard
from tests.helpers import ACCEPT, INIT, ThreadedUvicorn


def test_rebinding_guard_names_the_bound_address_and_loopback_names_only() -> None:
    guard = rebinding_guard("127.0.0.2")
    assert guard.enable_dns_rebinding_protection
    assert "127.0.0.2:*" in guard.allowed_hosts and "localhost:*" in guard.allowed_hosts
    assert "http://127.0.0.2:*" in guard.allowed_origins
    assert not any("evil" in h or h.startswith("0.0.0.0") for h in guard.allowed_hosts)
    long_v6 = rebinding_guard("0:0:0:0:0:0:0:1")
    assert "[::1]:*" in long_v6.allowed_hosts and "[0:0:0:0:0:0:0:1]:*" in long_v6.allowed_hosts


async def test_a_rebound_host_or_foreign_origin_is_refused_on_127_0_0_2(tmp_path: Path) -> None:
    with HttpServer(server_env("http://127.0.0.1:9/v1", tmp_path / "j.db"), host="127.0.0.2") as server:
        assert "serving MCP at http://127.0.0.2:" in server.first_line()
        port = server.port
        async with httpx.AsyncClient(timeout=30) as http:
            rebound = await http.post(server.url, json=INIT, headers={**ACCEPT, "host": f"attacker.example:{port}"})
            foreign = await http.post(server.url, json=INIT, headers={**ACCEPT, "origin": "http://attacker.example"})
            own = await http.post(server.url, json=INIT, headers={**ACCEPT, "origin": f"http://127.0.0.2:{port}"})
    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert own.status_code == 200


class _Served(ThreadedUvicorn):
    """uvicorn in a thread with the header-timeout protocol, serving an app whose requests take `work_s`."""

    def __init__(self, timeout_s: float, work_s: float):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await anyio.sleep(work_s)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

        super().__init__(app, http=header_timeout_protocol(timeout_s))


def test_a_connection_that_never_finishes_its_headers_is_closed() -> None:
    with _Served(timeout_s=0.3, work_s=0) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=15) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never the rest
            assert sock.recv(1024) == b""  # closed by the server (a timeout here raises instead)


def test_a_request_in_progress_is_not_cut_by_the_header_timeout() -> None:
    with _Served(timeout_s=0.2, work_s=1.0) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=15) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            reply = b""
            while b"ok" not in reply:
                chunk = sock.recv(1024)
                if not chunk:
                    break
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"ok")


@pytest.mark.parametrize("host", ["::1", "0:0:0:0:0:0:0:1"])
def test_ipv6_loopback_forms_start(tmp_path: Path, host: str) -> None:
    probe = socket.socket(socket.AF_INET6)
    try:
        probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    finally:
        probe.close()
    with HttpServer(server_env("http://127.0.0.1:9/v1", tmp_path / "j.db"), host=host) as server:
        assert f"serving MCP at http://[{host}]:" in server.first_line()
