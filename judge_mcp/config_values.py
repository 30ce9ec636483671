"""Reading one setting's value (a whole number, a positive number, a name): each failure a ConfigError naming the
variable or TOML key at fault."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
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


def flag_value(value: Any, what: str) -> bool:
    """An on/off value: 1/true/yes/on or 0/false/no/off (unset or empty: off); anything else names `what`."""
    text = "0" if value is None or str(value).strip() == "" else str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{what} must be 1 or 0 (true/false), got {value!r}")


# ---- OpenTelemetry (judge_mcp/telemetry.py; the extra `judge-mcp[otel]`) -------------------------------------------
OTEL_EXPORTERS = ("otlp", "console", "none")
OTEL_PROTOCOLS = ("http/protobuf", "grpc")
_OTEL_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@dataclass(frozen=True)
class OtelSettings:
    """Whether tool calls and model calls are traced, and how the spans leave the process. On with JUDGE_MCP_OTEL=1,
    or, with JUDGE_MCP_OTEL unset, when the standard OTLP settings say where to send them (an OTLP endpoint, or
    OTEL_TRACES_EXPORTER other than none); JUDGE_MCP_OTEL=0 and OTEL_SDK_DISABLED=true turn it off. The exporter
    itself reads the rest of the standard OTEL_* variables (headers, timeouts, service name, resource attributes)."""

    enabled: bool = False
    explicit: bool = False  # JUDGE_MCP_OTEL=1: a missing extra is then a warning, not silence
    capture_text: bool = False  # JUDGE_MCP_OTEL_CAPTURE_TEXT=1: judged text and model text may go into spans
    exporters: tuple[str, ...] = ("otlp",)  # OTEL_TRACES_EXPORTER
    protocol: str = "http/protobuf"  # OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL


def otel_settings(env: Mapping[str, str]) -> OtelSettings:
    def value(name: str) -> str | None:
        text = env.get(name)
        return None if text is None or text.strip() == "" else text.strip()

    exporters = tuple(part.strip().lower() for part in (value("OTEL_TRACES_EXPORTER") or "otlp").split(",") if part.strip())
    unknown = [name for name in exporters if name not in OTEL_EXPORTERS]
    if unknown:
        raise ConfigError(f"OTEL_TRACES_EXPORTER must list {', '.join(OTEL_EXPORTERS)}; got {', '.join(map(repr, unknown))}")
    protocol = (value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or value("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()
    if protocol not in OTEL_PROTOCOLS:
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL must be one of {', '.join(OTEL_PROTOCOLS)}; got {protocol!r}")
    switch = value("JUDGE_MCP_OTEL")
    explicit = flag_value(switch, "JUDGE_MCP_OTEL")
    asked = any(value(name) for name in _OTEL_ENDPOINTS) or value("OTEL_TRACES_EXPORTER") is not None
    wanted = explicit if switch is not None else asked
    disabled = flag_value(value("OTEL_SDK_DISABLED"), "OTEL_SDK_DISABLED")
    exporting = tuple(name for name in exporters if name != "none")
    return OtelSettings(
        enabled=wanted and not disabled and (bool(exporting) or explicit),
        explicit=explicit,
        capture_text=flag_value(value("JUDGE_MCP_OTEL_CAPTURE_TEXT"), "JUDGE_MCP_OTEL_CAPTURE_TEXT"),
        exporters=exporting,
        protocol=protocol,
    )
