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

LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="judge-mcp"'), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer, *, host: str, token: str | None) -> Any:
    if not token and not is_loopback(host):
        raise SystemExit(
            f"refusing to serve HTTP on non-loopback address {host!r} without JUDGE_MCP_HTTP_TOKEN; "
            "set a token or bind 127.0.0.1"
        )
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    return BearerAuth(app, token) if token else app


async def serve_http(server: MCPServer, *, host: str, port: int, token: str | None) -> None:
    import uvicorn

    config = uvicorn.Config(http_app(server, host=host, token=token), host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()
