"""OpenAI-compatible chat completions over httpx: OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio.

The wire format lives here; the endpoint (base URL, key, HTTP client) is configuration. Structured output is
requested as `response_format: {"type": "json_schema", ...}`, which OpenAI, vLLM, llama.cpp's server, Ollama and
LM Studio all accept.
"""

from __future__ import annotations

from typing import Any

from judge_mcp.backends.base import ChatRequest, Completion, RetryableError, Usage
from judge_mcp.backends.http import RETRYABLE_STATUS, HTTPBackend, classify_status, post_json, token_count

__all__ = ["OpenAICompatBackend", "parse_chat_completion", "RETRYABLE_STATUS", "classify_status", "post_json"]


def chat_messages(request: ChatRequest) -> list[dict[str, str]]:
    """The request as OpenAI chat messages: the system prompt first, as a system message."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages.extend({"role": m.role, "content": m.content} for m in request.messages)
    return messages


class OpenAICompatBackend(HTTPBackend):
    kind = "openai"
    supports_json_schema = True
    default_base_url = "https://api.openai.com/v1"

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.json_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            }
        return payload

    async def _send(self, request: ChatRequest) -> Completion:
        payload = self.payload(request)
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        body = await self.post(f"{self.base_url}/chat/completions", payload, headers)
        return parse_chat_completion(body, self.model, payload, structured=request.json_schema is not None)


def parse_chat_completion(body: dict[str, Any], default_model: str, payload: dict[str, Any], *, structured: bool) -> Completion:
    """Read an OpenAI chat.completion body. Shared with the embedded backend, which returns the same shape.

    A body without a usable first choice raises RetryableError (bounded by the retry policy)."""
    if "error" in body and not body.get("choices"):
        raise RetryableError(f"error body: {str(body['error'])[:200]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise RetryableError("response has no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise RetryableError(f"response choice is not an object: {str(choice)[:80]!r}")
    message = choice.get("message")
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise RetryableError(f"response message is not an object: {str(message)[:80]!r}")
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    if content is None:
        content = ""
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    finish_reason = choice.get("finish_reason")
    return Completion(
        text=str(content),
        model=str(body.get("model") or default_model),
        usage=Usage(prompt_tokens=token_count(usage.get("prompt_tokens")), completion_tokens=token_count(usage.get("completion_tokens"))),
        finish_reason=str(finish_reason) if finish_reason is not None else None,
        structured=structured,
        raw={"request": payload, "response": body},
    )

