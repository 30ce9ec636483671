"""Reading one setting's value (a whole number, a positive number, a name): each failure a ConfigError naming the
variable or TOML key at fault."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from stat import S_ISDIR as stat_is_dir, S_ISREG as stat_is_file
from urllib.parse import urlparse


SAMPLING_PRIORITIES = ("cost_priority", "speed_priority", "intelligence_priority")  # a sampling backend's ModelPreferences


class ConfigError(ValueError):
    """A configuration problem, with a message that names the variable or table at fault."""


def path_kind(path: str | os.PathLike[str]) -> str:
    """What is at a path the user named: "file", "folder", "other", "missing", or "denied" (this user may not look: a
    folder on the way it may not enter, such as another user's home). Never raises: pathlib's exists(), is_dir()
    and is_file() raise PermissionError there (before Python 3.14), which reached users as a traceback."""
    try:
        mode = os.stat(path).st_mode
    except PermissionError:
        return "denied"
    except (OSError, ValueError):  # missing, a file where a folder is named, a loop of links, a NUL in the name
        return "missing"
    return "folder" if stat_is_dir(mode) else "file" if stat_is_file(mode) else "other"


DENIED = "this user may not look there (no permission to enter a folder on its path)"


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


def unit_ratio(value: Any, what: str) -> float:
    """A number from 0 to 1, also written as text (an environment value: a price ratio)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"{what} must be a number from 0 to 1, got {value!r}") from None
    return unit_float(value, what)


def one_of(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    """The parser of a setting that takes one of `choices` (case and surrounding blanks do not matter)."""
    def parse(value: Any, what: str) -> str:
        chosen = value.strip().lower() if isinstance(value, str) else value
        if chosen not in choices:
            raise ConfigError(f"{what} must be one of {', '.join(choices)}; got {value!r}")
        return chosen

    return parse


def check_text(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {value!r}")
    return value


STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "off")
# reasoning_effort values of the Chat Completions API (backends/reasoning.py; which ones a model takes, its server says)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
ANTHROPIC_MIN_THINKING = 1024  # the smallest budget_tokens Anthropic's extended thinking takes


def structured_output_mode(value: Any, what: str) -> str:
    """`structured_output` (TOML, JUDGE_MCP_STRUCTURED_OUTPUT, or a backend built in code): auto | json_schema | off.
    The one check of it: the settings and both HTTP wire formats call this."""
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in STRUCTURED_OUTPUT_MODES:
        raise ConfigError(f"{what} must be one of {', '.join(STRUCTURED_OUTPUT_MODES)}; got {value!r}")
    return mode


def reasoning_effort(value: Any, what: str) -> str | None:
    """`reasoning_effort`: one of REASONING_EFFORTS, or None (unset: the model's own default)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    effort = value.strip().lower() if isinstance(value, str) else value
    if effort not in REASONING_EFFORTS:
        raise ConfigError(f"{what} must be one of {', '.join(REASONING_EFFORTS)}; got {value!r}")
    return effort


def thinking_budget(value: Any, what: str) -> int | None:
    """Anthropic's extended thinking budget: a whole number >= 1024 (Anthropic's minimum), 0 or unset: off."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = whole_number(value, what)
    if number == 0:
        return None
    if number < ANTHROPIC_MIN_THINKING:
        raise ConfigError(f"{what} must be 0 (off) or at least {ANTHROPIC_MIN_THINKING} (Anthropic's minimum budget_tokens), got {number}")
    return number


REASONING_KEYS = {"reasoning_effort": ("openai",), "reasoning_budget_tokens": ("openai", "anthropic"), "thinking_budget_tokens": ("anthropic",)}


def check_reasoning_kind(kind: str, given: dict[str, Any], name: Callable[[str], str]) -> None:
    """A reasoning setting given for a kind it does not apply to is an error naming it (never silently unused)."""
    for key, value in given.items():
        kinds = REASONING_KEYS[key]
        if value is not None and kind not in kinds:
            raise ConfigError(f"{name(key)} applies to the {' and '.join(kinds)} backends only, not to kind {kind!r}")


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


def shown_url(url: str) -> str:
    """`url` as an error message may show it: any userinfo (`user:KEY@`) replaced by `***@`, parseable or not."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/*)[^/?#]*@", r"\1***@", url)


def check_url(url: Any, what: str) -> str | None:
    if url is None or url == "":
        return None
    if not isinstance(url, str):
        raise ConfigError(f"{what} must be an http(s) URL, got {type(url).__name__}")
    url = url.strip()
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port  # both raise ValueError on a malformed host or port
    except ValueError as exc:
        raise ConfigError(f"{what} is not a valid URL ({exc}): {shown_url(url)!r}") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{what} must be an http(s) URL, got {shown_url(url)!r}")
    return url.rstrip("/")


def flag_value(value: Any, what: str) -> bool:
    """An on/off value: 1/true/yes/on or 0/false/no/off (unset or empty: off); anything else names `what`."""
    text = "0" if value is None or str(value).strip() == "" else str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{what} must be 1 or 0 (true/false), got {value!r}")


# ---- OpenTelemetry (judge_mcp/telemetry/hooks.py; the extra `judge-mcp[otel]`) -------------------------------------------
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
