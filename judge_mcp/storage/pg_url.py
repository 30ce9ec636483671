"""Database URLs: which engine a JUDGE_MCP_DB value names, how a PostgreSQL connection string is read, and how it
is shown without its password.

A value is PostgreSQL's when it is a `postgresql://` or `postgres://` URL or a libpq keyword DSN (`host=...
password=... dbname=...`). Both are read by libpq itself, through psycopg's `conninfo_to_dict` (libpq's
PQconninfoParse), and handed to the driver as psycopg's `make_conninfo` writes them; psycopg is needed for any
PostgreSQL database anyway (the `postgres` extra; without it the engine says what to install). What this module adds
to libpq's reading:

- refusals: a string libpq reads otherwise than its writer meant is refused (`check`, ConfigError at start) rather
  than guessed at: a port that is not a number or an `@` in the host or database name is what a password holding
  `/` or `@` written without percent-encoding looks like; a string libpq cannot read at all is refused too. No
  message holds any part of the value (libpq's own messages quote it, so they are never passed on);
- redaction: the password (and every other secret keyword), as libpq decodes it and as it was written, is
  registered with redaction.py as API keys are, and every message that names the database shows it (`shown`) with
  `[redacted]` in its place.

Any other `scheme://` is refused; anything else is an SQLite file path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from judge_mcp.redaction import register

__all__ = ["ConninfoError", "Parsed", "check", "conninfo", "is_postgres_url", "parse", "register_secrets", "scheme_of", "shown"]

SCHEMES = ("postgresql", "postgres")
URL_PREFIXES = ("postgresql://", "postgres://")  # libpq's URI designators
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# libpq's connection keywords (its documentation's list): a value starting `keyword=` with one of them is a keyword
# DSN, never a file path; read without psycopg, which is not needed to tell the engines apart
KEYWORDS = frozenset(
    "application_name channel_binding client_encoding connect_timeout dbname fallback_application_name gssdelegation "
    "gssencmode gsslib host hostaddr keepalives keepalives_count keepalives_idle keepalives_interval krbsrvname "
    "load_balance_hosts max_protocol_version min_protocol_version oauth_client_id oauth_client_secret oauth_issuer "
    "oauth_scope options passfile password port replication require_auth requirepeer scram_client_key scram_server_key "
    "service ssl_max_protocol_version ssl_min_protocol_version sslcert sslcertmode sslcompression sslcrl sslcrldir "
    "sslkey sslkeylogfile sslmode sslnegotiation sslpassword sslrootcert sslsni target_session_attrs tcp_user_timeout "
    "user".split()
)
_KEYWORD_START = re.compile(r"\s*([A-Za-z_]+)\s*=")
SECRET_KEYWORDS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
REDACTED = "[redacted]"
UNSHOWN = "postgresql://[not shown: the connection string is malformed]"
UNREAD = "postgresql://[not shown: psycopg, which reads it, is not installed]"
_ENCODING = (
    "a password (or user name) holding '@', '/', ':', '?', '#' or '[' must be percent-encoded in a URL ('@' as %40, "
    "'/' as %2F), or given in a keyword DSN: host=... password='...' dbname=..."
)
# libpq's complaint -> what is said instead (libpq's own message quotes the string, secrets and all)
_LIBPQ_SAYS = (
    ('"]"', "the URL has a '[' without its ']' (an IPv6 host is written [::1])"),
    ("percent-encoded", "the URL holds an invalid percent-encoding (% must be followed by two hex digits)"),
    ("query parameter", "a query parameter of the URL is not one libpq keyword=value (a '=' or '&' in a value is written %3D, %26)"),
    ("unterminated quoted string", "a quoted value of the keyword DSN has no closing quote"),
    ('missing "="', "a setting of the keyword DSN is not keyword=value (a value holding spaces, quotes or backslashes goes in "
                    "single quotes, e.g. password='a b\\'c')"),
    ("invalid connection option", "a setting of the keyword DSN is not a libpq keyword"),
)


class ConninfoError(ValueError):
    """A connection string libpq would refuse or read otherwise than meant; the message holds none of its text."""


class NoReader(ConninfoError):
    """psycopg, whose libpq reads the string, is not installed."""


@dataclass
class Parsed:
    """A connection string's libpq keywords (as libpq reads them) and its form."""

    form: str  # "url" or "keywords"
    params: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)  # each secret decoded, as written, and as handed to libpq


def scheme_of(value: str) -> str | None:
    """The `scheme` of a `scheme://...` value, lower-cased; None for a plain path (or a keyword DSN)."""
    found = _SCHEME.match(value.strip())
    return found.group(0)[:-3].lower() if found else None


def is_url(value: str) -> bool:
    return value.lstrip().lower().startswith(URL_PREFIXES)


def is_keywords(value: str) -> bool:
    """A keyword DSN: the value starts with `keyword=` for a libpq keyword (a file path never does in practice)."""
    found = _KEYWORD_START.match(value)
    return found is not None and found.group(1).lower() in KEYWORDS


def is_postgres_url(value: object) -> bool:
    """A PostgreSQL connection string: a postgresql:// URL or a libpq keyword DSN."""
    return isinstance(value, str) and (scheme_of(value) in SCHEMES or is_keywords(value))


def parse(value: str) -> Parsed:
    """The libpq keywords of a URL or keyword DSN, as libpq reads them; ConninfoError when libpq cannot read it or
    would read it otherwise than meant; NoReader without psycopg."""
    try:
        # lazy: psycopg (the optional `postgres` extra) loads only for a PostgreSQL connection string
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        raise NoReader("psycopg is not installed") from None
    value = value.strip()
    form = "url" if is_url(value) else "keywords"
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(value).items()}
    except ProgrammingError as exc:
        said = str(exc)
        reason = next((ours for theirs, ours in _LIBPQ_SAYS if theirs in said), "libpq cannot read it")
        raise ConninfoError(f"{reason}; {_ENCODING}") from None
    if any(p and not p.isdigit() for p in params.get("port", "").split(",")):
        raise ConninfoError(f"the {'URL' if form == 'url' else 'keyword DSN'}'s port is not a number; {_ENCODING}")
    if form == "url" and "@" in params.get("host", ""):
        raise ConninfoError(f"the URL has an '@' after its user name and password; {_ENCODING}")
    if form == "url" and "@" in params.get("dbname", ""):
        raise ConninfoError(f"the URL has an '@' after its host; {_ENCODING}")
    parsed = Parsed(form, params)
    for name in SECRET_KEYWORDS:
        secret = params.get(name)
        if secret:
            handed = make_conninfo(**{name: secret}).partition("=")[2]  # as `conninfo` hands it to libpq
            parsed.secrets += [secret, handed, quote(secret, safe=""), *_written(value, form, name)]
    return parsed


def _written(value: str, form: str, name: str) -> list[str]:
    """The secret `name` as the string wrote it (percent-encoded in a URL, escaped in a keyword DSN), found by the
    separators alone; libpq has decoded it already (a linear pass)."""
    if form == "url":
        rest = value.split("://", 1)[1]
        cut = min((i for i in (rest.find("@"), rest.find("/")) if i >= 0), default=-1)
        found = [rest[:cut].partition(":")[2]] if name == "password" and cut >= 0 and rest[cut] == "@" else []
        query = rest.partition("?")[2]
        return found + [pair.partition("=")[2] for pair in query.split("&") if pair.partition("=")[0] == name]
    # unquoted values only: a quoted one is written as `conninfo` hands it (libpq's escaping), registered already
    return [word.partition("=")[2] for word in value.split() if word.partition("=")[0] == name and not word.partition("=")[2].startswith("'")]


def conninfo(parsed: Parsed) -> str:
    """A keyword DSN libpq reads back into exactly `parsed.params` (psycopg's make_conninfo)."""
    # lazy: psycopg is there: `parsed` came from `parse`
    from psycopg.conninfo import make_conninfo

    return make_conninfo(**parsed.params)


def check(url: str) -> str:
    """Why libpq cannot read `url` as meant (a message without any of its text), or "" when it can (or when psycopg
    is not installed: the engine then says what to install)."""
    try:
        parse(url)
    except NoReader:
        return ""
    except ConninfoError as exc:
        return str(exc)
    return ""


def passwords(url: str) -> list[str]:
    """The secrets in a connection string, decoded and as written (so both forms are blanked out); none when it
    cannot be read (it is refused before anything uses it)."""
    try:
        return parse(url).secrets
    except ConninfoError:
        return []


def shown(url: str) -> str:
    """The connection string with its password replaced by [redacted] (the form every message and log line uses);
    a path as it is; a malformed connection string (or one psycopg is not there to read) not at all."""
    if not is_postgres_url(url):
        return url
    try:
        parsed = parse(url)
    except NoReader:
        return UNREAD
    except ConninfoError:
        return UNSHOWN
    params = {k: (REDACTED if k in SECRET_KEYWORDS else v) for k, v in parsed.params.items()}
    if parsed.form == "keywords":
        return conninfo(Parsed("keywords", params))
    user, password = params.pop("user", None), params.pop("password", None)
    host, port, dbname = params.pop("host", ""), params.pop("port", ""), params.pop("dbname", None)
    userinfo = quote(user or "", safe="") + (f":{password}" if password else "")
    query = "&".join(f"{quote(k, safe='')}={v if k in SECRET_KEYWORDS else quote(v, safe='/')}" for k, v in params.items())
    return (
        "postgresql://" + (f"{userinfo}@" if userinfo else "") + _netloc(host, port)
        + (f"/{quote(dbname, safe='')}" if dbname is not None else "") + (f"?{query}" if query else "")
    )


def _netloc(host: str, port: str) -> str:
    hosts, ports = host.split(","), port.split(",")
    ports += [ports[-1] if len(ports) == 1 else ""] * (len(hosts) - len(ports))
    parts = []
    for h, p in zip(hosts, ports, strict=False):
        h = f"[{h}]" if ":" in h else quote(h, safe="")
        parts.append(h + (f":{p}" if p else ""))
    return ",".join(parts)


def register_secrets(url: str) -> None:
    """Blank the URL's password out of every log record from now on (redaction.RedactingFilter)."""
    register(*passwords(url))
