"""Database URLs: which engine a JUDGE_MCP_DB value names, and how a PostgreSQL connection string is shown without
its password.

A value is PostgreSQL's when it is a `postgresql://` or `postgres://` URL or a libpq keyword DSN (`host=...
password=... dbname=...`); both are read as libpq reads them (storage/pg_conninfo.py), and one libpq would read
otherwise than meant (a password with an unencoded `/` or `@`) is refused (`check`, ConfigError at start). Any other
`scheme://` is refused; anything else is an SQLite file path. The password (and every other secret keyword) is
registered with redaction.py as API keys are, and every message that names the database shows it with `[redacted]`
in its place.
"""

from __future__ import annotations

import re

from judge_mcp.redaction import register
from judge_mcp.storage import pg_conninfo
from judge_mcp.storage.pg_conninfo import ConninfoError

SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
UNSHOWN = "postgresql://[not shown: the connection string is malformed]"


def scheme_of(value: str) -> str | None:
    """The `scheme` of a `scheme://...` value, lower-cased; None for a plain path (or a keyword DSN)."""
    found = _SCHEME.match(value.strip())
    return found.group(0)[:-3].lower() if found else None


def is_postgres_url(value: object) -> bool:
    """A PostgreSQL connection string: a postgresql:// URL or a libpq keyword DSN."""
    return isinstance(value, str) and (scheme_of(value) in SCHEMES or pg_conninfo.is_keywords(value))


def check(url: str) -> str:
    """Why libpq cannot read `url` as meant (a message without any of its text), or "" when it can."""
    try:
        pg_conninfo.parse(url)
    except ConninfoError as exc:
        return str(exc)
    return ""


def conninfo(url: str) -> str:
    """What the driver is handed: the libpq keywords of `url` as a keyword DSN (ConninfoError when malformed)."""
    return pg_conninfo.conninfo(pg_conninfo.parse(url))


def passwords(url: str) -> list[str]:
    """The secrets in a connection string, decoded and as written (so both forms are blanked out); none when it
    cannot be read (it is refused before anything uses it)."""
    try:
        return pg_conninfo.parse(url).secrets
    except ConninfoError:
        return []


def shown(url: str) -> str:
    """The connection string with its password replaced by [redacted] (the form every message and log line uses);
    a path as it is; a malformed connection string not at all."""
    if not is_postgres_url(url):
        return url
    try:
        return pg_conninfo.shown(pg_conninfo.parse(url))
    except ConninfoError:
        return UNSHOWN


def register_secrets(url: str) -> None:
    """Blank the URL's password out of every log record from now on (redaction.RedactingFilter)."""
    register(*passwords(url))
