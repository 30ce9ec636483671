"""Reading one setting's value (a whole number, a positive number, a name): each failure a ConfigError naming the
variable or TOML key at fault."""

from __future__ import annotations

import math
from typing import Any


class ConfigError(ValueError):
    """A configuration problem, with a message that names the variable or table at fault."""


def whole_number(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ConfigError(f"{what} must be a whole number, got {value!r}")
        return int(value)
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a whole number, got {value!r}") from None


def positive_int(value: Any, what: str) -> int:
    number = whole_number(value, what)
    if number < 1:
        raise ConfigError(f"{what} must be >= 1, got {number}")
    return number


def non_negative_int(value: Any, what: str) -> int:
    number = whole_number(value, what)
    if number < 0:
        raise ConfigError(f"{what} must be >= 0, got {number}")
    return number


def positive_float(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{what} must be a finite number > 0, got {value!r}")
    return number


def check_text(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {value!r}")
    return value


BATCH_KINDS = ("openai", "anthropic")  # the kinds whose providers offer a batch API


def check_batch(value: Any, kind: str, what: str) -> bool:
    """A backend's `batch` key: true or false, and true only for a kind whose provider has a batch API."""
    if not isinstance(value, bool):
        raise ConfigError(f"{what} must be true or false, got {value!r}")
    if value and kind not in BATCH_KINDS:
        raise ConfigError(
            f"{what} = true applies to kind = \"openai\" or \"anthropic\" (their providers' batch APIs), not kind = {kind!r}"
        )
    return value
