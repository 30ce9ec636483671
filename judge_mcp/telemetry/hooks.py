"""OpenTelemetry traces of tool calls and model calls: the hooks the rest of the code calls, and a no-op unless
the settings turn them on (config_values.OtelSettings) and the extra is installed (`pip install 'judge-mcp[otel]'`).

Off, nothing of OpenTelemetry's SDK is imported and each hook returns a shared do-nothing object. On, `configure`
imports judge_mcp/telemetry/otel.py, which makes the spans and events:

- `tool_call(name)`: a span around one MCP tool call (`execute_tool compare_pair`), with `tool_result(args, result)`
  adding the backend, model, call counts and one `gen_ai.evaluation.result` event per verdict;
- `model_call(backend, request)`: a GenAI client span (`chat {model}`) per request sent to a model, with its
  usage; an answer from the call cache sends nothing and makes no span (the tool span counts it in
  `judge_mcp.cached_calls`).

The process has one telemetry state, set by the last App built (an App's settings are the process's).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judge_mcp.backends.base import Backend, ChatRequest, Completion
    from judge_mcp.config.settings import Settings

log = logging.getLogger("judge_mcp.telemetry")


class _Off:
    """Every hook's answer while telemetry is off: enters, exits and records nothing."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def answered(self, completion: Completion, cached: bool) -> None:
        pass


OFF = _Off()
_on: Any = None  # telemetry_otel.Tracing while on


def configure(settings: Settings) -> None:
    """Turn the hooks on or off for these settings. On without the extra installed: a warning when JUDGE_MCP_OTEL=1
    asked for it (the standard OTEL_* variables alone may be meant for another program), then off."""
    global _on
    _on = None
    if not settings.otel.enabled:
        return
    try:
        # lazy: OpenTelemetry (the optional `otel` extra) loads only when tracing is on
        from judge_mcp.telemetry import otel as telemetry_otel
    except ImportError as exc:
        # lazy: what the otel extra installs is read only when it is missing
        from judge_mcp._version import install_hint

        level = logging.WARNING if settings.otel.explicit else logging.INFO
        log.log(level, "OpenTelemetry is asked for but not installed (%s): %s; tracing is off", exc.name, install_hint("otel"))
        return
    _on = telemetry_otel.Tracing.start(settings.otel)


def enabled() -> bool:
    return _on is not None


def tool_call(name: str) -> Any:
    """A context manager around one tool call (its span, while on)."""
    return OFF if _on is None else _on.tool_call(name)


def tool_result(args: Any, result: Any) -> None:
    """What the tool call in progress returned: its attributes and verdict events on the tool's span."""
    if _on is not None:
        _on.tool_result(args, result)


def model_call(backend: Backend, request: ChatRequest) -> Any:
    """A context manager around one request to a model; `.answered(completion, cached)` inside it says what came
    back (a span is made when it was not answered from the cache, or when the request failed)."""
    return OFF if _on is None else _on.model_call(backend, request)


def flush() -> None:
    """Send the spans still buffered (the App calls it when it closes)."""
    if _on is not None:
        _on.flush()
