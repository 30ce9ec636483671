"""Input checks shared by every tool (and the bench harness). Each failure names the argument and the problem."""

from __future__ import annotations

import re
from typing import Any

MAX_TEXT_CHARS = 50_000  # one prompt, response, option or instruction
MAX_TOTAL_CHARS = 200_000  # all text arguments of one call together
SESSION_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"  # JSON Schema `pattern` (ECMA: `$` is the end of the text)
SESSION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # used with fullmatch: "default\n" is refused


class InputError(ValueError):
    """Bad tool input; the message is shown to the caller as is."""


def text(name: str, value: Any, *, max_chars: int = MAX_TEXT_CHARS, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(f"'{name}' must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InputError(f"'{name}' contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"'{name}' is not valid Unicode (it contains a lone surrogate)") from None
    if not allow_empty and not value.strip():
        raise InputError(f"'{name}' is empty")
    if len(value) > max_chars:
        raise InputError(f"'{name}' is {len(value):,} characters; the limit is {max_chars:,}")
    return value


def text_list(name: str, values: Any, *, min_items: int, max_items: int) -> list[str]:
    if not isinstance(values, list):
        raise InputError(f"'{name}' must be a list of strings, got {type(values).__name__}")
    if not (min_items <= len(values) <= max_items):
        raise InputError(f"'{name}' must hold {min_items} to {max_items} items, got {len(values)}")
    return [text(f"{name}[{i}]", v) for i, v in enumerate(values)]


def total(*values: str | list[str] | None) -> None:
    size = 0
    for v in values:
        if v is None:
            continue
        size += sum(len(x) for x in v) if isinstance(v, list) else len(v)
    if size > MAX_TOTAL_CHARS:
        raise InputError(f"the inputs add up to {size:,} characters; the limit for one call is {MAX_TOTAL_CHARS:,}")


def choice(name: str, value: Any, allowed: tuple[Any, ...]) -> Any:
    """`value` is one of `allowed` (a bool is not taken for 1 or 0)."""
    if value not in allowed or (isinstance(value, bool) and not any(a is value for a in allowed)):
        raise InputError(f"'{name}' must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"'{name}' must be true or false, got {value!r}")
    return value


def whole_number(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"'{name}' must be a whole number from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise InputError(f"'{name}' must be from {low} to {high}, got {value}")
    return value


def session_name(value: Any) -> str:
    if not isinstance(value, str) or not SESSION_RE.fullmatch(value):
        raise InputError(f"'session' must match [A-Za-z0-9_.-]{{1,64}}; got {value!r}")
    return value
