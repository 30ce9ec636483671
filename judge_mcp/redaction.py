"""Secrets never reach a log line: every credential a backend sends (API keys, the password of a base URL's
userinfo) is registered here, and a logging filter on the process's handlers blanks each one out of every record,
whoever logs it (httpcore's debug lines print response headers, so a server echoing `Authorization` would
otherwise put the key on stderr under `-v`). A secret is blanked in the forms an echo takes: as it is, reversed, in
hex, in base64 (the Basic credential of a URL with userinfo included), split across lines (see variants), and with
any of its characters URL-encoded (`%73`, `%2F` or `%2f`) or \\u-escaped (`\\u0073`, either hex case)."""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter strings are too common to blank out safely
MIN_TRANSFORMED_CHARS = 8  # a secret's transformed forms (below) are looked for once the secret is this long
# Between any two characters of an echoed secret: a line break, spaces, zero-width characters (a key split across
# lines or padded by a formatter) still count as the secret. The pattern's gaps are `\s` alone; the zero-width
# characters are searched as spaces (`_spaced`, the same length, so a match's span is the original text's): a class
# that names them costs the regex compiler ~12x more per gap (~150-250 ms for one 58-character key's forms, paid by
# the first backend call of every process).
_GAP = r"\s*+"
_ZERO_WIDTH = str.maketrans(dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), " "))


def _spaced(text: str) -> str:
    """`text` with each zero-width character as a space: what the pattern searches (same length, same offsets)."""
    return text.translate(_ZERO_WIDTH)

_known: set[str] = set()
_lock = threading.Lock()


def register(*secrets: str | None) -> None:
    """Remember credentials to blank out of every log record from now on."""
    with _lock:
        _known.update(s for s in secrets if s and len(s) >= MIN_SECRET_CHARS)


def known() -> list[str]:
    """The registered secrets, longest first (so a secret containing another is replaced whole)."""
    with _lock:
        return sorted(_known, key=len, reverse=True)


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters that depend on `data` alone, wherever it sits in a longer encoded stream (three
    alignments), in the standard and the URL-safe alphabets; the whole encoding with its padding too."""
    cores = {base64.b64encode(data).decode()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        first = -(-8 * offset // 6)  # the first character whose six bits all come from `data`
        last = 8 * (offset + len(data)) // 6  # one past the last such character
        cores.add(encoded[first:last])
    return cores | {c.replace("+", "-").replace("/", "_") for c in cores}


def variants(secrets: Iterable[str]) -> list[str]:
    """Every form of each secret to blank out, longest first: the secret itself and, for secrets of at least
    MIN_TRANSFORMED_CHARS, its reverse, its UTF-8 bytes in hex (both cases) and in base64 at any alignment (so
    base64(`user:KEY`), the Basic credential of a URL with userinfo, holds a blanked form of KEY and is blanked
    whole when `user:KEY` is a secret). Transformed forms shorter than MIN_TRANSFORMED_CHARS are left out."""
    found: set[str] = set()
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET_CHARS:
            continue
        found.add(secret)
        if len(secret) < MIN_TRANSFORMED_CHARS:
            continue
        data = secret.encode("utf-8")
        transformed = {secret[::-1], data.hex(), data.hex().upper(), *_base64_cores(data)}
        found.update(t for t in transformed if len(t) >= MIN_TRANSFORMED_CHARS)
    return sorted(found, key=len, reverse=True)


def _hex(value: int, digits: int) -> str:
    """`value` as `digits` hex digits, each letter matching either case (an echo may upper- or lower-case them)."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{digits}x}")


def _escaped(char: str) -> str:
    """A pattern for one character of a secret as an echo may write it: itself, URL-encoded (`%73`, every UTF-8
    byte), or JSON/Python-escaped (`\\u0073`, a UTF-16 pair beyond the BMP; `\\/` for a slash); hex in either case."""
    options = [re.escape(char), "".join("%" + _hex(b, 2) for b in char.encode("utf-8"))]
    units = char.encode("utf-16-be")
    options.append("".join(r"\\u" + _hex(int.from_bytes(units[i : i + 2], "big"), 4) for i in range(0, len(units), 2)))
    if char == "/":
        options.append(r"\\/")
    return "(?:" + "|".join(options) + ")"


@lru_cache(maxsize=64)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern | None:
    """One pattern for every variant of `secrets`, each allowing line breaks and spaces between its characters;
    a secret itself also with any of its characters URL-encoded or \\u-escaped (`_escaped`). Every gap is
    possessive and followed by a literal character (or an escape, which starts with one), and a character's
    forms start differently but for `%` and `\\` themselves, so a search hardly backtracks: linear time."""
    # A form's own whitespace is left to the gaps (a possessive gap would take it from the literal space after it).
    plain = set(secrets)
    parts = []
    for form in variants(secrets):
        squeezed = "".join(_spaced(form).split())
        if squeezed:
            unit = _escaped if form in plain else re.escape
            parts.append(_GAP.join(unit(c) for c in squeezed))
    return re.compile("|".join(parts)) if parts else None


def _compiled(secrets: Iterable[str]) -> re.Pattern | None:
    return _pattern(tuple(sorted({s for s in secrets if s})))


def contains(text: str, secrets: Iterable[str]) -> bool:
    """Whether `text` holds any form of any secret (see variants)."""
    pattern = _compiled(secrets)
    return pattern is not None and pattern.search(_spaced(text)) is not None


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every form of every secret (see variants), split across lines or not, replaced by REDACTED."""
    pattern = _compiled(secrets)
    if pattern is None:
        return text
    out: list[str] = []
    end = 0
    for match in pattern.finditer(_spaced(text)):
        out += (text[end : match.start()], REDACTED)
        end = match.end()
    return "".join(out) + text[end:] if out else text


def redact_tree(value: Any, secrets: list[str]) -> Any:
    """`value` (parsed JSON) with every secret blanked out of every string in it, keys included. Working on the
    parsed value catches the forms a raw-text search misses: a key echoed JSON-escaped (`\\u0073k-...`, `\\/`)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact_tree(v, secrets) for v in value]
    if isinstance(value, dict):
        return {redact(k, secrets) if isinstance(k, str) else k: redact_tree(v, secrets) for k, v in value.items()}
    return value


class RedactingFilter(logging.Filter):
    """Blanks every registered secret out of a record's message (arguments merged in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = known()
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's problem to report, not ours
            return True
        if contains(message, secrets):
            record.msg, record.args = redact(message, secrets), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and contains(record.exc_text, secrets):
            record.exc_text = redact(record.exc_text, secrets)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put the filter on every handler of `logger` (default: the root logger), where it sees every record."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
