"""Database URLs: which engine a JUDGE_MCP_DB value names, and how a PostgreSQL URL is shown without its password.

A value is a PostgreSQL URL when it starts with `postgresql://` or `postgres://`; any other `scheme://` is refused
(ConfigError names it); anything else is an SQLite file path. The password of a PostgreSQL URL (its userinfo, or a
`password=` query parameter) is registered with redaction.py as API keys are, and every message that names the
database shows the URL with `[redacted]` in its place.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from judge_mcp.redaction import REDACTED, register

SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def scheme_of(value: str) -> str | None:
    """The `scheme` of a `scheme://...` value, lower-cased; None for a plain path."""
    found = _SCHEME.match(value.strip())
    return found.group(0)[:-3].lower() if found else None


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and scheme_of(value) in SCHEMES


def passwords(url: str) -> list[str]:
    """The secrets in a PostgreSQL URL: the userinfo's password and a `password=` query parameter (decoded and as
    written, so both forms are blanked out)."""
    parts = urlsplit(url)
    found: list[str] = []
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "password" and value:
            found.append(value)
    raw_query = re.search(r"(?:^|&)password=([^&]*)", parts.query)
    if raw_query and raw_query.group(1):
        found.append(raw_query.group(1))
    return found


def shown(url: str) -> str:
    """The URL with its password replaced by [redacted] (the form every message and log line uses)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{hostport}"
    query = parts.query
    if "password=" in query:
        query = urlencode([(k, REDACTED if k == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)], safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def register_secrets(url: str) -> None:
    """Blank the URL's password out of every log record from now on (redaction.RedactingFilter)."""
    register(*passwords(url))
