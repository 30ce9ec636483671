"""Streamable HTTP serving: the MCP app at /mcp behind a bearer-token check and connection admission.

With `JUDGE_MCP_HTTP_TOKEN` set, every request must carry `Authorization: Bearer <token>` (compared in constant
time, answered 401 as soon as the headers are in). Without a token the server only binds a loopback address.
Connections are admitted by state and per peer address (transports/admission.py): unfinished and idle ones are
bounded apart from working requests, and overload is a 503 with Retry-After.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from judge_mcp.config.settings import MIN_REMOTE_TOKEN_CHARS, ConfigError
from judge_mcp.contract.images import HTTP_BODY_BYTES
from judge_mcp.server.transports.admission import (
    HEADER_TIMEOUT_S, Admission, Gate, Limits, admitted_protocol, default_limits,
)
from judge_mcp.server.transports.probes import Ready, with_probes

LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


def http_app(
    server: MCPServer, *, host: str, token: str | None, admission: Admission | None = None, stateless: bool = False,
    max_body: int = HTTP_BODY_BYTES,
) -> Any:
    """The MCP app at /mcp behind the admission gate (the token check, the bound on working requests)."""
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
    # The request-body limit (MCP's default is 4 MiB) fits a call's images by default (JUDGE_MCP_HTTP_MAX_BODY_BYTES).
    if token:
        app = server.streamable_http_app(streamable_http_path="/mcp", host=host, stateless_http=stateless, max_request_body_size=max_body)
    else:
        app = server.streamable_http_app(
            streamable_http_path="/mcp", host=host, transport_security=rebinding_guard(host), stateless_http=stateless,
            max_request_body_size=max_body,
        )
    return Gate(app, admission or Admission(), token)


KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this (uvicorn's timeout_keep_alive)


def header_timeout_protocol(timeout_s: float = HEADER_TIMEOUT_S) -> type:
    """The h11 protocol with the header timeout alone (no admission bookkeeping): see admission.admitted_protocol."""
    return admitted_protocol(None, timeout_s)


def endpoint_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 literal needs brackets
    return f"http://{shown}:{port}/mcp"


async def serve_http(
    server: MCPServer, *, host: str, port: int, token: str | None, stateless: bool = False, ready: Ready | None = None,
    limits: Limits | None = None, max_body: int = HTTP_BODY_BYTES, on_interrupt: Callable[[bool], None] | None = None,
) -> None:
    """Serve until stopped. `stateless`: no MCP sessions (replicas behind a load balancer; README "Replicas");
    `ready`: the readiness check behind /readyz (transports/probes.py), answered before the admission gate (no token);
    `limits`: the admission bounds (default: admission.default_limits); `max_body`: the request-body limit in bytes;
    `on_interrupt(again)`: told of each Ctrl-C before uvicorn acts on it (the first waits for the calls in flight,
    a second stops now)."""
    import sys

    import uvicorn

    admission = Admission(limits or default_limits())
    config = uvicorn.Config(
        with_probes(http_app(server, host=host, token=token, admission=admission, stateless=stateless, max_body=max_body), ready),
        host=host,
        port=port,
        log_level="warning",
        http=admitted_protocol(admission),
        timeout_keep_alive=KEEP_ALIVE_S,
        limit_concurrency=None,  # admission bounds connections by state instead (uvicorn's counts them all alike)
        backlog=admission.limits.pending_total,
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
    original_exit = userver.handle_exit

    def handle_exit(sig: int, frame: Any) -> None:  # uvicorn installs this (looked up on the instance) for SIGINT/SIGTERM
        if sig != signal.SIGINT or on_interrupt is None:
            return original_exit(sig, frame)
        # Ctrl-C as uvicorn's handler would (the first: a graceful stop, a second: now), but not recorded for uvicorn
        # to raise again once it has stopped: that raise lands in the tasks still closing and prints their tracebacks.
        on_interrupt(userver.should_exit)
        if userver.should_exit:
            userver.force_exit = True
            # the calls still running are cancelled as the loop closes: expected now, so not logged as tracebacks
            logging.getLogger("uvicorn.error").disabled = True
        userver.should_exit = True

    userver.handle_exit = handle_exit  # type: ignore[method-assign]
    await userver.serve()
