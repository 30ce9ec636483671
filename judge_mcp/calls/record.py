"""`CallRecord`: one backend call as the verdict log keeps it (an item of a verdicts row's `calls` list).

Built once per call, by `CallContext.complete` (calls/context.py), from the request, its summary and the completion; turned into the log's
JSON object once, when the verdict row is written (`to_log`). It keeps the request's shape and the reply's metadata,
not their texts: the judged texts are in the verdict's inputs, the answer in `text` (each text is stored
once). A new field is one line here and one in `to_log` (omitted from the log when None, as the optional ones are).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from judge_mcp.backends.base import ChatRequest, Completion, response_summary

# What the backend layer's raw record (`Completion.raw`) may hold that the call record takes as its own fields; any
# other key in it is kept as it is (`extra`), so the log loses nothing a backend reports.
_RAW_FIELDS = ("request", "response", "attempts", "retried_errors", "dropped_parameters", "cached", "cache_key")
# Optional fields, left out of the log object when None (a cache hit made no attempt; a sample has no cache key; an
# answer without reasoning has none).
_OPTIONAL = ("attempts", "retried_errors", "dropped_parameters", "cache_key", "reasoning", "reasoning_chars")


@dataclass(slots=True)
class CallRecord:
    purpose: str  # the request's tag, e.g. "compare_pair:AB"
    cached: bool  # answered from the call cache or from an identical call in flight
    text: str
    finish_reason: str | None
    structured: bool  # decoded under the request's JSON schema
    latency_ms: float
    prompt_chars: int  # characters sent and received, as the LWE paper counts cost
    completion_chars: int
    request: dict[str, Any]  # ChatRequest.summary(): the request's shape, not its text
    response: dict[str, Any] | None  # the provider's reply without its text; None when answered from the cache
    cache_key: str | None = None  # None for samples (temperature > 0), which are never cached
    attempts: int | None = None  # None when answered from the cache (no attempt was made)
    retried_errors: list[dict[str, Any]] | None = None
    dropped_parameters: list[str] | None = None
    # the model's reasoning, apart from `text`: its start (backends/reasoning.kept) and its whole length
    reasoning: str | None = None
    reasoning_chars: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, request: ChatRequest, summary: dict[str, Any], completion: Completion, *, cached: bool, cache_key: str | None) -> "CallRecord":
        raw = completion.raw
        return cls(
            purpose=request.purpose,
            cached=cached,
            text=completion.text,
            finish_reason=completion.finish_reason,
            structured=completion.structured,
            latency_ms=round(completion.usage.latency_ms, 1),
            prompt_chars=len(request.system or "") + sum(len(m.content) for m in request.messages),
            completion_chars=len(completion.text),
            request=summary,
            response=response_summary(raw.get("response")),
            cache_key=cache_key,
            attempts=raw.get("attempts"),
            retried_errors=raw.get("retried_errors"),
            dropped_parameters=raw.get("dropped_parameters"),
            reasoning=completion.reasoning,
            reasoning_chars=completion.reasoning_chars or None,
            extra={k: v for k, v in raw.items() if k not in _RAW_FIELDS},
        )

    def to_log(self) -> dict[str, Any]:
        """The verdict log's JSON object for this call (the same keys as before the record was typed)."""
        out = dict(self.extra)
        out.update(
            purpose=self.purpose,
            cached=self.cached,
            text=self.text,
            finish_reason=self.finish_reason,
            structured=self.structured,
            latency_ms=self.latency_ms,
            prompt_chars=self.prompt_chars,
            completion_chars=self.completion_chars,
            request=self.request,
            response=self.response,
        )
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out
