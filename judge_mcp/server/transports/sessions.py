"""MCP sessions (stateful streamable HTTP) bounded per tenant and per peer address.

The SDK bounds sessions only in all (`max_sessions`, 10,000) and ends an idle one after 30 minutes, so one token
holder opening sessions in a loop made every new handshake client of every tenant get 503 for half an hour. Here the
gate (admission.Gate) asks `SessionQuota.refusal` before a request that would open a session (a POST without an
`mcp-session-id` header) and records the session id the response carries: a tenant past `per_tenant` open sessions,
or a peer address past `per_peer` sessions of that tenant, is refused with 503 and Retry-After, and nobody else is
(another tenant's sessions are counted apart, even from the same address: a proxy or a NAT in front of several
tenants). The SDK's own overall bound is lifted (http.http_app): the sum of the tenants' bounds bounds the memory. A session counts until
the SDK forgets it (closed by the client, idle timeout, crash): `live()` gives the ids the SDK still holds, and the
ids it no longer holds are dropped lazily, when their tenant or peer next opens one.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

SESSION_HEADER = b"mcp-session-id"


class SessionQuota:
    def __init__(self, per_tenant: int, per_peer: int, live: Callable[[], Container[str]] | None = None):
        self.per_tenant, self.per_peer = per_tenant, per_peer
        self._live = live
        self.by_tenant: dict[str, dict[str, None]] = {}
        self.by_peer: dict[str, dict[str, None]] = {}  # "TENANT PEER" -> its sessions
        self.refused = 0

    def _count(self, table: dict[str, dict[str, None]], name: str) -> int:
        mine = table.get(name)
        if not mine:
            return 0
        if self._live is not None:
            live = self._live()
            for gone in [sid for sid in mine if sid not in live]:
                del mine[gone]
        if not mine:
            del table[name]
            return 0
        return len(mine)

    def refusal(self, tenant: str, peer: str) -> str | None:
        """Why `tenant` (from `peer`) may not open another session now, or None."""
        if self._count(self.by_tenant, tenant) >= self.per_tenant:
            self.refused += 1
            return f"too many open MCP sessions for this tenant ({self.per_tenant}); close sessions you no longer use (HTTP DELETE) and retry"
        if self._count(self.by_peer, f"{tenant} {peer}") >= self.per_peer:
            self.refused += 1
            return f"too many open MCP sessions of this tenant from this address ({self.per_peer}); close sessions you no longer use (HTTP DELETE) and retry"
        return None

    def opened(self, tenant: str, peer: str, session_id: str) -> None:
        self.by_tenant.setdefault(tenant, {})[session_id] = None
        self.by_peer.setdefault(f"{tenant} {peer}", {})[session_id] = None

    def watch(self, send: Any, tenant: str, peer: str) -> Any:
        """`send`, recording the session id of a response that opens a session (a 2xx with `mcp-session-id`)."""

        async def watched(message: dict) -> None:
            if message.get("type") == "http.response.start" and 200 <= int(message.get("status", 0)) < 300:
                for name, value in message.get("headers", ()):
                    if bytes(name).lower() == SESSION_HEADER:
                        self.opened(tenant, peer, bytes(value).decode("latin-1"))
                        break
            await send(message)

        return watched


def opens_session(scope: dict) -> bool:
    """A request that would open an MCP session: a POST without an `mcp-session-id` header."""
    if scope.get("method") != "POST":
        return False
    return not any(name.lower() == SESSION_HEADER for name, _ in scope.get("headers", ()))
