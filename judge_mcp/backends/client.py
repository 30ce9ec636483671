"""The HTTP endpoint plumbing shared by the wire formats (OpenAI chat completions, Anthropic messages), over aiohttp.

`post_json` sends one request and turns every way it can go wrong into a `RetryableError` (connection errors,
timeouts, 408/409/429/5xx including Anthropic's 529 "overloaded", a body that is not a JSON object) or a
`FatalError` (any other 4xx). Credentials sent in the request headers are blanked out of every error message, so
a server that echoes the key back cannot leak it into logs, the verdict log or a tool error.

The client is aiohttp, chosen by measurement: 16 concurrent requests to a scripted server cost 3.9 ms of client
CPU with a bare aiohttp session against 35.2 ms with a bare httpx client (one pool of 16), measured side by side by
perf/ratios.py (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from judge_mcp._version import __version__
from judge_mcp.backends.deadline import BODY, FIRST_BYTE, AttemptClock, current_clock
from judge_mcp.backends.base import Backend
from judge_mcp.backends.errors import AttemptTimeout, FatalError, RetryableError
from judge_mcp.backends.request_body import request_body
from judge_mcp.backends.retry import parse_retry_after
from judge_mcp.redaction import contains, redact, redact_tree, register

# 501 (Not Implemented) and 505 (HTTP Version Not Supported) say the server cannot do this request at all: not retried.
RETRYABLE_STATUS = {408, 409, 429} | (set(range(500, 600)) - {501, 505})
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
    a one-line summary of an HTML page (a proxy's or web server's error page), else the start of the body text."""
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
    if looks_like_html(text):
        return html_summary(text)[:limit]
    return text[:limit].strip().replace("\n", " ")


def looks_like_html(text: str) -> bool:
    head = text[:512].lstrip().lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body", "<?xml")) or "<html" in head


def _visible_text(markup: str) -> str:
    """`markup` without its tags, whitespace folded, cut at 160 characters. One pass: linear in its length."""
    out, inside = [], False
    for ch in markup:
        if ch == "<":
            inside = True
        elif ch == ">" and inside:
            inside = False
        elif not inside:
            out.append(ch)
    return " ".join("".join(out).split())[:160]


def _element_text(lower: str, text: str, tag: str) -> str:
    """The visible text of the first <tag ...>...</tag> ('' if there is none)."""
    start = lower.find(f"<{tag}")
    open_end = lower.find(">", start) if start >= 0 else -1
    close = lower.find(f"</{tag}", open_end) if open_end >= 0 else -1
    return _visible_text(text[open_end + 1 : close]) if close >= 0 else ""


def html_summary(text: str) -> str:
    """An HTML page in one line: its title (else its first heading, else the start of its text), not its markup."""
    page = text[:ERROR_BODY_BYTES]
    lower = page.lower()
    title = _element_text(lower, page, "title") or _element_text(lower, page, "h1") or _visible_text(page)
    return f"an HTML page ({title!r}, {len(text):,} characters)" if title else f"an HTML page ({len(text):,} characters, no text)"


def not_json_summary(text: str) -> str:
    """What a body that should have been JSON was, in a few words."""
    if looks_like_html(text):
        return f"{html_summary(text)}: is the base URL the API's (e.g. ending in /v1), not a web page or a proxy's?"
    return repr(text[:120])


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


def classify_status(status: int, headers: Mapping[str, str], text: str, secrets: Iterable[str] = (), url: str | None = None) -> Exception:
    """The error for a non-2xx answer: retryable for 408/409/429/5xx (529 included; not 501/505), fatal for the
    rest. A 404 names the URL requested and, when its path has no /v1, the usual one."""
    detail = redact(error_detail(text), secrets)
    cause = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status == 404 and url:
        cause += f" (POST {redact(url + _path_hint(url), secrets)})"
    if status in RETRYABLE_STATUS:
        return RetryableError(cause, status=status, retry_after=retry_after_s(headers))
    return FatalError(cause, status=status)


def _path_hint(url: str) -> str:
    """For a URL without /v1 in its path, where OpenAI-compatible servers usually answer; for a base URL that held
    the endpoint already (.../v1/chat/completions/chat/completions), the base URL to give instead."""
    parts = urlsplit(url)
    suffix = "/chat/completions"
    if parts.path.endswith(suffix * 2):
        base = urlunsplit((parts.scheme, parts.netloc, parts.path[: -2 * len(suffix)], "", ""))
        return f"; the base URL already ends with {suffix}: set it (JUDGE_MCP_BASE_URL or base_url) to {base}"
    if "/v1/" in parts.path + "/" or not parts.path.endswith(suffix):
        return ""
    usual = urlunsplit((parts.scheme, parts.netloc, parts.path[: -len(suffix)] + "/v1" + suffix, "", ""))
    return f"; OpenAI-compatible servers usually answer at {usual}: add /v1 to the base URL (JUDGE_MCP_BASE_URL or base_url)"


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


CONNECT_TIMEOUT_S = 10.0  # a host that does not accept the connection in this time is a connection error
BODY_TIMEOUT_S = 30.0  # once the reply has started, the rest of it must arrive within this (or timeout_s if smaller)


async def _exchange(
    clock: AttemptClock, session: aiohttp.ClientSession, url: str, payload: dict[str, Any], headers: dict[str, str],
    max_bytes: int, secrets: list[str], proxy: str | None, first_byte_s: float | None, body_s: float | None,
) -> tuple[int, Any, str | None, bytes]:
    """The request and its reply's body under `clock`'s two phases: (status, headers, charset, body). A phase running
    out cancels `clock`'s scope (its owner raises the phase's AttemptTimeout); aiohttp's failures are RetryableErrors."""
    try:
        clock.phase(FIRST_BYTE, first_byte_s)
        try:
            response = await session.post(url, data=request_body(payload), headers=headers, allow_redirects=False, proxy=proxy)
        except TimeoutError as exc:
            if isinstance(exc, aiohttp.ClientError):  # aiohttp's connect timeout: the host did not accept in time
                raise
            raise AttemptTimeout(f"timed out after {first_byte_s:g}s waiting for the reply to start (no first byte)") from None
        clock.phase(BODY, body_s)
        async with response:
            raw = await read_capped(response, max_bytes)
            return response.status, response.headers, response.charset, raw
    except aiohttp.ClientPayloadError as exc:  # a body cut short or badly encoded
        raise RetryableError(redact(f"HTTP error ({type(exc).__name__}: {exc})", secrets)) from exc
    except aiohttp.ClientError as exc:
        raise RetryableError(redact(f"connection error ({type(exc).__name__}: {exc})", secrets)) from exc


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    extra_secrets: Iterable[str] = (),
    proxy: str | None = None,
    *,
    first_byte_s: float | None = None,
    body_s: float | None = None,
) -> dict[str, Any]:
    """POST and return the JSON object body, classifying every failure as retryable or fatal. Two clocks: the reply
    must start (its status line and headers arrive) within `first_byte_s` — for a completion that is not streamed,
    the server's whole generation — and, once started, arrive whole within `body_s`; either running out is an
    `AttemptTimeout` naming the phase. The body is read as it streams, up to `max_bytes`. Redirects are not
    followed (a redirect's body is not a completion: it is reported, like any body that is not JSON)."""
    secrets = sorted({*secrets_in(headers), *extra_secrets}, key=len, reverse=True)
    clock = current_clock()
    if clock is None:  # not inside a Backend attempt: a clock of its own, bounded by the two phases only
        with AttemptClock() as clock:
            status, reply_headers, charset, raw = await _exchange(clock, session, url, payload, headers, max_bytes, secrets, proxy, first_byte_s, body_s)
    else:  # the attempt's own scope: its deadline narrowed for each phase, then given back (deadline.py)
        try:
            status, reply_headers, charset, raw = await _exchange(clock, session, url, payload, headers, max_bytes, secrets, proxy, first_byte_s, body_s)
        finally:
            clock.end_phase()
    try:
        text = raw.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = raw.decode("utf-8", errors="replace")
    if status >= 400:
        raise classify_status(status, reply_headers, text, secrets, url=url)
    if contains(text, secrets):  # a server echoing the key must not get it into the call record
        text = redact(text, secrets)
    try:
        body = json.loads(text)
    except RecursionError:
        raise FatalError(f"HTTP {status} with a JSON body nested past the parser's limit") from None
    except ValueError:
        raise RetryableError(f"HTTP {status} with a body that is not JSON: {not_json_summary(text)}") from None
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
        # lazy: the CA bundle is read only for an https:// backend
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


def basic_auth(user: str, password: str) -> str:
    """The Authorization header's value for HTTP basic auth (RFC 7617, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")


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
        # basic auth as a default header (aiohttp.BasicAuth is deprecated); a request's own authorization header wins
        self._auth_header = {"authorization": basic_auth(*auth)} if auth else {}
        self._url_secrets = tuple(s for s in (auth and auth[1], auth and f"{auth[0]}:{auth[1]}") if s)
        register(api_key, *self._url_secrets)
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._proxy: str | None = None

    def session(self) -> aiohttp.ClientSession:
        """The session of the running event loop, made on first use (an aiohttp session belongs to one loop). Its
        pool holds, and keeps alive, one connection per request the concurrency limit lets through, so no request
        waits for a connection and none is reopened between bursts. aiohttp times the connect (CONNECT_TIMEOUT_S);
        post_json the reply's first byte (timeout_s) and the rest of it (body_timeout_s). Cookies are not kept (a judge's requests are independent);
        HTTP(S)_PROXY / ALL_PROXY / NO_PROXY are honoured, as httpx did (`env_proxy`; ~/.netrc is not read)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            self._proxy = env_proxy(self.base_url)
            # The CA bundles are read (tls_context) only when TLS is spoken: to an https URL or through an https proxy.
            tls = tls_context() if any(u and u.lower().startswith("https:") for u in (self.base_url, self._proxy)) else True
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0, keepalive_timeout=60.0, ssl=tls)
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(CONNECT_TIMEOUT_S, self.timeout_s)),
                headers={"user-agent": USER_AGENT, **self._auth_header},
            )
            self._session_loop = loop
        return self._session

    @property
    def body_timeout_s(self) -> float:
        """Once a reply has started, the time the rest of it may take: BODY_TIMEOUT_S, or timeout_s if smaller."""
        return min(BODY_TIMEOUT_S, self.timeout_s)

    @property
    def attempt_limit_s(self) -> float:
        return self.timeout_s + self.body_timeout_s

    async def post(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """`post_json` with this endpoint's session, reply limit, timeouts and credentials to redact."""
        session = self.session()
        return await post_json(
            session, url, payload, headers, self.max_response_bytes, self._url_secrets, self._proxy,
            first_byte_s=self.timeout_s, body_s=self.body_timeout_s,
        )

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
