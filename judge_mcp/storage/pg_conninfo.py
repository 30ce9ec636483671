"""PostgreSQL connection strings read as libpq reads them: a URL (`postgresql://` or `postgres://`; libpq's
conninfo_uri_parse_options) or a keyword DSN (`host=db password='a b' dbname=judge`; libpq's conninfo_parse).

Both forms become one dict of libpq keywords (`parse`), which is what is handed to the driver (`conninfo`, a
keyword DSN with every value quoted), what is shown (`shown`, the password as [redacted]) and where the secrets to
redact come from (`Parsed.secrets`: each secret as libpq decodes it and as it was written). A value libpq would read
differently from what its writer meant is refused (ConninfoError) rather than guessed at: a raw `@` after the
userinfo, or a port that is not a number, is what a password holding `/` or `@` written without percent-encoding
looks like. No message of ConninfoError holds any part of the value: only keyword names and positions.

Linear time: each parser walks the value once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = ["ConninfoError", "Parsed", "conninfo", "is_keywords", "is_url", "parse", "shown"]

URL_PREFIXES = ("postgresql://", "postgres://")  # libpq's URI designators
KEYWORDS = frozenset(
    "application_name channel_binding client_encoding connect_timeout dbname fallback_application_name gssdelegation "
    "gssencmode gsslib host hostaddr keepalives keepalives_count keepalives_idle keepalives_interval krbsrvname "
    "load_balance_hosts max_protocol_version min_protocol_version oauth_client_id oauth_client_secret oauth_issuer "
    "oauth_scope options passfile password port replication require_auth requirepeer scram_client_key scram_server_key "
    "service ssl_max_protocol_version ssl_min_protocol_version sslcert sslcertmode sslcompression sslcrl sslcrldir "
    "sslkey sslkeylogfile sslmode sslnegotiation sslpassword sslrootcert sslsni target_session_attrs tcp_user_timeout "
    "user".split()
)
SECRET_KEYWORDS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
REDACTED = "[redacted]"
_KEYWORD_START = re.compile(r"\s*([A-Za-z_]+)\s*=")
_HEX = frozenset("0123456789abcdefABCDEF")
_SPACE = " \t\n\r\f\v"
_ENCODING = (
    "a password (or user name) holding '@', '/', ':', '?', '#' or '[' must be percent-encoded in a URL ('@' as %40, "
    "'/' as %2F), or given in a keyword DSN: host=... password='...' dbname=..."
)


class ConninfoError(ValueError):
    """A connection string libpq would refuse or read otherwise than meant; the message holds none of its text."""


@dataclass
class Parsed:
    """A connection string's libpq keywords (in the order written; a later one replaces an earlier) and its form."""

    form: str  # "url" or "keywords"
    params: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)  # each secret decoded and as written


def is_url(value: str) -> bool:
    return value.lstrip().lower().startswith(URL_PREFIXES)


def is_keywords(value: str) -> bool:
    """A keyword DSN: the value starts with `keyword=` for a libpq keyword (a file path never does in practice)."""
    found = _KEYWORD_START.match(value)
    return found is not None and found.group(1).lower() in KEYWORDS


def parse(value: str) -> Parsed:
    """The libpq keywords of a URL or keyword DSN; ConninfoError when it is malformed."""
    value = value.strip()
    parsed = _parse_url(value) if is_url(value) else _parse_keywords(value)
    for name in SECRET_KEYWORDS:
        if parsed.params.get(name):
            parsed.secrets.append(parsed.params[name])
            parsed.secrets.append(_quoted(parsed.params[name]))  # as `conninfo` hands it to libpq
    return parsed


def conninfo(parsed: Parsed) -> str:
    """A keyword DSN libpq reads back into exactly `parsed.params` (every value quoted)."""
    return " ".join(f"{name}={_quoted(value)}" for name, value in parsed.params.items())


def shown(parsed: Parsed) -> str:
    """The connection string in its own form, every secret as [redacted]."""
    params = {k: (REDACTED if k in SECRET_KEYWORDS else v) for k, v in parsed.params.items()}
    if parsed.form == "keywords":
        return " ".join(f"{k}={v if k in SECRET_KEYWORDS or _plain(v) else _quoted(v)}" for k, v in params.items())
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


def _plain(value: str) -> bool:
    return bool(value) and not any(c in value for c in "'\\" + _SPACE)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _decode(raw: str, what: str) -> str:
    """libpq's conninfo_uri_decode: %XX (two hex digits, not %00) decoded, as UTF-8."""
    if "%" not in raw:
        return raw
    out, i = bytearray(), 0
    data = raw.encode("utf-8")
    while i < len(data):
        if data[i] == 0x25:
            pair = data[i + 1 : i + 3].decode("latin-1")
            if len(pair) < 2 or not set(pair) <= _HEX or pair == "00":
                raise ConninfoError(f"the URL's {what} holds an invalid percent-encoding (% must be followed by two hex digits); {_ENCODING}")
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(data[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def _parse_url(value: str) -> Parsed:
    """libpq's conninfo_uri_parse_options, plus the refusals described in the module docstring."""
    prefix = next(p for p in URL_PREFIXES if value.lower().startswith(p))
    rest, parsed = value[len(prefix) :], Parsed("url")
    params = parsed.params
    cut = min((rest.find(c) for c in "@/" if c in rest), default=-1)
    if cut >= 0 and rest[cut] == "@":  # scheme://user[:password]@...
        userinfo, rest = rest[:cut], rest[cut + 1 :]
        user, colon, password = userinfo.partition(":")
        if user:
            params["user"] = _decode(user, "user name")
        if colon and password:
            parsed.secrets.append(password)
            params["password"] = _decode(password, "password")
    netloc_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, rest = rest[:netloc_end], rest[netloc_end:]
    hosts, ports = _hosts(netloc)
    if any(hosts):
        params["host"] = ",".join(_decode(h, "host") for h in hosts)
    if any(ports):
        params["port"] = ",".join(_decode(p, "port") for p in ports)
    if any(p and not p.isdigit() for p in ports):
        raise ConninfoError(f"the URL's port is not a number; {_ENCODING}")
    path, question, query = rest.partition("?")
    if path.startswith("/") and path[1:]:
        if "@" in path:
            raise ConninfoError(f"the URL has an '@' after its host; {_ENCODING}")
        params["dbname"] = _decode(path[1:], "database name")
    if question:
        _query(query, parsed)
    return parsed


def _hosts(netloc: str) -> tuple[list[str], list[str]]:
    """The host list `host[:port][,host[:port]...]` ([...] around an IPv6 address) as libpq splits it."""
    hosts, ports = [], []
    for item in netloc.split(",") if netloc else [""]:
        if item.startswith("["):
            end = item.find("]")
            if end < 0:
                raise ConninfoError(f"the URL has a '[' without its ']' (an IPv6 host is written [::1]); {_ENCODING}")
            if end == 1:
                raise ConninfoError("the URL has an empty IPv6 host ([])")
            host, after = item[1:end], item[end + 1 :]
            if after and not after.startswith(":"):
                raise ConninfoError(f"the URL has text after an IPv6 host's ']' (expected ':' and a port); {_ENCODING}")
            port = after[1:]
        else:
            host, _, port = item.partition(":")
        if "@" in host:
            raise ConninfoError(f"the URL has an '@' after its user name and password; {_ENCODING}")
        hosts.append(host)
        ports.append(port)
    return hosts, ports


def _query(query: str, parsed: Parsed) -> None:
    """libpq's conninfo_uri_parse_params: `keyword=value` pairs separated by `&`, each decoded; ssl=true is
    sslmode=require."""
    for n, pair in enumerate(query.split("&") if query else [], start=1):
        name, equals, raw = pair.partition("=")
        if not equals or "=" in raw:
            raise ConninfoError(f"the URL's query parameter {n} is not one keyword=value (a '=' or '&' in a value is written %3D, %26)")
        keyword = _decode(name, f"query parameter {n}")
        text = _decode(raw, f"query parameter {n}")
        if keyword == "ssl" and text == "true":
            keyword, text = "sslmode", "require"
        if keyword not in KEYWORDS:
            raise ConninfoError(f"the URL's query parameter {n} is not a libpq keyword")
        if keyword in SECRET_KEYWORDS and raw:
            parsed.secrets.append(raw)
        parsed.params[keyword] = text


def _parse_keywords(value: str) -> Parsed:
    """libpq's conninfo_parse: `keyword = value` settings separated by spaces; a value in single quotes may hold
    spaces; a backslash takes the next character as it is."""
    parsed, i, n, count = Parsed("keywords"), 0, len(value), 0
    while i < n:
        if value[i] in _SPACE:
            i += 1
            continue
        count += 1
        start = i
        while i < n and value[i] != "=" and value[i] not in _SPACE:
            i += 1
        keyword = value[start:i]
        while i < n and value[i] in _SPACE:
            i += 1
        if i >= n or value[i] != "=" or keyword not in KEYWORDS:
            raise ConninfoError(
                f"setting {count} of the keyword DSN is not keyword=value with a libpq keyword (a value holding spaces, "
                "quotes or backslashes goes in single quotes, e.g. password='a b\\'c')"
            )
        i += 1
        while i < n and value[i] in _SPACE:
            i += 1
        text, i, raw = _keyword_value(value, i, count)
        if keyword in SECRET_KEYWORDS and raw:
            parsed.secrets.append(raw)
        parsed.params[keyword] = text
    return parsed


def _keyword_value(value: str, i: int, count: int) -> tuple[str, int, str]:
    """The value starting at `i` (quoted or not): (its text, the index past it, the text as written)."""
    n, out, start = len(value), [], i
    quoted = i < n and value[i] == "'"
    i += quoted
    while i < n:
        c = value[i]
        if c == "\\":
            out.append(value[i + 1 : i + 2])
            i += 2
        elif quoted and c == "'":
            return "".join(out), i + 1, value[start : i + 1]
        elif not quoted and c in _SPACE:
            break
        else:
            out.append(c)
            i += 1
    if quoted:
        raise ConninfoError(f"setting {count} of the keyword DSN has a quoted value without its closing quote")
    return "".join(out), i, value[start:i]
