"""Health endpoints for replicas behind a load balancer, behind the admission gate (which counts their connections
like any other, but asks them for no token: admission.Gate) and in front of the MCP app: `GET /healthz` is
liveness (the process answers: 200), `GET /readyz` readiness (200 while the database answers and has every
migration applied, else 503, storage/health.py). Both need no token and answer a fixed status word and
nothing else; any other method on them is 405. Every other path goes to the MCP app unchanged.

Probes are answered cheaply and never take a worker thread the tools use: a kept-alive connection's plain
`GET /healthz` is answered by the HTTP protocol itself as soon as its bytes arrive (`fast_answer`, used by
admission.admitted_protocol: no request object, no task), and readiness is checked at most once per READY_FOR_S,
one check at a time, whatever number of probes ask (storage/health.py runs it on a thread limiter of its own)."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

Ready = Callable[[], Awaitable[str | None]]  # None when ready, else a short fixed reason
PATHS = ("/healthz", "/readyz")
READY_FOR_S = 1.0  # a readiness answer is given again to the probes of the next second

_LIVE = json.dumps({"status": "ok"}).encode()
_FAST_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\ncache-control: no-store\r\n" % len(_LIVE)
# request line -> (HEAD, HTTP/1.0)
_FAST_LINES = {b"GET /healthz HTTP/1.1": (False, False), b"HEAD /healthz HTTP/1.1": (True, False),
               b"GET /healthz HTTP/1.0": (False, True), b"HEAD /healthz HTTP/1.0": (True, True)}
_FAST_REFUSED = (b"\ncontent-length:", b"\ntransfer-encoding:", b"\nupgrade:", b"\nexpect:")
MAX_FAST_BYTES = 4096


def fast_answer(data: bytes) -> tuple[bytes, bool] | None:
    """The whole HTTP response to `data`, and whether the connection closes after it, when `data` is exactly one
    `GET /healthz` or `HEAD /healthz` request (HTTP/1.1 or 1.0) without a body; else None (the ASGI path answers it).
    The connection is kept alive as h11 would keep it: HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with
    `Connection: keep-alive`. Linear in `data`, at most MAX_FAST_BYTES."""
    if len(data) > MAX_FAST_BYTES or data.find(b"\r\n\r\n") != len(data) - 4:
        return None
    line, _, headers = data.partition(b"\r\n")
    form = _FAST_LINES.get(line)
    if form is None:
        return None
    head, old = form
    lowered = b"\n" + headers.lower().replace(b" ", b"").replace(b"\t", b"")
    if any(name in lowered for name in _FAST_REFUSED):
        return None
    close = b"\nconnection:keep-alive\r" not in lowered if old else b"\nconnection:close\r" in lowered
    connection = b"connection: close\r\n" if close else (b"connection: keep-alive\r\n" if old else b"")
    response = _FAST_HEAD + connection + b"\r\n" + (b"" if head else _LIVE)
    return response, close


async def _answer(send: Any, status: int, body: dict[str, str], *, head: bool = False) -> None:
    data = _LIVE if body == {"status": "ok"} else json.dumps(body).encode()
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
        self._reason: str | None = None
        self._checked: float | None = None  # when the last readiness check finished
        self._checking: anyio.Event | None = None  # set when the check in progress finishes

    async def readiness(self) -> str | None:
        """`ready()`'s answer, checked at most once per READY_FOR_S and by one probe at a time (the others wait for
        its answer)."""
        assert self.ready is not None
        while True:
            if self._checked is not None and time.monotonic() - self._checked < READY_FOR_S:
                return self._reason
            if self._checking is not None:
                await self._checking.wait()
                continue
            self._checking = done = anyio.Event()
            try:
                self._reason = await self.ready()
                self._checked = time.monotonic()
                return self._reason
            finally:
                self._checking = None
                done.set()

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
        reason = None if self.ready is None else await self.readiness()
        if reason is None:
            await _answer(send, 200, {"status": "ready"}, head=head)
        else:
            await _answer(send, 503, {"status": "not ready", "reason": reason}, head=head)


def with_probes(app: Any, ready: Ready | None) -> Any:
    """`app` behind the health endpoints."""
    return Probes(app, ready)
