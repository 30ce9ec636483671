"""Streamable HTTP serving: the MCP app at /mcp behind a bearer-token check.

With `JUDGE_MCP_HTTP_TOKEN` set, every request must carry `Authorization: Bearer <token>` (compared in constant
time). Without a token the server only binds a loopback address.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from judge_mcp.config import MIN_REMOTE_TOKEN_CHARS, ConfigError

LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# RFC 6750 section 3: `invalid_token` tells a client its token is wrong (or missing), so it reports that instead of
# starting an OAuth flow to discover how to authorise.
CHALLENGE = b'Bearer realm="judge-mcp", error="invalid_token", error_description="missing or wrong bearer token"'


class BearerAuth:
    """Pure ASGI middleware: 401 unless the bearer token matches. Lifespan and non-HTTP scopes pass through."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                header = value
                break
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(presented.strip(), self._token):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized: send 'Authorization: Bearer <JUDGE_MCP_HTTP_TOKEN>'"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", CHALLENGE), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def rebinding_guard(host: str) -> TransportSecuritySettings:
    """Host and Origin checks for a server without a token (DNS rebinding: a web page whose name resolves to the
    loopback address must not reach the tools). The SDK switches them on only for 127.0.0.1, localhost and ::1;
    here they hold for every loopback bind (127.0.0.2, the long form of ::1): the Host header must name the bound
    address or a loopback name, and a browser's Origin must be one of those over http."""
    bound = host.strip("[]")
    names = {"127.0.0.1", "localhost", "[::1]", f"[{bound}]" if ":" in bound else bound}
    try:
        if ipaddress.ip_address(bound) == ipaddress.ip_address("::1"):
            names.add("[::1]")
    except ValueError:
        pass
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted({f"{name}:*" for name in names} | names),
        allowed_origins=sorted({f"http://{name}:*" for name in names} | {f"http://{name}" for name in names}),
    )


def http_app(server: MCPServer, *, host: str, token: str | None) -> Any:
    # Refusals are ConfigErrors: `judge-mcp serve` exits 2 with them, as with any other configuration error.
    if not token and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on non-loopback address {host!r} without JUDGE_MCP_HTTP_TOKEN; "
            "set a token or bind 127.0.0.1"
        )
    if token and len(token) < MIN_REMOTE_TOKEN_CHARS and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on non-loopback address {host!r} with a JUDGE_MCP_HTTP_TOKEN of {len(token)} "
            f"characters; use at least {MIN_REMOTE_TOKEN_CHARS} (e.g. `export JUDGE_MCP_HTTP_TOKEN=$(openssl rand -hex 32)`)"
        )
    if token:
        return BearerAuth(server.streamable_http_app(streamable_http_path="/mcp", host=host), token)
    return server.streamable_http_app(streamable_http_path="/mcp", host=host, transport_security=rebinding_guard(host))


HEADER_TIMEOUT_S = 10.0  # a connection must finish a request's headers within this (a slow-loris client is closed)
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this (uvicorn's timeout_keep_alive)
MAX_CONNECTIONS = 256  # connections and requests at once; past it new ones get 503 at once (uvicorn's limit_concurrency)


def header_timeout_protocol(timeout_s: float = HEADER_TIMEOUT_S) -> type:
    """uvicorn's h11 protocol, closing a connection that has no request in progress and began none in the last
    `timeout_s`: a client that opens connections and never finishes its headers no longer holds them open (uvicorn
    itself times out only the idle time after a response). A request in progress (a long tool call, an SSE stream)
    is never cut."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_check = self.loop.call_later(timeout_s, self._check_progress, None)

        def _check_progress(self, seen: Any) -> None:
            if self.transport.is_closing():
                return
            cycle = self.cycle
            busy = cycle is not None and not cycle.response_complete
            if not busy and cycle is seen:  # no request began in a whole period: headers never finished
                self.transport.close()
                return
            self._header_check = self.loop.call_later(timeout_s, self._check_progress, cycle)

        def connection_lost(self, exc: Exception | None) -> None:
            self._header_check.cancel()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


def endpoint_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 literal needs brackets
    return f"http://{shown}:{port}/mcp"


async def serve_http(server: MCPServer, *, host: str, port: int, token: str | None) -> None:
    import sys

    import uvicorn

    config = uvicorn.Config(
        http_app(server, host=host, token=token),
        host=host,
        port=port,
        log_level="warning",
        http=header_timeout_protocol(),
        timeout_keep_alive=KEEP_ALIVE_S,
        limit_concurrency=MAX_CONNECTIONS,
    )
    userver = uvicorn.Server(config)
    # One line on stderr once the socket listens: where to connect and whether a token is needed.
    need = "a bearer token is required (JUDGE_MCP_HTTP_TOKEN)" if token else "no token required (loopback only)"
    original_startup = userver.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets=sockets)
        if userver.started:
            bound = [sock.getsockname()[1] for srv in getattr(userver, "servers", []) for sock in (srv.sockets or [])]
            shown_port = bound[0] if bound else port  # the real port when asked for port 0
            print(f"judge-mcp: serving MCP at {endpoint_url(host, shown_port)}; {need}", file=sys.stderr, flush=True)

    userver.startup = startup  # type: ignore[method-assign]
    await userver.serve()
