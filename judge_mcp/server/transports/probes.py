"""Health endpoints for replicas behind a load balancer, in front of everything else (the token check included):
`GET /healthz` is liveness (the process answers: 200), `GET /readyz` readiness (200 while the database answers and
has every migration applied, else 503, storage/health.py). Both need no token and answer a fixed status word and
nothing else; any other method on them is 405. Every other path goes to the MCP app unchanged."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Ready = Callable[[], Awaitable[str | None]]  # None when ready, else a short fixed reason
PATHS = ("/healthz", "/readyz")


async def _answer(send: Any, status: int, body: dict[str, str], *, head: bool = False) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), (b"cache-control", b"no-store")]
    if status == 405:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else data})


class Probes:
    """Pure ASGI: /healthz and /readyz answered here, everything else passed to `app`."""

    def __init__(self, app: Any, ready: Ready | None):
        self.app = app
        self.ready = ready

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") not in PATHS:
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD"):
            await _answer(send, 405, {"status": "method not allowed"})
            return
        head = method == "HEAD"
        if scope["path"] == "/healthz":
            await _answer(send, 200, {"status": "ok"}, head=head)
            return
        reason = None if self.ready is None else await self.ready()
        if reason is None:
            await _answer(send, 200, {"status": "ready"}, head=head)
        else:
            await _answer(send, 503, {"status": "not ready", "reason": reason}, head=head)


def with_probes(app: Any, ready: Ready | None) -> Any:
    """`app` behind the health endpoints."""
    return Probes(app, ready)
