"""The HTTP endpoint plumbing shared by the wire formats (OpenAI chat completions, Anthropic messages).

`post_json` sends one request and turns every way it can go wrong into a `RetryableError` (connection errors,
timeouts, 408/409/429/5xx including Anthropic's 529 "overloaded", a body that is not a JSON object) or a
`FatalError` (any other 4xx). Credentials sent in the request headers are blanked out of every error message, so
a server that echoes the key back cannot leak it into logs, the verdict log or a tool error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from judge_mcp.backends.base import Backend

from judge_mcp.backends.errors import FatalError, RetryableError
from judge_mcp.backends.retry import parse_retry_after
from judge_mcp.redaction import redact, redact_tree, register

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization")
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # a chat completion is kilobytes; a reply past this is refused
ERROR_BODY_BYTES = 64 * 1024
POOL_SHARD = 1  # connections per httpx pool; a backend gets one pool per POOL_SHARD of its concurrency (HTTPBackend)


def secrets_in(headers: Mapping[str, str]) -> list[str]:
    """The credential values in request headers (`Bearer KEY` yields both the whole value and KEY)."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() not in CREDENTIAL_HEADERS or not value:
            continue
        found.append(value)
        scheme, _, rest = value.partition(" ")
        if rest and scheme.lower() in ("bearer", "basic", "token"):
            found.append(rest.strip())
    # longest first, so "Bearer KEY" is replaced whole before KEY alone
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def error_detail(response: httpx.Response, limit: int = 300, text: str | None = None) -> str:
    """A short, readable cause from an error body: `type: message` from the JSON error shapes of OpenAI
    (`{"error": {"message", "type", "code"}}`) and Anthropic (`{"type": "error", "error": {"type", "message"}}`),
    else the start of the body text. `text` is the body when it was already read from a stream."""
    text = response.text if text is None else text
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            kind = err.get("type") or err.get("code")
            message = err.get("message")
            if message:
                return (f"{kind}: {message}" if kind else str(message))[:limit]
        elif isinstance(err, str) and err:
            return err[:limit]
        if isinstance(body.get("message"), str):
            return body["message"][:limit]
    return text[:limit].strip().replace("\n", " ")


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms` (OpenAI, Anthropic) wins over `retry-after`."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def classify_status(response: httpx.Response, secrets: Iterable[str] = (), text: str | None = None) -> Exception:
    """The error for a non-2xx answer: retryable for 408/409/429/5xx (529 included), fatal for the rest."""
    detail = redact(error_detail(response, text=text), secrets)
    cause = f"HTTP {response.status_code}" + (f": {detail}" if detail else "")
    if response.status_code in RETRYABLE_STATUS:
        return RetryableError(cause, status=response.status_code, retry_after=retry_after_s(response.headers))
    return FatalError(cause, status=response.status_code)


async def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The body, read as it streams in. A success body past `max_bytes` stops the read at once (FatalError: the
    same request would get the same answer); an error body is only needed for its message, so it is cut at
    ERROR_BODY_BYTES and the status decides."""
    if response.status_code >= 400:
        max_bytes = min(max_bytes, ERROR_BODY_BYTES)
    else:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise FatalError(f"reply of {int(declared):,} bytes exceeds the limit of {max_bytes:,} (max_response_bytes)")
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            if response.status_code >= 400:
                break
            raise FatalError(f"reply passed the limit of {max_bytes:,} bytes and was cut off (max_response_bytes)")
    return b"".join(chunks)[:max_bytes]


async def post_json(
    client: httpx.AsyncClient,
    url: str | httpx.URL,
    payload: dict[str, Any],
    headers: dict[str, str],
    backend: str,
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    extra_secrets: Iterable[str] = (),
) -> dict[str, Any]:
    """POST and return the JSON object body, classifying every failure as retryable or fatal. The body is read
    as it streams, up to `max_bytes`, inside the caller's per-attempt timeout."""
    secrets = sorted({*secrets_in(headers), *extra_secrets}, key=len, reverse=True)
    try:
        async with client.stream("POST", url, json=payload, headers=headers) as response:
            raw = await read_capped(response, max_bytes)
    except httpx.TimeoutException as exc:
        raise RetryableError(f"HTTP timeout ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise RetryableError(redact(f"connection error ({type(exc).__name__}: {exc})", secrets)) from exc
    except httpx.HTTPError as exc:  # e.g. a body that fails to decode
        raise RetryableError(redact(f"HTTP error ({type(exc).__name__}: {exc})", secrets)) from exc
    text = raw.decode(response.encoding or "utf-8", errors="replace")
    if response.status_code >= 400:
        raise classify_status(response, secrets, text=text)
    if any(secret in text for secret in secrets):  # a server echoing the key must not get it into the call record
        text = redact(text, secrets)
    try:
        body = json.loads(text)
    except RecursionError:
        raise FatalError(f"HTTP {response.status_code} with a JSON body nested past the parser's limit") from None
    except ValueError:
        snippet = text[:120]
        raise RetryableError(f"HTTP {response.status_code} with a body that is not JSON: {snippet!r}") from None
    if not isinstance(body, dict):
        raise RetryableError(f"HTTP {response.status_code} with a JSON body that is not an object")
    return redact_tree(body, secrets) if secrets else body


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the URL without `user:password@`, (user, password) or None). Percent-escapes in the userinfo are decoded."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, (unquote(parts.username or ""), unquote(parts.password or ""))


class HTTPBackend(Backend):
    """An endpoint: base URL, optional key, pooled httpx clients (POOL_SHARD). Subclasses add the wire format (`_send`)."""

    default_base_url = ""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        **kwargs: Any,
    ):
        super().__init__(name, model, **kwargs)
        if max_response_bytes < 1:
            raise ValueError(f"backend '{name}': max_response_bytes must be >= 1, got {max_response_bytes}")
        self.max_response_bytes = max_response_bytes
        # Credentials in the URL (`http://user:KEY@host/v1`) are sent as basic auth but kept out of `base_url`, which
        # reaches the cache table, the verdict log, log lines and error messages.
        self.base_url, auth = split_userinfo((base_url or self.default_base_url).rstrip("/"))
        self._api_key = api_key
        self._url_secrets = tuple(s for s in (auth and auth[1], auth and f"{auth[0]}:{auth[1]}") if s)
        register(api_key, *self._url_secrets)
        # httpx's own timeout is a backstop; Backend.complete enforces timeout_s per attempt. The pools hold (and keep
        # alive) one connection per request the concurrency limit lets through: httpx's default keeps 20 alive, so
        # above 20 in flight every call closed and reopened a connection. They are shards of at most POOL_SHARD
        # connections each (see `post`): httpcore re-examines every connection of a pool, for each of them, on every
        # request and every response (O(connections²) work, a socket poll included), which at 64 connections in one
        # pool cost ~10 ms of CPU per request and capped throughput at ~50 requests/s; pools of 8 still spent ~0.5 ms
        # per request there (16 concurrent FLIP requests), pools of one connection none. The pools share one TLS
        # context (building one per client reads the CA bundle: ~30 ms each).
        shards = -(-self.concurrency // POOL_SHARD)
        per_shard = -(-self.concurrency // shards)
        tls = httpx.create_ssl_context(trust_env=True) if transport is None else True
        self._clients = [
            httpx.AsyncClient(
                transport=transport,
                verify=tls,
                timeout=httpx.Timeout(self.timeout_s + 5.0),
                limits=httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard, keepalive_expiry=60.0),
                auth=httpx.BasicAuth(*auth) if auth else None,
            )
            for _ in range(shards)
        ]
        self._in_flight = [0] * shards
        self._urls: dict[str, httpx.URL] = {}  # parsed once: httpx parses a str URL on every request (~40 us)

    async def post(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """`post_json` with this endpoint's reply limit and credentials to redact, through the pool with the fewest
        requests in flight (the concurrency limit keeps that below its size, so no request waits for a connection)."""
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        shard = self._in_flight.index(min(self._in_flight))
        self._in_flight[shard] += 1
        try:
            return await post_json(self._clients[shard], parsed, payload, headers, self.name, self.max_response_bytes, self._url_secrets)
        finally:
            self._in_flight[shard] -= 1

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    def identity(self) -> str:
        return f"{self.kind}|{self.base_url}|{self.model}"

    def describe(self) -> str:
        return f"{self.kind} at {self.base_url}, model {self.model}"  # base_url holds no userinfo (split above)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
