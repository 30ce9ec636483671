"""Who is calling: the tenant of a tool call, and the HTTP tokens that name tenants.

Over HTTP, `JUDGE_MCP_HTTP_TOKENS` names a file of `TOKEN TENANT` lines (`#` starts a comment, blank lines are
skipped); `JUDGE_MCP_HTTP_TOKEN` stays, as the one token of tenant `default`. A server without a token (loopback
only), stdio and the Python API act for tenant `local`: whoever reaches them is on this machine.

The tenant of the call being served is a context variable (`current()`), set by the tool wiring from the request the
HTTP gate authorised (tools.py: `acting(of_request(ctx))`); tasks and worker threads the call starts inherit it, and
the stores (LWE sessions, labels, the verdict log and judge_stats, the option pool) keep and filter by it.

A running HTTP server rereads the tokens file when it changes (`TokenFile`): a token removed from it is refused from
the next request on, one added is accepted, without a restart; a changed file that cannot be used is logged and the
tokens in use stay.

Rows written before tenants existed belong to `legacy(engine)`: `local` in SQLite (the per-user database of stdio
clients), `default` in PostgreSQL (shared only by HTTP replicas, which until now had the one token of `default`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from judge_mcp.storage.tenancy import CURRENT, DEFAULT, LOCAL, NAME, acting, current, legacy

__all__ = [
    "CURRENT", "DEFAULT", "LOCAL", "NAME", "TokenFile", "Tenants", "TokenFileError", "acting", "current", "http_tokens", "legacy", "of_request",
]

log = logging.getLogger("judge_mcp.tenants")

MAX_TOKENS = 10_000  # lines of a tokens file: more is a mistake (a wrong file), refused
SCOPE_KEY = "judge_mcp.tenant"  # where the HTTP gate leaves the tenant in the ASGI scope
RECHECK_S = 1.0  # a running server looks at its tokens file (one stat) at most this often, on a request


class TokenFileError(ValueError):
    """A tokens file that cannot be used; the message names the file and line, never a token."""


def of_request(ctx: Any) -> str:
    """The tenant of an MCP request context: the one the HTTP gate put in the request's scope; `local` over stdio
    (no HTTP request). An HTTP request that did not pass the gate (never served: the gate is in front of every
    request) would be `default`, the tenant of the single token, never another tenant's."""
    try:
        request = ctx.request_context.request
    except (AttributeError, ValueError):  # no request context: the Python API
        return LOCAL
    if request is None:
        return LOCAL
    scope = getattr(request, "scope", None) or {}
    return str(scope.get(SCOPE_KEY) or DEFAULT)


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class Tenants:
    """Bearer tokens and their tenants. A presented token is looked up by its SHA-256 (no comparison whose time
    depends on how much of a real token it matches); the match is confirmed with a constant-time compare."""

    def __init__(self, tokens: Mapping[str, str]):
        self._by_digest = {_digest(t.encode("utf-8")): (t.encode("utf-8"), tenant) for t, tenant in tokens.items()}

    def __len__(self) -> int:
        return len(self._by_digest)

    def tenant(self, presented: bytes) -> str | None:
        """The tenant whose token this is, or None."""
        found = self._by_digest.get(_digest(presented))
        if found is None or not hmac.compare_digest(found[0], presented):
            return None
        return found[1]


def _check_token(token: str, where: str) -> None:
    if not token.isascii() or any(ch.isspace() or ord(ch) < 0x21 or ord(ch) == 0x7F for ch in token):
        raise TokenFileError(f"{where}: a token must be printable ASCII without spaces (e.g. `openssl rand -hex 32`)")


def read_tokens_file(path: str | Path) -> dict[str, str]:
    """The `TOKEN TENANT` lines of a tokens file, token -> tenant. Raises TokenFileError naming the file and line of
    the first problem (an unreadable file, a line without exactly two fields, a tenant name outside
    [A-Za-z0-9_.-]{1,64}, a token given twice, no token at all); the message never shows a token."""
    shown = str(path)
    try:
        raw = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: cannot read {shown}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # a leading byte order mark (Notepad's "UTF-8 with BOM") is not text
    except UnicodeDecodeError:
        raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: {shown} is not UTF-8 text") from None
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        where = f"JUDGE_MCP_HTTP_TOKENS: {shown} line {number}"
        fields = content.split()
        if len(fields) != 2:
            raise TokenFileError(f"{where}: expected `TOKEN TENANT` (two fields separated by spaces), found {len(fields)} field(s)")
        token, tenant = fields
        _check_token(token, where)
        if not NAME.fullmatch(tenant):
            raise TokenFileError(f"{where}: tenant name must match [A-Za-z0-9_.-]{{1,64}}")
        if token in tokens:
            raise TokenFileError(f"{where}: this token is already given on an earlier line (each token names one tenant)")
        tokens[token] = tenant
        if len(tokens) > MAX_TOKENS:
            raise TokenFileError(f"{where}: more than {MAX_TOKENS:,} tokens")
    if not tokens:
        raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: {shown} holds no `TOKEN TENANT` line")
    return tokens


def http_tokens(single: str | None, tokens_file: str | None) -> dict[str, str] | None:
    """Every HTTP token -> its tenant: the file's, and `single` (JUDGE_MCP_HTTP_TOKEN) as tenant `default`; None when
    neither is set (a loopback server without a token)."""
    tokens = read_tokens_file(tokens_file) if tokens_file else {}
    if single:
        if tokens.get(single, DEFAULT) != DEFAULT:
            raise TokenFileError("JUDGE_MCP_HTTP_TOKENS gives JUDGE_MCP_HTTP_TOKEN to another tenant than `default`")
        tokens[single] = DEFAULT
    return tokens or None


def _stamp(path: str) -> tuple[int, int, int] | None:
    """What changes when a file is written or replaced (modification time, size, inode); None when it cannot be seen."""
    try:
        seen = os.stat(Path(path).expanduser())
    except OSError:
        return None
    return seen.st_mtime_ns, seen.st_size, seen.st_ino


class TokenFile:
    """The tokens of a running HTTP server: the file `path` (JUDGE_MCP_HTTP_TOKENS) and `single` (JUDGE_MCP_HTTP_TOKEN,
    tenant `default`), reread when the file changes. `tenants()` looks at the file (one stat) at most every
    RECHECK_S; once it has changed, a file that reads and passes `check` (the bind's own rules: http.http_app) replaces
    the tokens in use, so a token removed from it is refused from then on. A changed file that cannot be used (gone,
    unreadable, a malformed line, a token `check` refuses) is logged, naming the file and line and never a token, and
    the tokens in use stay: a half-saved file locks nobody out. Reading it at start raises TokenFileError instead."""

    def __init__(self, path: str, single: str | None, clock: Callable[[], float] = time.monotonic):
        self.path, self._single, self._clock = path, single, clock
        self.check: Callable[[Mapping[str, str]], None] | None = None
        self._stamp = _stamp(path)
        self.tokens: Mapping[str, str] = http_tokens(single, path) or {}
        self._tenants = Tenants(self.tokens)
        self._looked = clock()

    def tenants(self) -> Tenants:
        """The tokens in use, reread first when the file has changed since it was last looked at."""
        now = self._clock()
        if now - self._looked >= RECHECK_S:
            self._looked = now
            stamp = _stamp(self.path)
            if stamp != self._stamp:
                self._stamp = stamp
                self._reread()
        return self._tenants

    def _reread(self) -> None:
        try:
            tokens = http_tokens(self._single, self.path) or {}
            if self.check is not None:
                self.check(tokens)
        except ValueError as exc:  # TokenFileError, or the bind's ConfigError: neither shows a token
            log.warning("%s; the %d token(s) read before stay in use until the file is fixed", exc, len(self.tokens))
            return
        self.tokens, self._tenants = tokens, Tenants(tokens)
        log.warning("JUDGE_MCP_HTTP_TOKENS: %s changed: reread, %d token(s) of %d tenant(s) in use", self.path, len(tokens), len(set(tokens.values())))
