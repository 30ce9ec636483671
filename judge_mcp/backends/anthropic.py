"""Anthropic Messages API over aiohttp (`POST {base_url}/v1/messages`).

The wire format: `x-api-key` and `anthropic-version` headers, the system prompt as a top-level `system` field,
`max_tokens` always sent, `temperature` sent (0 unless the request says otherwise; Anthropic's range is 0..1, so
higher values are clamped). Structured output uses the generally available JSON outputs shape,
`output_config: {"format": {"type": "json_schema", "schema": ...}}` (no beta header), with the schema adjusted to
what Claude's constrained decoding accepts (see `anthropic_schema`).

Prompt caching: where a request marks the part its judgment's calls share and that part reaches the model's
cacheable minimum, the first message goes as text blocks with `cache_control` breakpoints (prompt_cache.py); a
server that refuses `cache_control` (a 400 naming it) gets the request again without, and none from then on.

Three 400s are handled by dropping the refused parameter and sending again once, remembering it for this backend
and model (`learned.Learned`): newer models (Claude Opus 4.7 and later) refuse `temperature` (some `top_p`), and
older models refuse `output_config`; after the latter, `supports_json_schema` turns false so methods fall back to
their text grammars (one warning in the log).
The setting `structured_output` overrides this as for the OpenAI-compatible backend: `off` never sends a schema,
`json_schema` always does (a refusal is then an error).

Extended thinking (`thinking_budget_tokens`, >= 1024): `thinking: {type: "enabled", budget_tokens}` with
`max_tokens` = the method's budget + the thinking budget + `reasoning_budget_tokens` (so above budget_tokens, as the
API requires), no `temperature` (thinking takes none other than its default) and `top_p` only from 0.95 to 1; no
tool_choice is ever sent. The reply's `thinking` (and `redacted_thinking`) blocks are the completion's reasoning,
never its text.
"""

from __future__ import annotations

import copy
from typing import Any

from judge_mcp.backends.base import ChatRequest, Completion, Message, Usage

from judge_mcp.backends.errors import FatalError, RetryableError
from judge_mcp.backends.openai_wire import token_count
from judge_mcp.backends.prompt_cache import anthropic_first_blocks
from judge_mcp.backends.reasoning import ANTHROPIC_MIN_TOP_P
from judge_mcp.backends.remote import RemoteBackend
from judge_mcp.config.values import ConfigError, thinking_budget

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"

# stop_reason -> the finish_reason vocabulary the rest of the code shares with the OpenAI wire format
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}

# JSON-schema keywords Claude's structured outputs reject; they are moved into the description instead.
UNSUPPORTED_KEYWORDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "minProperties",
    "maxProperties",
)
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "not", "contains", "additionalItems")


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` that Claude's structured outputs accept: every object closed with
    `additionalProperties: false`, unsupported constraints (min/max, lengths, minItems > 1) dropped and noted in
    the description so the model still sees them."""
    return _fix_node(copy.deepcopy(schema))


def _fix_node(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    _note_unsupported(node)
    is_object = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]) or "properties" in node
    if is_object:
        node["additionalProperties"] = False
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {name: _fix_node(sub) for name, sub in node[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_fix_node(sub) for sub in node[key]]
    for key in _SCHEMA_ONE:
        if isinstance(node.get(key), dict):
            node[key] = _fix_node(node[key])
    return node


def _note_unsupported(node: dict[str, Any]) -> None:
    """Drop the node's unsupported constraints, noting them at the end of its description."""
    notes = [f"{key}: {node.pop(key)}" for key in UNSUPPORTED_KEYWORDS if key in node]
    if isinstance(node.get("minItems"), int) and node["minItems"] > 1:
        notes.append(f"minItems: {node.pop('minItems')}")
    if notes:
        described = str(node.get("description") or "").strip()
        node["description"] = (described + " " if described else "") + "(" + ", ".join(notes) + ")"


def content_blocks(m: Message) -> list[dict[str, Any]]:
    """A message with images as Messages API content blocks: its text, then each group's caption and its base64
    `image` blocks."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
    for caption, group in m.images:
        blocks.append({"type": "text", "text": caption})
        blocks.extend({"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.base64}} for i in group)
    return blocks


def messages_url(base_url: str) -> str:
    """`{base}/v1/messages`; a base URL that already ends in /v1 is accepted as well."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


class AnthropicBackend(RemoteBackend):
    kind = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, name: str, model: str, *, thinking_budget_tokens: int | None = None, **kwargs: Any):
        super().__init__(name, model, **kwargs)
        try:
            self.thinking_budget_tokens = thinking_budget(thinking_budget_tokens, f"backend '{name}': thinking_budget_tokens")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        self.url = messages_url(self.base_url)

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    @property
    def reasoning_budget(self) -> int:
        """The thinking budget (when thinking is on) plus `reasoning_budget_tokens` (default 0 here)."""
        return (self.thinking_budget_tokens or 0) + (self.reasoning_budget_tokens or 0)

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        system_parts = [request.system] if request.system else []
        messages: list[dict[str, Any]] = []
        cached = anthropic_first_blocks(request, self.model) if request.cache_hints and not self.learned.no_cache_control else None  # prompt_cache.py
        for k, m in enumerate(request.messages):
            if m.role == "system":  # the Messages API has no system role inside `messages`
                system_parts.append(m.content)
            elif k == 0 and cached is not None:
                messages.append({"role": m.role, "content": cached + content_blocks(m)[1:]})
            else:
                messages.append({"role": m.role, "content": content_blocks(m) if m.images else m.content})
        thinking = self.thinking_budget_tokens
        # max_tokens is required: with thinking on it must exceed budget_tokens, which output_budget's sum does
        payload: dict[str, Any] = {"model": self.model, "max_tokens": self.output_budget(request), "messages": messages}
        if system_parts:
            payload["system"] = "\n\n".join(system_parts)
        if thinking:
            payload["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        elif not self.learned.no_temperature:  # thinking takes no temperature (Anthropic's extended thinking docs)
            payload["temperature"] = min(max(float(request.temperature), 0.0), 1.0)
        # only a request that names it (a published judge's); with thinking on, only from ANTHROPIC_MIN_TOP_P to 1
        if request.top_p is not None and not self.learned.no_top_p and (not thinking or request.top_p >= ANTHROPIC_MIN_TOP_P):
            payload["top_p"] = request.top_p
        if request.json_schema is not None and self.supports_json_schema:
            payload["output_config"] = {"format": {"type": "json_schema", "schema": anthropic_schema(request.json_schema)}}
        return payload

    async def _send(self, request: ChatRequest) -> Completion:
        payload = self.payload(request)
        dropped: list[str] = []
        while True:
            try:
                body = await self.post(self.url, payload, self.headers())
                break
            except FatalError as exc:
                refused = self._refused_parameter(exc, payload)
                if refused is None or refused in dropped:
                    raise
                dropped.append(refused)
                payload = self.payload(request)
        completion = parse_message(body, self.model, payload, structured="output_config" in payload)
        why = "extended thinking is on" if self.thinking_budget_tokens else "the model refuses it"
        return self.finish(completion, request, payload, dropped, why)

    def _refused_parameter(self, exc: FatalError, payload: dict[str, Any]) -> str | None:
        """When a 400 says the model refuses `temperature`, `top_p` or structured output, stop sending it; else None."""
        if exc.status != 400:
            return None
        cause = exc.cause.lower()
        if "cache_control" in cause and not self.learned.no_cache_control and "cache_control" in str(payload.get("messages")):
            self.learned.no_cache_control = True  # a server speaking the Messages API without prompt caching
            return "cache_control"
        if "temperature" in payload and "temperature" in cause:
            self.learned.no_temperature = True
            return "temperature"
        if "top_p" in payload and "top_p" in cause:
            self.learned.no_top_p = True
            return "top_p"
        if self.refuses_structured_output(exc, "output_config" in payload, ("output_config", "output_format", "output format", "structured output")):
            return "output_config"
        return None


def parse_message(body: dict[str, Any], default_model: str, payload: dict[str, Any], *, structured: bool) -> Completion:
    """Read a Messages API `message` body: the text blocks joined, usage, stop_reason as finish_reason."""
    if body.get("type") == "error" or ("error" in body and "content" not in body):
        error = body.get("error")
        if isinstance(error, dict):
            detail = f"{error.get('type') or 'error'}: {error.get('message') or ''}".strip()
        else:
            detail = str(error)
        raise RetryableError(f"error body: {detail[:200]}")
    content = body.get("content")
    if not isinstance(content, list):
        raise RetryableError("response has no content list")
    blocks = [block for block in content if isinstance(block, dict)]
    text = "".join(str(block.get("text") or "") for block in blocks if block.get("type") == "text")
    # extended thinking: `thinking` blocks (and `redacted_thinking`, encrypted) are reasoning, never the answer
    thought = "\n".join(str(b.get("thinking") or "") if b.get("type") == "thinking" else "[redacted thinking]"
                        for b in blocks if b.get("type") in ("thinking", "redacted_thinking"))
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt_tokens = sum(token_count(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    stop_reason = body.get("stop_reason")
    completion = Completion(
        text=text,
        model=str(body.get("model") or default_model),
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=token_count(usage.get("output_tokens")),
            # Anthropic's input_tokens excludes the cache's reads and writes; prompt_tokens above is all three
            cached_prompt_tokens=_reported(usage, "cache_read_input_tokens"),
            cache_write_tokens=_reported(usage, "cache_creation_input_tokens"),
        ),
        finish_reason=FINISH_REASONS.get(stop_reason, stop_reason) if stop_reason is not None else None,
        structured=structured,
        raw={"request": payload, "response": body},
    )
    completion.take_reasoning(thought)
    return completion


def _reported(usage: dict[str, Any], key: str) -> int | None:
    """A count of the usage block, or None when the reply does not carry it."""
    return None if usage.get(key) is None else token_count(usage.get(key))
