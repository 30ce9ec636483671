"""Secrets never reach a log line: every credential a backend sends (API keys, the password of a base URL's
userinfo) is registered here, and a logging filter on the process's handlers blanks each one out of every record,
whoever logs it (httpcore's debug lines print response headers, so a server echoing `Authorization` would
otherwise put the key on stderr under `-v`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter strings are too common to blank out safely

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


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


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
        if any(s in message for s in secrets):
            record.msg, record.args = redact(message, secrets), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and any(s in record.exc_text for s in secrets):
            record.exc_text = redact(record.exc_text, secrets)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put the filter on every handler of `logger` (default: the root logger), where it sees every record."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
