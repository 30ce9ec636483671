"""The HTTP endpoint plumbing shared by the wire formats (OpenAI chat completions, Anthropic messages), over aiohttp.

`post_json` sends one request and turns every way it can go wrong into a `RetryableError` (connection errors,
timeouts, 408/409/429/5xx including Anthropic's 529 "overloaded", a body that is not a JSON object) or a
`FatalError` (any other 4xx). Credentials sent in the request headers are blanked out of every error message, so
a server that echoes the key back cannot leak it into logs, the verdict log or a tool error.

The client is aiohttp (issue 15, item 1, chosen by measurement): 16 concurrent requests to a scripted server cost
3.9 ms of client CPU with aiohttp against 14.6 ms through httpx as this module used it (pools of one connection),
and httpx with one pool of 16 did worse (docs/performance.md, "Session 6").
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from judge_mcp import __version__
from judge_mcp.backends.base import Backend
from judge_mcp.backends.errors import FatalError, RetryableError
from judge_mcp.backends.retry import parse_retry_after
from judge_mcp.redaction import contains, redact, redact_tree, register

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization")
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # a chat completion is kilobytes; a reply past this is refused
ERROR_BODY_BYTES = 64 * 1024
USER_AGENT = f"judge-mcp/{__version__}"


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


def error_detail(text: str, limit: int = 300) -> str:
    """A short, readable cause from an error body: `type: message` from the JSON error shapes of OpenAI
    (`{"error": {"message", "type", "code"}}`) and Anthropic (`{"type": "error", "error": {"type", "message"}}`),
    else the start of the body text."""
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
    """Seconds the server asked us to wait: `retry-after-ms` (OpenAI, Anthropic) wins over `retry-after`. `headers`
    is looked up case-insensitively by the caller's mapping (aiohttp's are), or holds lower-case names."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def classify_status(status: int, headers: Mapping[str, str], text: str, secrets: Iterable[str] = ()) -> Exception:
    """The error for a non-2xx answer: retryable for 408/409/429/5xx (529 included), fatal for the rest."""
    detail = redact(error_detail(text), secrets)
    cause = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status in RETRYABLE_STATUS:
        return RetryableError(cause, status=status, retry_after=retry_after_s(headers))
    return FatalError(cause, status=status)


async def read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body, read as it streams in. A success body past `max_bytes` stops the read at once (FatalError: the
    same request would get the same answer); an error body is only needed for its message, so it is cut at
    ERROR_BODY_BYTES and the status decides."""
    if response.status >= 400:
        max_bytes = min(max_bytes, ERROR_BODY_BYTES)
    else:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise FatalError(f"reply of {int(declared):,} bytes exceeds the limit of {max_bytes:,} (max_response_bytes)")
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            if response.status >= 400:
                break
            raise FatalError(f"reply passed the limit of {max_bytes:,} bytes and was cut off (max_response_bytes)")
    return b"".join(chunks)[:max_bytes]


def encode_json(payload: dict[str, Any]) -> bytes:
    """The request body as httpx sent it: compact UTF-8 JSON, NaN refused."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    extra_secrets: Iterable[str] = (),
    proxy: str | None = None,
) -> dict[str, Any]:
    """POST and return the JSON object body, classifying every failure as retryable or fatal. The body is read
    as it streams, up to `max_bytes`, inside the caller's per-attempt timeout. Redirects are not followed (a
    redirect's body is not a completion: it is reported, like any body that is not JSON)."""
    secrets = sorted({*secrets_in(headers), *extra_secrets}, key=len, reverse=True)
    try:
        async with session.post(url, data=encode_json(payload), headers=headers, allow_redirects=False, proxy=proxy) as response:
            raw = await read_capped(response, max_bytes)
            status, reply_headers, charset = response.status, response.headers, response.charset
    except asyncio.TimeoutError as exc:  # aiohttp's own backstop timeouts (the per-attempt limit cancels instead)
        raise RetryableError(f"HTTP timeout ({type(exc).__name__})") from exc
    except aiohttp.ClientPayloadError as exc:  # a body cut short or badly encoded
        raise RetryableError(redact(f"HTTP error ({type(exc).__name__}: {exc})", secrets)) from exc
    except aiohttp.ClientError as exc:
        raise RetryableError(redact(f"connection error ({type(exc).__name__}: {exc})", secrets)) from exc
    try:
        text = raw.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = raw.decode("utf-8", errors="replace")
    if status >= 400:
        raise classify_status(status, reply_headers, text, secrets)
    if contains(text, secrets):  # a server echoing the key must not get it into the call record
        text = redact(text, secrets)
    try:
        body = json.loads(text)
    except RecursionError:
        raise FatalError(f"HTTP {status} with a JSON body nested past the parser's limit") from None
    except ValueError:
        snippet = text[:120]
        raise RetryableError(f"HTTP {status} with a body that is not JSON: {snippet!r}") from None
    if not isinstance(body, dict):
        raise RetryableError(f"HTTP {status} with a JSON body that is not an object")
    return redact_tree(body, secrets) if secrets else body


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTP_PROXY / HTTPS_PROXY / ALL_PROXY, unless NO_PROXY covers its
    host), or None. Read once per session: aiohttp's `trust_env` reads it, and ~/.netrc, in a worker thread on every
    request (two thread trips per request, ~0.2 ms of CPU)."""
    parts = urlsplit(url)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    proxies = getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy and "://" not in proxy:  # `proxy.example:3128`, as curl and httpx read it
        proxy = f"http://{proxy}"
    return proxy or None


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """One TLS context for every backend (building one reads the CA bundles: ~30 ms): SSL_CERT_FILE / SSL_CERT_DIR
    when set, else the system's trust store and certifi's bundle (as httpx used), so a machine without a system CA
    bundle still verifies the hosted APIs."""
    cafile, capath = os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    context = ssl.create_default_context(cafile=cafile, capath=capath)
    if cafile is None and capath is None:
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    return context


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
    """An endpoint: base URL, optional key, one pooled aiohttp session. Subclasses add the wire format (`_send`)."""

    default_base_url = ""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
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
        self._auth = aiohttp.BasicAuth(*auth) if auth else None
        self._url_secrets = tuple(s for s in (auth and auth[1], auth and f"{auth[0]}:{auth[1]}") if s)
        register(api_key, *self._url_secrets)
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._proxy: str | None = None

    def session(self) -> aiohttp.ClientSession:
        """The session of the running event loop, made on first use (an aiohttp session belongs to one loop). Its
        pool holds, and keeps alive, one connection per request the concurrency limit lets through, so no request
        waits for a connection and none is reopened between bursts. aiohttp's own timeout is a backstop;
        Backend.complete enforces timeout_s per attempt. Cookies are not kept (a judge's requests are independent);
        HTTP(S)_PROXY / ALL_PROXY / NO_PROXY are honoured, as httpx did (`env_proxy`; ~/.netrc is not read)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0, keepalive_timeout=60.0, ssl=tls_context())
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s + 5.0),
                auth=self._auth,
                headers={"user-agent": USER_AGENT},
            )
            self._session_loop = loop
            self._proxy = env_proxy(self.base_url)
        return self._session

    async def post(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """`post_json` with this endpoint's session, reply limit and credentials to redact."""
        session = self.session()
        return await post_json(session, url, payload, headers, self.max_response_bytes, self._url_secrets, self._proxy)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    def identity(self) -> str:
        return f"{self.kind}|{self.base_url}|{self.model}"

    def describe(self) -> str:
        return f"{self.kind} at {self.base_url}, model {self.model}"  # base_url holds no userinfo (split above)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._session_loop is asyncio.get_running_loop():
            await session.close()
