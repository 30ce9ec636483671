"""Reading one setting's value (a whole number, a positive number, a name): each failure a ConfigError naming the
variable or TOML key at fault."""

from __future__ import annotations

import math
from typing import Any


SAMPLING_PRIORITIES = ("cost_priority", "speed_priority", "intelligence_priority")  # a sampling backend's ModelPreferences


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


def unit_float(value: Any, what: str) -> float:
    """A number from 0 to 1 (a sampling backend's model priorities)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{what} must be a number from 0 to 1, got {value!r}")
    return float(value)


def check_text(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {value!r}")
    return value


def check_sampling_keys(table: dict[str, Any], kind: str, where: str) -> tuple[tuple[str, float], ...]:
    """A [backends.NAME] table's model priorities, (name, 0..1) pairs. The sampling backend asks the MCP client, so it
    has no endpoint or key; the priorities apply to it alone."""
    if kind == "sampling":
        wrong = sorted(k for k in ("base_url", "api_key_env", "structured_output") if k in table)
        if wrong:
            raise ConfigError(f"{where}: kind = \"sampling\" asks the MCP client's model, which has no {', '.join(wrong)}")
    elif any(p in table for p in SAMPLING_PRIORITIES):
        raise ConfigError(f"{where}: {', '.join(p for p in SAMPLING_PRIORITIES if p in table)} apply to kind = \"sampling\" only")
    return tuple((p, unit_float(table[p], f"{where} {p}")) for p in SAMPLING_PRIORITIES if p in table)
