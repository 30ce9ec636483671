"""Who is calling: the tenant of a tool call, and the HTTP tokens that name tenants.

Over HTTP, `JUDGE_MCP_HTTP_TOKENS` names a file of `TOKEN TENANT` lines (`#` starts a comment, blank lines are
skipped); `JUDGE_MCP_HTTP_TOKEN` stays, as the one token of tenant `default`. A server without a token (loopback
only), stdio and the Python API act for tenant `local`: whoever reaches them is on this machine.

The tenant of the call being served is a context variable (`current()`), set by the tool wiring from the request the
HTTP gate authorised (tools.py: `acting(of_request(ctx))`); tasks and worker threads the call starts inherit it, and
the stores (LWE sessions, labels, the verdict log and judge_stats, the option pool) keep and filter by it.

A running HTTP server rereads the tokens file when it changes (`TokenFile`): a token removed from it is refused once
the changed file has been still for RECHECK_S and reads whole, one added is accepted, without a restart; a changed
file that cannot be used is logged and the tokens in use stay. The tenant names `local` and `default` are reserved:
the file (and an OAuth claim) may name them only when JUDGE_MCP_HTTP_RESERVED_TENANTS says so.

Rows written before tenants existed belong to `legacy(engine)`: `local` in SQLite (the per-user database of stdio
clients), `default` in PostgreSQL (shared only by HTTP replicas, which until now had the one token of `default`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
import time
from collections.abc import Callable, Container, Mapping
from pathlib import Path
from typing import Any

from judge_mcp.storage.tenancy import CURRENT, DEFAULT, LOCAL, NAME, acting, current, legacy

__all__ = [
    "CURRENT", "DEFAULT", "LOCAL", "NAME", "RESERVED", "TokenFile", "Tenants", "TokenFileError", "acting", "current", "http_tokens", "legacy",
    "of_request", "reserved_allowed",
]

log = logging.getLogger("judge_mcp.tenants")

MAX_TOKENS = 10_000  # lines of a tokens file: more is a mistake (a wrong file), refused
SCOPE_KEY = "judge_mcp.tenant"  # where the HTTP gate leaves the tenant in the ASGI scope
RECHECK_S = 1.0  # a running server looks at its tokens file (one stat) at most this often, on a request; a change is
# taken once the file has been still this long
REREAD_S = 10.0  # and reads it (hashing its content) this often even when its stamp has not changed
RESERVED = frozenset({LOCAL, DEFAULT})  # tenant names the tokens file and OAuth claims may name only when allowed by
RESERVED_SETTING = "JUDGE_MCP_HTTP_RESERVED_TENANTS"


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


def reserved_allowed(value: str) -> frozenset[str]:
    """The reserved tenant names (`local`, `default`) the operator lets the tokens file and OAuth claims name: the
    value of JUDGE_MCP_HTTP_RESERVED_TENANTS, names separated by commas or spaces. ValueError names a name it cannot
    take."""
    names = frozenset(value.replace(",", " ").split())
    unknown = sorted(names - RESERVED)
    if unknown:
        raise ValueError(f"{RESERVED_SETTING}: {unknown[0]!r} is not a reserved tenant name; it takes `local`, `default` or both")
    return names


def _reserved_refusal(tenant: str, where: str) -> TokenFileError:
    owner = "stdio's, the Python API's and a tokenless loopback server's" if tenant == LOCAL else "JUDGE_MCP_HTTP_TOKEN's"
    return TokenFileError(f"{where}: tenant `{tenant}` is reserved ({owner}: a token of it reads and changes that state); "
                          f"name another tenant, or set {RESERVED_SETTING}={tenant} if this token is meant to act as it")


def _read(path: str | Path) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: cannot read {path}: {exc.strerror or exc}") from None


def parse_tokens(raw: bytes, shown: str, reserved_ok: Container[str] = ()) -> dict[str, str]:
    """The `TOKEN TENANT` lines of a tokens file's content, token -> tenant. Raises TokenFileError naming the file and
    line of the first problem (a line without exactly two fields, a tenant name outside [A-Za-z0-9_.-]{1,64}, a
    reserved tenant name not in `reserved_ok`, a token given twice, no token at all); the message never shows a token."""
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
        if tenant in RESERVED and tenant not in reserved_ok:
            raise _reserved_refusal(tenant, where)
        if token in tokens:
            raise TokenFileError(f"{where}: this token is already given on an earlier line (each token names one tenant)")
        tokens[token] = tenant
        if len(tokens) > MAX_TOKENS:
            raise TokenFileError(f"{where}: more than {MAX_TOKENS:,} tokens")
    if not tokens:
        raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: {shown} holds no `TOKEN TENANT` line")
    return tokens


def read_tokens_file(path: str | Path, reserved_ok: Container[str] = ()) -> dict[str, str]:
    """`parse_tokens` of the file at `path` (an unreadable file is a TokenFileError too)."""
    return parse_tokens(_read(path), str(path), reserved_ok)


def _with_single(tokens: dict[str, str], single: str | None) -> dict[str, str] | None:
    if single:
        if tokens.get(single, DEFAULT) != DEFAULT:
            raise TokenFileError("JUDGE_MCP_HTTP_TOKENS gives JUDGE_MCP_HTTP_TOKEN to another tenant than `default`")
        tokens[single] = DEFAULT
    return tokens or None


def http_tokens(single: str | None, tokens_file: str | None, reserved_ok: Container[str] = ()) -> dict[str, str] | None:
    """Every HTTP token -> its tenant: the file's, and `single` (JUDGE_MCP_HTTP_TOKEN) as tenant `default`; None when
    neither is set (a loopback server without a token)."""
    return _with_single(read_tokens_file(tokens_file, reserved_ok) if tokens_file else {}, single)


Stamp = tuple[int, int, int, int]


def _stamp(path: str) -> Stamp | None:
    """What changes when a file is written or replaced (modification and change times, size, inode; the change time
    moves even when an edit puts the modification time back); None when it cannot be seen."""
    try:
        seen = os.stat(Path(path).expanduser())
    except OSError:
        return None
    return seen.st_mtime_ns, seen.st_ctime_ns, seen.st_size, seen.st_ino


def mode_warning(path: str) -> str | None:
    """A warning when the tokens file may be read by others than its owner (POSIX), else None."""
    if os.name != "posix":
        return None
    try:
        mode = stat.S_IMODE(os.stat(Path(path).expanduser()).st_mode)
    except OSError:
        return None
    if not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return None
    who = "everyone" if mode & stat.S_IRWXO else "its group"
    return (f"JUDGE_MCP_HTTP_TOKENS: {path} may be read or written by {who} (mode {mode:04o}): whoever reads it can call as any "
            f"tenant in it; make it readable by its owner only (`chmod 600 {path}`)")


def _cut_line(raw: bytes, tokens: Mapping[str, str], in_use: Mapping[str, str]) -> bool:
    """Whether content read from a file being written ends inside a line that changes a token in use into a shorter
    tenant name (`TOKEN alpha-eu` read as `TOKEN alpha`): its last line has no newline, and its token names a tenant
    whose name is the beginning of the one it names in use."""
    if not raw or raw.endswith((b"\n", b"\r")):
        return False
    last = raw.rsplit(b"\n", 1)[-1].split(b"#", 1)[0].split()
    if len(last) != 2:
        return False
    token, tenant = (field.decode("utf-8", "replace") for field in last)
    now = in_use.get(token)
    return tokens.get(token) == tenant and now is not None and now != tenant and now.startswith(tenant)


class TokenFile:
    """The tokens of a running HTTP server: the file `path` (JUDGE_MCP_HTTP_TOKENS) and `single` (JUDGE_MCP_HTTP_TOKEN,
    tenant `default`), reread when the file changes. `tenants()` looks at the file (one stat) at most every
    RECHECK_S, and reads it (its content hashed) every REREAD_S even when a stat sees no change (an edit that puts
    the file's stamp back, or one within a coarse file system's clock tick). A changed file is taken only once it
    has been still (the same stamp and content) for RECHECK_S, reads whole and passes `check` (the bind's own rules:
    http.http_app): so a file being rewritten in place, line by line, is never taken half-written, and a last line
    without its newline that would shorten a tenant in use is taken as still being written. A changed file that
    cannot be used (gone, unreadable, a malformed line, a reserved tenant, a token `check` refuses) is logged,
    naming the file and line and never a token, and the tokens in use stay: a half-saved file locks nobody out. An
    in-place rewrite is logged with the advice to replace the file atomically (write a new one, rename it over);
    a file others may read draws a warning. Reading it at start raises TokenFileError instead."""

    def __init__(self, path: str, single: str | None, clock: Callable[[], float] = time.monotonic, reserved_ok: Container[str] = ()):
        self.path, self._single, self._clock, self._reserved_ok = path, single, clock, reserved_ok
        self.check: Callable[[Mapping[str, str]], None] | None = None
        stamp, raw = _stamp(path), _read(path)
        self.tokens: Mapping[str, str] = _with_single(parse_tokens(raw, path, reserved_ok), single) or {}
        self._tenants = Tenants(self.tokens)
        self._settled: tuple[Stamp | None, bytes | None] = (stamp, _digest(raw))  # the version last taken or refused
        self._seen: tuple[Stamp | None, bytes | None] = self._settled  # the version last looked at,
        self._since = clock()  # and since when it is so
        self._looked = self._read_at = clock()
        self._warned_in_place = False
        self.rewrites_in_place = 0
        warning = mode_warning(path)
        if warning:
            log.warning("%s", warning)

    def tenants(self) -> Tenants:
        """The tokens in use, after looking at the file when RECHECK_S has passed since the last look."""
        now = self._clock()
        if now - self._looked >= RECHECK_S:
            self._looked = now
            self._look(now)
        return self._tenants

    def _look(self, now: float) -> None:
        stamp = _stamp(self.path)
        quiet = self._seen == self._settled and stamp == self._settled[0]
        if quiet and now - self._read_at < REREAD_S:
            return  # one stat sees no change, and no change waits to be taken
        self._read_at = now
        try:
            raw: bytes | TokenFileError = _read(self.path)
        except TokenFileError as exc:
            raw = exc
        seen = (stamp, None if isinstance(raw, TokenFileError) else _digest(raw))
        if seen != self._seen:  # changed since the last look: taken once it has been still for RECHECK_S
            self._seen, self._since = seen, now
            if seen[1] != self._settled[1]:
                self._changing(stamp)
            return
        if seen == self._settled or now - self._since < RECHECK_S:
            return
        if _stamp(self.path) != stamp:  # changed while it was read: the next look sees the new version
            return
        self._settled, self._warned_in_place = seen, False
        self._take(raw)

    def _changing(self, stamp: Stamp | None) -> None:
        """Its content changed: logged (once until a version is taken) when that is a rewrite in place."""
        settled = self._settled[0]
        if stamp is None or settled is None or stamp[3] != settled[3] or self._warned_in_place:
            return  # gone, or a new file in its place (a rename: written whole)
        self._warned_in_place = True
        self.rewrites_in_place += 1
        log.warning("JUDGE_MCP_HTTP_TOKENS: %s is being rewritten in place, where a read may find it half-written; a change is "
                    "taken once the file has been still for %g s and reads whole. Replace it atomically instead: write the "
                    "new tokens to a file beside it, then rename that over it (docs/http.md)", self.path, RECHECK_S)

    def _take(self, raw: bytes | TokenFileError) -> None:
        try:
            if isinstance(raw, TokenFileError):
                raise raw
            tokens = _with_single(parse_tokens(raw, self.path, self._reserved_ok), self._single) or {}
            if _cut_line(raw, tokens, self.tokens):
                raise TokenFileError(f"JUDGE_MCP_HTTP_TOKENS: {self.path}: its last line has no newline and shortens a tenant name "
                                     "in use: taken as a file still being written (end every line with a newline)")
            if self.check is not None:
                self.check(tokens)
        except ValueError as exc:  # TokenFileError, or the bind's ConfigError: neither shows a token
            log.warning("%s; the %d token(s) read before stay in use until the file is fixed", exc, len(self.tokens))
            return
        if tokens == self.tokens:
            return
        self.tokens, self._tenants = tokens, Tenants(tokens)
        log.warning("JUDGE_MCP_HTTP_TOKENS: %s changed: reread, %d token(s) of %d tenant(s) in use", self.path, len(tokens), len(set(tokens.values())))
        warning = mode_warning(self.path)
        if warning:
            log.warning("%s", warning)
