"""OAuth bearer tokens over HTTP: JWT access tokens (RFC 9068) validated against an issuer's keys, the tenant taken
from a claim.

`JUDGE_MCP_OAUTH_ISSUER` (the issuer, as the tokens' `iss` says it) and `JUDGE_MCP_OAUTH_AUDIENCE` (this server, as
their `aud` must name it) switch it on; `JUDGE_MCP_OAUTH_JWKS_URL` is where the issuer publishes its keys (default
ISSUER/.well-known/jwks.json) and `JUDGE_MCP_OAUTH_TENANT_CLAIM` the claim naming the caller's tenant (default
`tenant`; its value must match [A-Za-z0-9_.-]{1,64}, and `local` is refused: that tenant is this machine's). A token
is accepted when its signature verifies with one of the issuer's keys (fetched over HTTPS, or HTTP on a loopback
address, and cached), it has not expired, and its `iss` and `aud` are those configured; anything else is the same
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

import anyio.to_thread

from judge_mcp.config.settings import ConfigError
from judge_mcp.storage.tenancy import LOCAL, NAME

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")  # asymmetric only: never HS* with a public key
LEEWAY_S = 30  # clock skew allowed on exp / nbf / iat
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class OAuthSettings:
    issuer: str
    audience: str
    jwks_url: str
    tenant_claim: str = "tenant"


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
    return OAuthSettings(issuer, audience, _fetchable(jwks, "JUDGE_MCP_OAUTH_JWKS_URL"), claim)


class JwtVerifier:
    """The MCP SDK's TokenVerifier for the issuer's JWT access tokens: `verify_token` gives an AccessToken whose
    `client_id` is the tenant, or None."""

    def __init__(self, settings: OAuthSettings):
        # lazy: PyJWT loads only when OAuth is configured
        import jwt

        self.settings = settings
        self._jwt = jwt
        self._keys = jwt.PyJWKClient(settings.jwks_url, cache_keys=True, lifespan=300, timeout=5)

    def tenant(self, token: str) -> str | None:
        """The tenant of a valid token, or None. Blocking (the issuer's keys are fetched on a cache miss)."""
        jwt, s = self._jwt, self.settings
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=list(ALGORITHMS), audience=s.audience, issuer=s.issuer, leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError):
            return None
        value = claims.get(s.tenant_claim)
        if not isinstance(value, str) or not NAME.fullmatch(value) or value == LOCAL:
            return None
        return value

    async def verify_token(self, token: str) -> Any:
        # lazy: the SDK's auth types load only when OAuth is configured
        from mcp.server.auth.provider import AccessToken

        tenant = await anyio.to_thread.run_sync(self.tenant, token)
        return None if tenant is None else AccessToken(token="", client_id=tenant, scopes=[], resource=self.settings.audience)

    def metadata(self) -> bytes:
        """The protected resource metadata (RFC 9728): which authorization server issues this server's tokens."""
        return json.dumps({"resource": self.settings.audience, "authorization_servers": [self.settings.issuer],
                           "bearer_methods_supported": ["header"]}).encode()


def looks_like_jwt(token: bytes) -> bool:
    return token.count(b".") == 2 and len(token) <= 16384
