"""The OpenTelemetry side of judge_mcp/telemetry/hooks.py, imported only when tracing is on (it needs the `otel` extra).

Spans:
- `execute_tool {tool}` (INTERNAL) per tool call: `gen_ai.operation.name` execute_tool, `gen_ai.tool.name`, and
  from the result `judge_mcp.backend`, `judge_mcp.model`, `judge_mcp.calls`, `judge_mcp.cached_calls`,
  `judge_mcp.usage.*`, `judge_mcp.outcome` (ok / error / cancelled), `error.type` on failure; its events are the
  verdict's `gen_ai.evaluation.result` (telemetry/events.py). Under `serve`, the MCP SDK's own `tools/call {tool}`
  server span is its parent (and a client's trace context in `_meta` is that span's parent).
- `chat {model}` (CLIENT) per request sent to a model, following the GenAI semantic conventions:
  `gen_ai.operation.name` chat, `gen_ai.provider.name` and the older `gen_ai.system` (openai for the
  OpenAI-compatible wire, anthropic, llama.cpp for the embedded model), `gen_ai.request.model`,
  `gen_ai.request.max_tokens`, `gen_ai.request.temperature`, `gen_ai.output.type`, `gen_ai.response.model`,
  `gen_ai.response.id`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`,
  `gen_ai.usage.output_tokens`, `server.address`, `server.port`, `judge_mcp.attempts`, `judge_mcp.purpose`, and
  `error.type` on failure. It spans the call as the Judge saw it (retries included).

Judged text (instructions, answers, criteria, references, images' descriptions, prompts, the model's replies and
rationales) goes into spans only with JUDGE_MCP_OTEL_CAPTURE_TEXT=1: then `gen_ai.system_instructions`,
`gen_ai.input.messages`, `gen_ai.output.messages` on chat spans, `gen_ai.tool.call.arguments` on tool spans, and the
model's rationale in each evaluation's explanation. Error messages stay out either way (they may quote a reply):
a failed span carries its error type only.

The spans go to the process's tracer provider when one is set already (a host program's, or
`opentelemetry-instrument`'s); otherwise a provider is made from the standard OTEL_* variables (OTLP over
http/protobuf by default, or grpc with its exporter installed; `console` writes to stderr, never stdout, which
is the stdio transport's channel) and set as the global one, so the MCP SDK's spans go out too.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from judge_mcp._version import __version__
from judge_mcp.backends.base import Backend, ChatRequest, Completion
from judge_mcp.backends.errors import BackendError
from judge_mcp.config.values import OtelSettings
from judge_mcp.telemetry.events import evaluations, tool_attributes

log = logging.getLogger("judge_mcp.telemetry")

PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "local": "llama.cpp"}
_made: TracerProvider | None = None  # the provider made here (a later App finds it set and still flushes it)
_TOOL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar("judge_mcp_tool_call", default=None)


def current_provider() -> TracerProvider | None:
    """The process's SDK tracer provider, if something set one (None: the API's default, which records nothing)."""
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def _exporter(name: str, protocol: str) -> SpanExporter | None:
    if name == "console":
        return ConsoleSpanExporter(out=sys.stderr)
    try:
        if protocol == "grpc":
            # lazy: the OTLP exporter the environment names loads only when tracing starts
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # lazy: type: ignore[assignment]
    except ImportError as exc:
        package = "opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else "opentelemetry-exporter-otlp-proto-http"
        log.warning("OTLP over %s needs %s (%s): spans are not exported", protocol, package, exc.name)
        return None
    return OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression) itself


def _new_provider(settings: OtelSettings) -> TracerProvider:
    resource = Resource.create({"service.version": __version__})  # with OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "judge-mcp"}))
    provider = TracerProvider(resource=resource)
    for name in settings.exporters:
        exporter = _exporter(name, settings.protocol)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class Tracing:
    """Tracing on: the tracer, whether text may be captured, and the per-backend attributes computed once."""

    def __init__(self, provider: TracerProvider, settings: OtelSettings, owned: bool):
        self.provider = provider
        self.owned = owned  # made here (flushed by `flush`), not the host's
        self.tracer = provider.get_tracer("judge_mcp", __version__)
        self.capture_text = settings.capture_text
        self._backends: dict[int, tuple[Backend, dict[str, Any]]] = {}

    @classmethod
    def start(cls, settings: OtelSettings) -> Tracing:
        global _made
        provider = current_provider()
        if provider is None:
            provider = _made = _new_provider(settings)
            trace.set_tracer_provider(provider)
        return cls(provider, settings, owned=provider is _made)

    def flush(self) -> None:
        if self.owned:
            self.provider.force_flush()

    # ---- tool calls ------------------------------------------------------------------------------------------------
    def tool_call(self, name: str) -> ToolCall:
        return ToolCall(self, name)

    def tool_result(self, args: Any, result: Any) -> None:
        call = _TOOL.get()
        if call is None or call.span is None:
            return
        call.span.set_attributes(tool_attributes(args, result, self.capture_text))
        for event in evaluations(call.name, result, self.capture_text):
            call.span.add_event("gen_ai.evaluation.result", event)

    # ---- model calls -----------------------------------------------------------------------------------------------
    def model_call(self, backend: Backend, request: ChatRequest) -> ModelCall:
        return ModelCall(self, backend, request)

    def backend_attributes(self, backend: Backend) -> dict[str, Any]:
        """The attributes every call to `backend` shares (kept while the backend lives; the App keeps its backends)."""
        known = self._backends.get(id(backend))
        if known is not None and known[0] is backend:
            return known[1]
        provider = PROVIDERS.get(backend.kind, backend.kind)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.system": provider,
            "gen_ai.request.model": backend.model, "judge_mcp.backend": backend.name,
        }
        base_url = getattr(backend, "base_url", None)
        if isinstance(base_url, str) and base_url:
            parts = urlsplit(base_url)
            if parts.hostname:
                attributes["server.address"] = parts.hostname
                attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        self._backends[id(backend)] = (backend, attributes)
        return attributes

    def model_span(self, call: ModelCall, error: BaseException | None) -> None:
        request, backend = call.request, call.backend
        attributes = dict(self.backend_attributes(backend))
        attributes.update({
            "gen_ai.request.max_tokens": request.max_tokens, "gen_ai.request.temperature": request.temperature,
            "gen_ai.output.type": "json" if request.json_schema is not None else "text",
        })
        if request.purpose:
            attributes["judge_mcp.purpose"] = request.purpose
        span = self.tracer.start_span(f"chat {backend.model}", kind=SpanKind.CLIENT, start_time=call.started, attributes=attributes)
        if error is not None:
            kind = _error_type(error)
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        elif call.completion is not None:
            span.set_attributes(_response_attributes(call.completion))
        if self.capture_text:
            span.set_attributes(_messages(request, None if error is not None else call.completion))
        span.end()


class ToolCall:
    """One tool call's span, current while the tool runs (so the chat spans of its model calls are its children)."""

    def __init__(self, tracing: Tracing, name: str):
        self.tracing, self.name = tracing, name
        self.span: Any = None

    def __enter__(self) -> ToolCall:
        self.span = self.tracing.tracer.start_span(
            f"execute_tool {self.name}", kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.name, "gen_ai.tool.type": "function"},
        )
        self._context = otel_context.attach(trace.set_span_in_context(self.span))
        self._token = _TOOL.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        _TOOL.reset(self._token)
        otel_context.detach(self._context)
        if exc is None:
            self.span.set_attribute("judge_mcp.outcome", "ok")
        elif not isinstance(exc, Exception):
            self.span.set_attribute("judge_mcp.outcome", "cancelled")
        else:
            error = _error_type(exc)
            self.span.set_attributes({"judge_mcp.outcome": "error", "error.type": error})
            self.span.set_status(Status(StatusCode.ERROR, error))
        self.span.end()


class ModelCall:
    """One request to a model as the Judge makes it: a chat span is written when it ends, back-dated to its start,
    unless the call cache answered it (nothing was sent)."""

    __slots__ = ("tracing", "backend", "request", "started", "completion", "cached")

    def __init__(self, tracing: Tracing, backend: Backend, request: ChatRequest):
        self.tracing, self.backend, self.request = tracing, backend, request
        self.completion: Completion | None = None
        self.cached = False
        self.started = 0

    def __enter__(self) -> ModelCall:
        self.started = time.time_ns()
        return self

    def answered(self, completion: Completion, cached: bool) -> None:
        self.completion, self.cached = completion, cached

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is None and self.completion is not None and not self.cached:
                self.tracing.model_span(self, None)
            elif isinstance(exc, Exception):
                self.tracing.model_span(self, exc)
        except Exception:  # telemetry must never fail a judgment
            log.debug("could not record a model call's span", exc_info=True)


def _error_type(exc: BaseException) -> str:
    """A low-cardinality name for a failure: an HTTP status where the backend got one, else the exception's class
    (a ToolError's cause: the anticipated failure behind it). Never its message."""
    for _ in range(8):  # the SDK's ToolError wraps the tool's, which wraps the failure (or hides it: `from None`)
        if type(exc).__name__ not in ("ToolError", "UnexpectedToolError"):
            break
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    if isinstance(exc, BackendError) and exc.status is not None:
        return str(exc.status)
    return type(exc).__name__


def _response_attributes(completion: Completion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gen_ai.response.model": completion.model,
        "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
        "judge_mcp.attempts": completion.attempts,
    }
    if completion.finish_reason:
        out["gen_ai.response.finish_reasons"] = [completion.finish_reason]
    response = completion.raw.get("response")
    if isinstance(response, dict) and isinstance(response.get("id"), str):
        out["gen_ai.response.id"] = response["id"]
    return out


def _messages(request: ChatRequest, completion: Completion | None) -> dict[str, Any]:
    """The captured text (JUDGE_MCP_OTEL_CAPTURE_TEXT=1) in the semantic conventions' JSON shapes; images as their
    media type, size and SHA-256, never their bytes."""
    def parts(message: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"type": "text", "content": message.content}]
        for caption, images in message.images:
            out.append({"type": "text", "content": caption})
            out.extend({"type": "image", **image.described()} for image in images)
        return out

    out: dict[str, Any] = {"gen_ai.input.messages": json.dumps([{"role": m.role, "parts": parts(m)} for m in request.messages], ensure_ascii=False)}
    if request.system:
        out["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": request.system}], ensure_ascii=False)
    if completion is not None:
        output = {"role": "assistant", "parts": [{"type": "text", "content": completion.text}], "finish_reason": completion.finish_reason or ""}
        out["gen_ai.output.messages"] = json.dumps([output], ensure_ascii=False)
    return out
