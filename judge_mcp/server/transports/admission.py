"""Who gets served over HTTP: connections are admitted by what they are doing, and per peer address.

A connection is in one of three states. *Pending*: it has not finished a request's headers (a new connection, or a
client sending slowly). *Working*: a request is in progress that passed the token check. *Idle*: kept alive between
requests. uvicorn's own `limit_concurrency` counts every connection alike, so one client holding a few hundred
half-sent requests made every other client's calls fail with 503. Here:

- pending connections are bounded per peer address (`pending_per_peer`) and in all (`pending_total`). A peer past
  its bound loses its oldest pending connections that have had `pending_grace_s` to send their headers (at its next
  connection, and by a sweep), so a flood of unfinished connections evicts its own members, while a burst of real
  clients connecting at once (whose headers follow within milliseconds) is left alone; past the overall bound the
  oldest pending connections are closed whatever their age. A pending connection is also closed when no request
  began on it for `header_timeout_s`;
- a request with a missing or wrong token is answered 401 as soon as its headers are in (before its body is read)
  and its connection closed: it never becomes working;
- idle connections are bounded the same way (`idle_per_peer`, `idle_total`, oldest closed first) and by uvicorn's
  keep-alive timeout;
- working requests are bounded in all (`max_working`): past it a request gets 503 with `Retry-After` and its
  connection is closed. The default is sized for what one server does with them: every judging call waits on its
  backend's concurrency (8 or 16 at once by default), so 1,024 calls in flight is already a queue of minutes; more
  would be admitted only to wait;
- the health probes (/healthz, /readyz) need no token but are admitted like every other request: their connections
  are pending, working and idle, bounded as above (a flood of kept-alive probe connections once held every file
  descriptor, issue 34);
- MCP sessions are bounded per tenant and per tenant and address (transports/sessions.py).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge_mcp import tenants
from judge_mcp.server.transports import oauth
from judge_mcp.server.transports.issuer_keys import Busy
from judge_mcp.server.transports.probes import PATHS as PROBE_PATHS
from judge_mcp.server.transports.probes import fast_answer
from judge_mcp.server.transports.sessions import SessionQuota, opens_session

HEADER_TIMEOUT_S = 10.0  # a connection must begin a request within this (a slow-loris client is closed)

# RFC 6750 section 3: `invalid_token` tells a client its token is wrong (or missing), so it reports that instead of
# starting an OAuth flow to discover how to authorise.
CHALLENGE = b'Bearer realm="judge-mcp", error="invalid_token", error_description="missing or wrong bearer token"'


@dataclass(frozen=True)
class Limits:
    max_working: int = 1024  # requests in progress at once; past it 503 with Retry-After
    pending_per_peer: int = 64  # connections of one address that have not finished a request's headers
    pending_total: int = 1024
    pending_grace_s: float = 2.0  # a peer's pending connections past its bound are closed only once this old
    idle_per_peer: int = 64  # kept-alive connections of one address between requests
    idle_total: int = 1024
    retry_after_s: int = 1
    header_timeout_s: float = HEADER_TIMEOUT_S
    sessions_per_tenant: int = 1000  # open MCP sessions of one tenant (transports/sessions.py)
    sessions_per_peer: int = 256  # open MCP sessions opened from one address


def default_limits() -> Limits:
    """Limits for this process: the defaults, or a quarter of the open-file limit for each bound when that is lower
    (pending, idle and working connections each hold a file descriptor, and so do the backends' connections)."""
    try:
        # lazy: uvicorn and the process limits load only for an HTTP server
        import resource

        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):  # no resource module (Windows)
        return Limits()
    base = Limits()
    if files == resource.RLIM_INFINITY or files // 4 >= base.max_working:
        return base
    quarter = max(16, files // 4)
    return Limits(max_working=quarter, pending_total=quarter, idle_total=quarter,
                  pending_per_peer=min(base.pending_per_peer, quarter), idle_per_peer=min(base.idle_per_peer, quarter))


def peer_of(client: Any) -> str:
    return str(client[0]) if client else "?"


class _Pool:
    """Connections in one state, oldest first, overall and per peer address (with when each entered it)."""

    def __init__(self) -> None:
        self.all: OrderedDict[Any, Any] = OrderedDict()  # client (host, port) -> protocol
        self.by_peer: dict[str, OrderedDict[Any, Any]] = {}
        self.since: dict[Any, float] = {}

    def __len__(self) -> int:
        return len(self.all)

    def add(self, client: Any, protocol: Any) -> None:
        self.all[client] = protocol
        self.by_peer.setdefault(peer_of(client), OrderedDict())[client] = protocol
        self.since[client] = time.monotonic()

    def remove(self, client: Any, protocol: Any = None) -> Any:
        """The protocol removed (only if it is `protocol`, when given), or None."""
        found = self.all.get(client)
        if found is None or (protocol is not None and found is not protocol):
            return None
        del self.all[client]
        del self.since[client]
        mine = self.by_peer[peer_of(client)]
        del mine[client]
        if not mine:
            del self.by_peer[peer_of(client)]
        return found

    def peer_count(self, peer: str) -> int:
        return len(self.by_peer.get(peer, ()))

    def age(self, client: Any) -> float:
        return time.monotonic() - self.since[client]

    def oldest(self, peer: str | None = None) -> Any:
        return next(iter(self.all if peer is None else self.by_peer[peer]))


class Admission:
    """The states of one server's connections (see the module doc). Used on the event loop's thread only."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.working = 0
        self._by_client: dict[Any, Any] = {}  # (host, port) -> protocol, every open connection
        self._pending, self._idle = _Pool(), _Pool()
        self.evicted = {"pending": 0, "idle": 0}
        self.refused = {"unauthorised": 0, "overloaded": 0, "sessions": 0}
        self._sweep: Any = None  # the scheduled sweep of peers past their pending bound

    # -- the protocol's side ------------------------------------------------------------------------------------
    def connected(self, protocol: Any) -> None:
        client = protocol.client
        self._by_client[client] = protocol
        self._pending.add(client, protocol)
        limits = self.limits
        if self._pending.peer_count(peer_of(client)) > limits.pending_per_peer:
            self._prune(peer_of(client))
            if self._sweep is None:
                self._sweep = protocol.loop.call_later(limits.pending_grace_s, self._sweep_pending, protocol.loop)
        while len(self._pending) > limits.pending_total:
            self._evict(self._pending, self._pending.oldest(), "pending")

    def lost(self, protocol: Any) -> None:
        client = protocol.client
        if self._by_client.get(client) is protocol:
            del self._by_client[client]
        self._pending.remove(client, protocol)
        self._idle.remove(client, protocol)

    # -- the gate's side (per request) ----------------------------------------------------------------------------
    def begin(self, client: Any) -> None:
        """A request passed the gate: its connection is working."""
        self.leave(client)
        self.working += 1

    def end(self, client: Any) -> None:
        """Its response is done: the connection is idle (if kept alive). Idle connections past a bound are closed
        oldest first at once (a client reconnects when it needs one)."""
        self.working -= 1
        protocol = self._by_client.get(client)
        if protocol is None or protocol.transport is None or protocol.transport.is_closing():
            return
        self._idle.add(client, protocol)
        peer = peer_of(client)
        while self._idle.peer_count(peer) > self.limits.idle_per_peer:
            self._evict(self._idle, self._idle.oldest(peer), "idle")
        while len(self._idle) > self.limits.idle_total:
            self._evict(self._idle, self._idle.oldest(), "idle")

    def leave(self, client: Any) -> None:
        """The connection is neither pending nor idle now (working, or refused and closing)."""
        self._pending.remove(client)
        self._idle.remove(client)

    def counts(self) -> dict[str, int]:
        return {"pending": len(self._pending), "working": self.working, "idle": len(self._idle)}

    # -- bounds ---------------------------------------------------------------------------------------------------
    def _prune(self, peer: str) -> None:
        """Close `peer`'s oldest pending connections past its bound that have had their grace."""
        pool, limits = self._pending, self.limits
        while pool.peer_count(peer) > limits.pending_per_peer:
            oldest = pool.oldest(peer)
            if pool.age(oldest) < limits.pending_grace_s:
                return
            self._evict(pool, oldest, "pending")

    def _sweep_pending(self, loop: Any) -> None:
        self._sweep = None
        over = [peer for peer, mine in self._pending.by_peer.items() if len(mine) > self.limits.pending_per_peer]
        for peer in over:
            self._prune(peer)
        if any(self._pending.peer_count(peer) > self.limits.pending_per_peer for peer in over):
            self._sweep = loop.call_later(self.limits.pending_grace_s, self._sweep_pending, loop)

    def _evict(self, pool: _Pool, client: Any, state: str) -> None:
        protocol = pool.remove(client)
        self.evicted[state] += 1
        if protocol.transport is not None and not protocol.transport.is_closing():
            protocol.transport.close()


UNAUTHORISED_CODE = -32001  # JSON-RPC's implementation-defined server error range: the request's token was refused


def _reply(status: int, message: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> tuple[dict, dict]:
    """A refusal's response. A 401's body is a JSON-RPC error object (id null: the request's body is never read), which
    MCP clients (the Python SDK, fastmcp, Claude Code) show as the error, where a bare status gave them only "Server
    returned an error response"; the other refusals keep `{"error": message}`."""
    if status == 401:
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHORISED_CODE, "message": message}}).encode()
    else:
        body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close"), *extra]
    return {"type": "http.response.start", "status": status, "headers": headers}, {"type": "http.response.body", "body": body}


def _bearer(scope: dict) -> bytes | None:
    """The bearer token of the request's Authorization header, or None when there is none (no header, another
    scheme, or an empty token)."""
    header = next((value for name, value in scope.get("headers", []) if name.lower() == b"authorization"), b"")
    scheme, _, presented = header.partition(b" ")
    presented = presented.strip()
    return presented if scheme.lower() == b"bearer" and presented else None


class Gate:
    """Pure ASGI middleware in front of everything served: the token check (401, see tenants.Tenants; skipped without
    tokens, and for the health probes), then the working bound (503 with Retry-After), then the session quota for a
    request that opens an MCP session (transports/sessions.py), then the request runs, counted as working (probes
    included: their connections are pending, working and idle like any other). The request's tenant goes to the app
    in the scope (tenants.SCOPE_KEY), and as the SDK's authenticated user, so the SDK serves a session only to the
    tenant that opened it."""

    def __init__(
        self, app: Any, admission: Admission, token: str | Mapping[str, str] | tenants.TokenFile | None, sessions: SessionQuota | None = None,
        oauth: Any = None,
    ) -> None:
        self.app, self.admission = app, admission
        if isinstance(token, tenants.TokenFile):  # a tokens file, reread when it changes
            self._tokens: Callable[[], tenants.Tenants] | None = token.tenants
        else:
            table = tenants.Tenants({token: tenants.DEFAULT} if isinstance(token, str) else token) if token else None
            self._tokens = None if table is None else (lambda: table)
        self._oauth = oauth  # transports/oauth.JwtVerifier: JWT access tokens of an issuer, the tenant from a claim
        limits = admission.limits
        self.sessions = sessions or SessionQuota(limits.sessions_per_tenant, limits.sessions_per_peer)
        self._users: dict[str, Any] = {}

    def _unauthorised(self, scope: dict) -> str:
        """What a refused request is told: whether its bearer token was missing or wrong, and where the server's
        tokens come from."""
        where = "JUDGE_MCP_HTTP_TOKEN or JUDGE_MCP_HTTP_TOKENS"
        if self._oauth is not None:
            where += f", or an access token of the OAuth issuer {self._oauth.settings.issuer} for {self._oauth.settings.audience}"
        if _bearer(scope) is None:
            return f"missing bearer token: send 'Authorization: Bearer <token>' with a token of this server ({where})"
        return f"wrong bearer token: the token sent is not one of this server's ({where}); check it or ask for a new one"

    async def _tenant(self, scope: dict) -> str | None:
        """The tenant the request's bearer token names, or None. Raises issuer_keys.Busy (answered 503) when its
        address has too many requests waiting for the OAuth issuer's keys."""
        if self._tokens is None and self._oauth is None:
            return tenants.LOCAL  # a loopback server without a token: whoever reaches it is on this machine
        presented = _bearer(scope)
        if presented is None:
            return None
        found = self._tokens().tenant(presented) if self._tokens is not None else None
        if found is None and self._oauth is not None and oauth.looks_like_jwt(presented):
            found = await self._oauth.check(presented.decode("ascii", "replace"), peer_of(scope.get("client")))
        return found

    def _user(self, tenant: str) -> Any:
        user = self._users.get(tenant)
        if user is None:
            # lazy: the SDK's auth types load when a token first names a tenant
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from mcp.server.auth.provider import AccessToken

            user = self._users[tenant] = AuthenticatedUser(AccessToken(token="", client_id=tenant, scopes=[]))
        return user

    async def _refuse(self, send: Any, client: Any, status: int, message: str, reason: str) -> None:
        admission = self.admission
        admission.leave(client)
        admission.refused[reason] = admission.refused.get(reason, 0) + 1
        if status == 401:
            extra = [(b"www-authenticate", CHALLENGE)]
        else:
            extra = [(b"retry-after", str(admission.limits.retry_after_s).encode())]
        for part in _reply(status, message, extra):
            await send(part)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self._oauth is not None:  # the issuer's keys fetched at start (lifespan) and refreshed when due, never waited for
            self._oauth.keys.refresh_if_due()
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client, admission = scope.get("client"), self.admission
        metadata = self._oauth is not None and str(scope.get("path", "")).startswith(oauth.METADATA_PATH)
        probe = scope.get("path") in PROBE_PATHS or metadata
        try:
            tenant = None if probe else await self._tenant(scope)
        except Busy:
            message = f"overloaded: too many requests from this address wait for the OAuth issuer's keys; retry after {admission.limits.retry_after_s} s"
            await self._refuse(send, client, 503, message, "overloaded")
            return
        if not probe and tenant is None:
            await self._refuse(send, client, 401, self._unauthorised(scope), "unauthorised")
            return
        if admission.working >= admission.limits.max_working:
            retry = admission.limits.retry_after_s
            await self._refuse(send, client, 503, f"overloaded: {admission.working} requests in progress; retry after {retry} s", "overloaded")
            return
        if tenant is not None:
            scope = {**scope, tenants.SCOPE_KEY: tenant, "user": self._user(tenant)}
            if opens_session(scope):
                refusal = self.sessions.refusal(tenant, peer_of(client))
                if refusal is not None:
                    await self._refuse(send, client, 503, refusal, "sessions")
                    return
                send = self.sessions.watch(send, tenant, peer_of(client))
        admission.begin(client)
        try:
            if metadata:  # where a client gets a token (RFC 9728): no token needed, counted like the probes
                body = self._oauth.metadata()
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await self.app(scope, receive, send)
        finally:
            admission.end(client)


def _fast_probe(protocol: Any, data: bytes) -> tuple[bytes, bool] | None:
    """probes.fast_answer for `data` arriving on `protocol` (uvicorn's H11Protocol) between requests: no request in
    progress and nothing buffered in h11; else None."""
    # lazy: h11 loads with uvicorn, only for an HTTP server
    import h11

    cycle, conn = protocol.cycle, protocol.conn
    if cycle is not None and not cycle.response_complete:
        return None
    if conn.our_state is not h11.IDLE or conn.their_state is not h11.IDLE or conn.trailing_data[0]:
        return None
    return fast_answer(data)


def _answer_probe(protocol: Any, admission: Admission | None, response: bytes, close: bool) -> None:
    """A probe's response written at once on `protocol`, its connection counted by admission as for any request
    (working, then idle) and kept alive as uvicorn keeps one after a response. h11 never saw the request, so its state
    stays between requests."""
    protocol._unset_keepalive_if_required()  # noqa: SLF001 - uvicorn's own step before a request
    if admission is not None:  # working for no longer than the write below, which never waits
        admission.begin(protocol.client)
        admission.end(protocol.client)
    transport = protocol.transport
    transport.write(response)
    protocol.server_state.total_requests += 1
    if close:
        transport.close()
    if not transport.is_closing():
        protocol.timeout_keep_alive_task = protocol.loop.call_later(protocol.timeout_keep_alive, protocol.timeout_keep_alive_handler)


def admitted_protocol(admission: Admission | None = None, timeout_s: float | None = None) -> type:
    """uvicorn's h11 protocol, telling `admission` of each connection, and closing a connection that has no request
    in progress and began none in the last `timeout_s`: a client that opens connections and never finishes its
    headers no longer holds them open (uvicorn itself times out only the idle time after a response). A request in
    progress (a long tool call, an SSE stream) is never cut."""
    # lazy: uvicorn and the process limits load only for an HTTP server
    from uvicorn.protocols.http.h11_impl import H11Protocol

    period = timeout_s if timeout_s is not None else (admission.limits.header_timeout_s if admission else HEADER_TIMEOUT_S)

    class AdmittedProtocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._probes_answered = 0
            self._header_check = self.loop.call_later(period, self._check_progress, (None, 0))
            if admission is not None:
                admission.connected(self)

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            fast = _fast_probe(self, data)
            if fast is not None:  # a plain GET /healthz between requests: answered here (probes.fast_answer)
                self._probes_answered += 1
                _answer_probe(self, admission, *fast)
                return
            super().data_received(data)
            if admission is not None and self.cycle is not cycle:  # a request's headers are in: no longer pending
                admission.leave(self.client)

        def _check_progress(self, seen: Any) -> None:
            if self.transport.is_closing():
                return
            cycle = self.cycle
            busy = cycle is not None and not cycle.response_complete
            now = (cycle, self._probes_answered)
            if not busy and now == seen:  # no request began in a whole period: headers never finished
                self.transport.close()
                return
            self._header_check = self.loop.call_later(period, self._check_progress, now)

        def connection_lost(self, exc: Exception | None) -> None:
            self._header_check.cancel()
            if admission is not None:
                admission.lost(self)
            super().connection_lost(exc)

    return AdmittedProtocol
