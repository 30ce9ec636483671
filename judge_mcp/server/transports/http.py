"""Streamable HTTP serving: the MCP app at /mcp behind a bearer-token check and connection admission.

With `JUDGE_MCP_HTTP_TOKEN` (tenant `default`) or `JUDGE_MCP_HTTP_TOKENS` (a file of `TOKEN TENANT` lines,
tenants.py) set, every request must carry `Authorization: Bearer <token>` (answered 401 as soon as the headers are
in); the token names the request's tenant. Without a token the server only binds a loopback address.
Connections are admitted by state and per peer address (transports/admission.py): unfinished and idle ones are
bounded apart from working requests, and overload is a 503 with Retry-After.
"""

from __future__ import annotations

import sys

import ipaddress
import logging
import signal
from collections.abc import Callable, Container, Mapping
from functools import partial
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from judge_mcp import tenants
from judge_mcp.config.settings import MIN_REMOTE_TOKEN_CHARS, ConfigError
from judge_mcp.contract.images import HTTP_BODY_BYTES
from judge_mcp.server.transports.body_limit import BodyLimit
from judge_mcp.server.transports.admission import (
    HEADER_TIMEOUT_S, Admission, Gate, Limits, admitted_protocol, default_limits,
)
from judge_mcp.server.transports.probes import Ready, with_probes
from judge_mcp.server.transports.oauth import JwtVerifier, OAuthSettings
from judge_mcp.server.transports.sessions import SessionQuota

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


Tokens = str | Mapping[str, str] | tenants.TokenFile | None


def _check_tokens(tokens: Mapping[str, str], host: str) -> None:
    """Refuse a token shorter than MIN_REMOTE_TOKEN_CHARS on a non-loopback bind (a ConfigError naming its tenant)."""
    shortest = min(tokens, key=len, default="")
    if tokens and len(shortest) < MIN_REMOTE_TOKEN_CHARS and not is_loopback(host):
        owner = tokens[shortest]
        named = "a JUDGE_MCP_HTTP_TOKEN" if owner == tenants.DEFAULT else f"a token of tenant {owner!r} (JUDGE_MCP_HTTP_TOKENS)"
        raise ConfigError(
            f"refusing to serve HTTP on non-loopback address {host!r} with {named} of {len(shortest)} "
            f"characters; use at least {MIN_REMOTE_TOKEN_CHARS} (e.g. `export JUDGE_MCP_HTTP_TOKEN=$(openssl rand -hex 32)`)"
        )


def http_app(
    server: MCPServer, *, host: str, token: Tokens, admission: Admission | None = None, stateless: bool = False,
    max_body: int = HTTP_BODY_BYTES, ready: Ready | None = None, oauth: OAuthSettings | JwtVerifier | None = None,
) -> Any:
    """The MCP app at /mcp and the health probes (transports/probes.py) behind the admission gate (the token check,
    the bound on working requests, the session quota). `token`: the one token of tenant `default`, every token and
    its tenant, or a tokens file reread when it changes (tenants.py); None: no token (loopback only, tenant `local`).
    `oauth`: JWT access tokens of an issuer are accepted too, the tenant taken from a claim (transports/oauth.py)."""
    # Refusals are ConfigErrors: `judge-mcp serve` exits 2 with them, as with any other configuration error.
    if isinstance(token, tenants.TokenFile):
        tokens = dict(token.tokens)
        token.check = partial(_check_tokens, host=host)  # a reread file is held to the same rules as at start
    else:
        tokens = {token: tenants.DEFAULT} if isinstance(token, str) else (dict(token) if token else {})
    if not tokens and oauth is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on non-loopback address {host!r} without JUDGE_MCP_HTTP_TOKEN; "
            "set a token or bind 127.0.0.1"
        )
    _check_tokens(tokens, host)
    # The request-body limit (MCP's default is 4 MiB) fits a call's images by default (JUDGE_MCP_HTTP_MAX_BODY_BYTES).
    # max_sessions=None: sessions are bounded per tenant and per peer by the gate (transports/sessions.py), so that one
    # tenant's flood never fills an overall bound that every other tenant's new clients would meet too.
    common: dict[str, Any] = {"streamable_http_path": "/mcp", "host": host, "stateless_http": stateless, "max_request_body_size": max_body,
                              "max_sessions": None}
    if tokens or oauth is not None:
        app = server.streamable_http_app(**common)
    else:
        app = server.streamable_http_app(**common, transport_security=rebinding_guard(host))
    manager = server.session_manager
    manager.asgi_app = BodyLimit(manager._handle_request, max_body)  # type: ignore[assignment]  # noqa: SLF001 - the SDK's copies the body twice
    admission = admission or Admission()
    limits = admission.limits
    quota = SessionQuota(limits.sessions_per_tenant, limits.sessions_per_peer, live=lambda: _live_sessions(server))
    gate_tokens = token if isinstance(token, tenants.TokenFile) else (tokens or None)
    verifier = oauth if isinstance(oauth, JwtVerifier) or oauth is None else JwtVerifier(oauth)
    return Gate(with_probes(app, ready), admission, gate_tokens, quota, oauth=verifier)


def _live_sessions(server: MCPServer) -> Container[str]:
    """The session ids the SDK's session manager still holds (a private table of the pinned SDK; none when it has
    no manager yet)."""
    try:
        return server.session_manager._server_instances  # noqa: SLF001
    except (AttributeError, RuntimeError):
        return {}


KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this (uvicorn's timeout_keep_alive)


def header_timeout_protocol(timeout_s: float = HEADER_TIMEOUT_S) -> type:
    """The h11 protocol with the header timeout alone (no admission bookkeeping): see admission.admitted_protocol."""
    return admitted_protocol(None, timeout_s)


def endpoint_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 literal needs brackets
    return f"http://{shown}:{port}/mcp"


async def serve_http(
    server: MCPServer, *, host: str, port: int, token: Tokens, stateless: bool = False, ready: Ready | None = None,
    limits: Limits | None = None, max_body: int = HTTP_BODY_BYTES, oauth: OAuthSettings | None = None,
    on_interrupt: Callable[[bool], None] | None = None,
) -> None:
    """Serve until stopped. `stateless`: no MCP sessions (replicas behind a load balancer; docs/http.md);
    `ready`: the readiness check behind /readyz (transports/probes.py), behind the admission gate (no token);
    `limits`: the admission bounds (default: admission.default_limits); `max_body`: the request-body limit in bytes;
    `on_interrupt(again)`: told of each Ctrl-C before uvicorn acts on it (the first waits for the calls in flight,
    a second stops now)."""
    import uvicorn  # lazy: only an HTTP server loads uvicorn

    admission = Admission(limits or default_limits())
    config = uvicorn.Config(
        http_app(server, host=host, token=token, admission=admission, stateless=stateless, max_body=max_body, ready=ready, oauth=oauth),
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
    table = token.tokens if isinstance(token, tenants.TokenFile) else token
    named = set(table.values()) - {tenants.DEFAULT} if isinstance(table, Mapping) else set()
    count = len(set(table.values())) if isinstance(table, Mapping) else 0
    where = f"JUDGE_MCP_HTTP_TOKENS: {count} tenant{'s' if count != 1 else ''}" if named else "JUDGE_MCP_HTTP_TOKEN"
    where += f"; or an OAuth token of {oauth.issuer}" if oauth is not None else ""
    need = f"a bearer token is required ({where})" if token or oauth is not None else "no token required (loopback only)"
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
