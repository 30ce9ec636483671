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

from judge_mcp.config import MIN_REMOTE_TOKEN_CHARS

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


def http_app(server: MCPServer, *, host: str, token: str | None) -> Any:
    if not token and not is_loopback(host):
        raise SystemExit(
            f"refusing to serve HTTP on non-loopback address {host!r} without JUDGE_MCP_HTTP_TOKEN; "
            "set a token or bind 127.0.0.1"
        )
    if token and len(token) < MIN_REMOTE_TOKEN_CHARS and not is_loopback(host):
        raise SystemExit(
            f"refusing to serve HTTP on non-loopback address {host!r} with a JUDGE_MCP_HTTP_TOKEN of {len(token)} "
            f"characters; use at least {MIN_REMOTE_TOKEN_CHARS} (e.g. `export JUDGE_MCP_HTTP_TOKEN=$(openssl rand -hex 32)`)"
        )
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    return BearerAuth(app, token) if token else app


def endpoint_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 literal needs brackets
    return f"http://{shown}:{port}/mcp"


async def serve_http(server: MCPServer, *, host: str, port: int, token: str | None) -> None:
    import sys

    import uvicorn

    config = uvicorn.Config(http_app(server, host=host, token=token), host=host, port=port, log_level="warning")
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
