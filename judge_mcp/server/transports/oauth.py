"""OAuth bearer tokens over HTTP: JWT access tokens (RFC 9068) validated against an issuer's keys, the tenant taken
from a claim.

`JUDGE_MCP_OAUTH_ISSUER` (the issuer, as the tokens' `iss` says it) and `JUDGE_MCP_OAUTH_AUDIENCE` (this server, as
their `aud` must name it) switch it on; `JUDGE_MCP_OAUTH_JWKS_URL` is where the issuer publishes its keys (default
ISSUER/.well-known/jwks.json) and `JUDGE_MCP_OAUTH_TENANT_CLAIM` the claim naming the caller's tenant (default
`tenant`; its value must match [A-Za-z0-9_.-]{1,64}, and `local` (this machine's tenant) and `default` (the tenant
of JUDGE_MCP_HTTP_TOKEN) are refused unless JUDGE_MCP_HTTP_RESERVED_TENANTS names them). A token is accepted when its
signature verifies with one of the issuer's keys (fetched over HTTPS, or HTTP on a loopback address, in the
background and at most once per 30 s: transports/issuer_keys.py), it has not expired, and its `iss` and `aud` are those configured; anything else is the same
401 as a wrong static token. The static tokens (tenants.py) still work beside it. `JwtVerifier` is the MCP SDK's
`TokenVerifier`; the admission gate calls it for a bearer token that is no static one, and serves the protected
resource metadata (RFC 9728) that tells an MCP client where to get a token.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from judge_mcp.config.settings import ConfigError
from judge_mcp.server.transports.issuer_keys import Busy, IssuerKeys
from judge_mcp.storage.tenancy import NAME
from judge_mcp.tenants import RESERVED, reserved_allowed

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")  # asymmetric only: never HS* with a public key
LEEWAY_S = 30  # clock skew allowed on exp / nbf / iat
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class OAuthSettings:
    issuer: str
    audience: str
    jwks_url: str
    tenant_claim: str = "tenant"
    reserved_allowed: frozenset[str] = frozenset()  # of `local` and `default`: those a claim may name (JUDGE_MCP_HTTP_RESERVED_TENANTS)


def _fetchable(url: str, name: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ConfigError(f"{name} must be an https:// URL (http:// only on a loopback address)")
    return url


def from_env(env: Mapping[str, str]) -> OAuthSettings | None:
    """The OAuth settings of the environment; None when JUDGE_MCP_OAUTH_ISSUER is not set. ConfigError names what is
    missing or wrong."""
    issuer = env.get("JUDGE_MCP_OAUTH_ISSUER", "").strip()
    if not issuer:
        return None
    audience = env.get("JUDGE_MCP_OAUTH_AUDIENCE", "").strip()
    if not audience:
        raise ConfigError("JUDGE_MCP_OAUTH_ISSUER needs JUDGE_MCP_OAUTH_AUDIENCE: this server's name in the tokens' `aud` (e.g. its URL)")
    jwks = env.get("JUDGE_MCP_OAUTH_JWKS_URL", "").strip() or issuer.rstrip("/") + "/.well-known/jwks.json"
    claim = env.get("JUDGE_MCP_OAUTH_TENANT_CLAIM", "").strip() or "tenant"
    try:
        allowed = reserved_allowed(env.get("JUDGE_MCP_HTTP_RESERVED_TENANTS", ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return OAuthSettings(issuer, audience, _fetchable(jwks, "JUDGE_MCP_OAUTH_JWKS_URL"), claim, allowed)


class JwtVerifier:
    """The MCP SDK's TokenVerifier for the issuer's JWT access tokens: `verify_token` gives an AccessToken whose
    `client_id` is the tenant, or None. `check` is what the admission gate calls: no worker thread and no lock is
    involved (the signature check is CPU work of a fraction of a millisecond, done on the event loop; the issuer's keys
    are fetched by transports/issuer_keys.py, at most once per MIN_FETCH_GAP_S)."""

    def __init__(self, settings: OAuthSettings, keys: IssuerKeys | None = None):
        # lazy: PyJWT loads only when OAuth is configured
        import jwt

        self.settings = settings
        self._jwt = jwt
        self.keys = keys or IssuerKeys(settings.jwks_url)

    def claims_tenant(self, claims: Mapping[str, Any]) -> str | None:
        """The tenant a verified token's claims name, or None (no claim, a malformed name, `local` or `default` unless
        JUDGE_MCP_HTTP_RESERVED_TENANTS lets OAuth tokens name it)."""
        value = claims.get(self.settings.tenant_claim)
        if not isinstance(value, str) or not NAME.fullmatch(value):
            return None
        if value in RESERVED and value not in self.settings.reserved_allowed:
            return None
        return value

    async def check(self, token: str, peer: str = "?") -> str | None:
        """The tenant of a valid token, or None. Raises issuer_keys.Busy when `peer` has too many requests waiting
        for the issuer's keys."""
        jwt, s = self._jwt, self.settings
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError):  # RecursionError: a deeply nested header
            return None
        if not isinstance(kid, str):
            return None
        key = await self.keys.key(kid, peer)
        if key is None:
            return None
        try:
            claims = jwt.decode(
                token, key.key, algorithms=list(ALGORITHMS), audience=s.audience, issuer=s.issuer, leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError):
            return None
        return self.claims_tenant(claims)

    async def verify_token(self, token: str) -> Any:
        # lazy: the SDK's auth types load only when OAuth is configured
        from mcp.server.auth.provider import AccessToken

        try:
            tenant = await self.check(token)
        except Busy:
            tenant = None
        return None if tenant is None else AccessToken(token="", client_id=tenant, scopes=[], resource=self.settings.audience)

    def metadata(self) -> bytes:
        """The protected resource metadata (RFC 9728): which authorization server issues this server's tokens."""
        return json.dumps({"resource": self.settings.audience, "authorization_servers": [self.settings.issuer],
                           "bearer_methods_supported": ["header"]}).encode()


def looks_like_jwt(token: bytes) -> bool:
    return token.count(b".") == 2 and len(token) <= 16384
