"""The OAuth issuer's signing keys (its JWKS), fetched on the event loop by one task at a time, never in a worker
thread and never once per request.

A request carrying a JWT only looks its `kid` up in the keys in hand (a dict lookup). The keys are refreshed in the
background every FETCH_EVERY_S (a request that finds them due starts the refresh and does not wait for it), and two
fetches never start closer than MIN_FETCH_GAP_S apart, whatever is sent: a `kid` the issuer did not publish and a
fetch that failed (refused, timed out, HTTP 500, not a key set) are remembered as such until then. A request whose
`kid` is unknown waits only for a fetch that is in flight or that it may start (once per MIN_FETCH_GAP_S: a key the
issuer has just rotated in is found), at most WAITERS_PER_PEER requests of one address at once; any other unknown
`kid` is refused at once. A failed fetch keeps the keys fetched before in use.

So a flood of tokens with made-up `kid`s costs the issuer one fetch per MIN_FETCH_GAP_S, and costs every other
client nothing: no worker thread is taken (anyio's shared limiter serves the store and the tools), no lock is held
across a fetch, and a slow or unreachable issuer delays only the requests that wait for its keys.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("judge_mcp.oauth")

FETCH_EVERY_S = 300.0  # the keys in hand are refreshed (in the background) this often
MIN_FETCH_GAP_S = 30.0  # two fetches never start closer than this, whatever tokens arrive
FETCH_TIMEOUT_S = 5.0  # a fetch not done by then failed
MAX_JWKS_BYTES = 1 << 20  # a key set larger than this is refused (a real one is a few kB)
WAITERS_PER_PEER = 8  # requests of one address waiting for a fetch at once; more are told to retry


class Busy(Exception):
    """Too many requests of this address already wait for the issuer's keys (answered 503 with Retry-After)."""


def _signing_keys(body: bytes) -> dict[str, Any]:
    """kid -> PyJWK of a JWKS document's signing keys (`use` sig or absent, with a `kid`). Raises ValueError naming
    what is wrong with the document (never its content)."""
    # lazy: PyJWT loads only when OAuth is configured
    import jwt

    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("the key set is not JSON") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("the key set has no `keys` list")
    found: dict[str, Any] = {}
    for entry in keys:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str) or entry.get("use", "sig") != "sig":
            continue
        try:
            found[entry["kid"]] = jwt.PyJWK(entry)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):  # a key this server cannot use: skipped, as PyJWT does
            continue
    if not found:
        raise ValueError("the key set holds no usable signing key with a `kid`")
    return found


async def fetch_jwks(url: str, timeout_s: float = FETCH_TIMEOUT_S) -> bytes:
    """The body of the issuer's key set at `url`. Raises OSError-like errors, asyncio.TimeoutError or ValueError
    (HTTP status, too large)."""
    # lazy: aiohttp's client and the backends' proxy and TLS rules load only when OAuth is configured
    import aiohttp
    from judge_mcp.backends.client import env_proxy, tls_context

    tls = tls_context() if url.lower().startswith("https:") else True
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()) as session:
        async with session.get(url, proxy=env_proxy(url), ssl=tls, max_redirects=3,
                               headers={"accept": "application/json"}) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            body = await response.content.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError(f"the key set is larger than {MAX_JWKS_BYTES:,} bytes")
    return body


class IssuerKeys:
    """The signing keys of one issuer (see the module doc). Used on one event loop's thread; `clock` is for tests."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.monotonic, timeout_s: float = FETCH_TIMEOUT_S):
        self.url, self._clock, self.timeout_s = url, clock, timeout_s
        self.keys: dict[str, Any] = {}
        self.fetches = 0  # fetches started
        self.failures = 0
        self._started: float | None = None  # when the last fetch started
        self._fetched: float | None = None  # when the last fetch succeeded
        self._task: asyncio.Task[None] | None = None
        self._waiting: dict[str, int] = {}

    def _in_flight(self) -> asyncio.Task[None] | None:
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            return None
        return task

    def _may_start(self) -> bool:
        return self._started is None or self._clock() - self._started >= MIN_FETCH_GAP_S

    def _start(self) -> asyncio.Task[None]:
        self._started = self._clock()
        self.fetches += 1
        self._task = asyncio.get_running_loop().create_task(self._refresh())
        return self._task

    def refresh_if_due(self) -> None:
        """Start a background refresh when the keys are due one (never fetched, or fetched FETCH_EVERY_S ago) and
        the gap allows it; never waits."""
        if self._in_flight() is not None or not self._may_start():
            return
        if self._fetched is None or self._clock() - self._fetched >= FETCH_EVERY_S:
            self._start()

    async def key(self, kid: str, peer: str) -> Any:
        """The key `kid` names, or None (unknown, and no fetch it may wait for). Raises Busy when `peer` already has
        WAITERS_PER_PEER requests waiting for a fetch."""
        found = self.keys.get(kid)
        if found is not None:
            return found
        task = self._in_flight()
        if task is None:
            if not self._may_start():
                return None  # unknown until the next fetch may start: refused at once
            task = self._start()
        waiting = self._waiting.get(peer, 0)
        if waiting >= WAITERS_PER_PEER:
            raise Busy(peer)
        self._waiting[peer] = waiting + 1
        try:
            await asyncio.shield(task)  # a waiter that goes away does not cancel the fetch
        finally:
            left = self._waiting[peer] - 1
            if left:
                self._waiting[peer] = left
            else:
                del self._waiting[peer]
        return self.keys.get(kid)

    async def _refresh(self) -> None:
        try:
            self.keys = _signing_keys(await fetch_jwks(self.url, self.timeout_s))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of a fetch keeps the keys in hand; logged, never raised
            self.failures += 1
            reason = f"timed out after {self.timeout_s:g} s" if isinstance(exc, asyncio.TimeoutError) else (str(exc) or type(exc).__name__)
            log.warning("JUDGE_MCP_OAUTH_JWKS_URL: fetching the issuer's keys from %s failed (%s); the %d key(s) in hand stay "
                        "in use, next try in %g s at the earliest", self.url, reason, len(self.keys), MIN_FETCH_GAP_S)
            return
        self._fetched = self._clock()
