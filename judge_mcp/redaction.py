"""Secrets never reach a log line: every credential a backend sends (API keys, the password of a base URL's
userinfo) is registered here, and a logging filter on the process's handlers blanks each one out of every record,
whoever logs it (httpcore's debug lines print response headers, so a server echoing `Authorization` would
otherwise put the key on stderr under `-v`). A secret is blanked in the forms an echo takes: as it is, reversed, in
hex, in base64 (the Basic credential of a URL with userinfo included), split across lines (see variants), and with
any of its characters URL-encoded (`%73`, `%2F` or `%2f`), \\u-escaped (`\\u0073`, either hex case) or written as an
HTML character reference (`&#115;`, `&#x73;`); every form in any letter case (an echo upper-cased, `SK-...`), and the
encoded forms of its upper- and lower-cased spellings too. The same blanking runs on every value written to the
database (`scrub`, called by storage/engine.dumps and storage/texts), so a form a backend's reply check missed never
reaches a call record, a cached answer or a stored text."""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable, Sequence
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
# What the pattern searches: the text with each zero-width character as a space and each ASCII capital as its small
# letter (a key echoed upper-cased, `SK-...`, an escape's hex digits either case): one translation, the same length
# and offsets, so a match's span is the original text's. (re.IGNORECASE makes the search ~8x slower.)
_FOLD: dict[int, str] = {**dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), " "),
                         **{ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}}


def _folded(text: str) -> str:
    """`text` as the pattern searches it (_FOLD): zero-width characters as spaces, ASCII letters in small case."""
    return text.translate(_FOLD)


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
    whole when `user:KEY` is a secret), and the hex and base64 of its upper- and lower-cased spellings (the search
    ignores case, which base64 does not preserve). Transformed forms shorter than MIN_TRANSFORMED_CHARS are left out."""
    found: set[str] = set()
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET_CHARS:
            continue
        found.add(secret)
        if len(secret) < MIN_TRANSFORMED_CHARS:
            continue
        transformed = {secret[::-1]}
        for spelling in {secret, secret.upper(), secret.lower()}:  # the pattern ignores case; base64 does not
            data = spelling.encode("utf-8")
            transformed.update((data.hex(), *_base64_cores(data)))
        found.update(t for t in transformed if len(t) >= MIN_TRANSFORMED_CHARS)
    return sorted(found, key=len, reverse=True)


def _escaped(char: str) -> str:
    """A pattern for one character of a secret (folded: _FOLD) as an echo may write it: itself, URL-encoded (`%73`,
    every UTF-8 byte), JSON/Python-escaped (`\\u0073`, a UTF-16 pair beyond the BMP; `\\/` for a slash) or an HTML
    character reference (`&#115;`, `&#x73;`); a letter's escapes those of either of its cases (`%53` is `S`). Hex
    digits are small: the text searched is folded too."""
    options = [re.escape(char)]
    for spelling in dict.fromkeys((char, char.upper()) if char.isascii() else (char,)):
        options.append("".join(f"%{b:02x}" for b in spelling.encode("utf-8")))
        units = spelling.encode("utf-16-be")
        options.append("".join(r"\\u" + f"{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)))
        code = ord(spelling)
        options += [f"&#0*+{code};", f"&#x0*+{code:x};"]  # HTML character references (no leading zero of their own)
    if char == "/":
        options.append(r"\\/")
    return "(?:" + "|".join(options) + ")"


@lru_cache(maxsize=64)
def _patterns(secrets: tuple[str, ...]) -> tuple[re.Pattern, ...]:
    """The patterns for every variant of `secrets`, folded (_FOLD), each allowing line breaks and spaces between its
    characters: one per secret as it is, with any of its characters encoded (`_escaped`), and one for every
    transformed form (reverse, hex, base64). Searched one after the other, not as one alternation: each keeps the
    regex engine's skip over positions where it cannot start (together they are ~3x slower than apart). Every gap
    is possessive and followed by a literal character (or an escape, which starts with one), and a character's
    forms start differently but for `%`, `\\` and `&` themselves, so a search hardly backtracks: linear time."""
    # A form's own whitespace is left to the gaps (a possessive gap would take it from the literal space after it).
    plain = set(secrets)
    own, transformed = [], []
    for form in variants(secrets):
        squeezed = "".join(_folded(form).split())
        if squeezed:
            if form in plain:
                own.append(_GAP.join(_escaped(c) for c in squeezed))
            else:
                transformed.append(_GAP.join(re.escape(c) for c in squeezed))
    parts = [*own, "|".join(dict.fromkeys(transformed))] if transformed else own
    return tuple(re.compile(part) for part in parts)


def _compiled(secrets: Iterable[str]) -> tuple[re.Pattern, ...]:
    return _patterns(tuple(sorted({s for s in secrets if s})))


def contains(text: str, secrets: Iterable[str]) -> bool:
    """Whether `text` holds any form of any secret (see variants)."""
    patterns = _compiled(secrets)
    if not patterns:
        return False
    folded = _folded(text)
    return any(pattern.search(folded) is not None for pattern in patterns)


def _spans(folded: str, patterns: tuple[re.Pattern, ...]) -> list[tuple[int, int]]:
    """Every match of every pattern, overlapping ones merged, in order."""
    found = sorted(m.span() for pattern in patterns for m in pattern.finditer(folded))
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every form of every secret (see variants), split across lines or not, replaced by REDACTED."""
    patterns = _compiled(secrets)
    if not patterns:
        return text
    out: list[str] = []
    end = 0
    for start, stop in _spans(_folded(text), patterns):
        out += (text[end:start], REDACTED)
        end = stop
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


def scrub(value: Any) -> Any:
    """`value` (a JSON-like value about to be written: a column, a stored text) with every registered secret blanked
    out of its strings (redact_tree); `value` itself when no secret is registered."""
    secrets = known()
    return redact_tree(value, secrets) if secrets else value


def scrub_params(params: Sequence[Any]) -> Sequence[Any]:
    """A statement's parameters with every registered secret blanked out of its text values (the engines' writes
    call it: a plain text column, an LWE meta-prompt or a label, is as clean as a JSON one); `params` itself when no
    secret is registered or none is found."""
    secrets = known()
    if not secrets or not any(isinstance(p, str) for p in params):
        return params
    return [redact(p, secrets) if isinstance(p, str) else p for p in params]


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
