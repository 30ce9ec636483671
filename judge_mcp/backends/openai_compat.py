"""OpenAI-compatible chat completions over httpx: OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio.

The wire format lives here; the endpoint (base URL, key, HTTP client) is configuration. Structured output is
requested as `response_format: {"type": "json_schema", ...}`, which OpenAI, vLLM, llama.cpp's server, Ollama and
LM Studio all accept.
"""

from __future__ import annotations

from typing import Any

import httpx

from judge_mcp.backends.base import Backend, ChatRequest, Completion, FatalError, RetryableError, Usage
from judge_mcp.backends.retry import parse_retry_after

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))


def classify_status(backend: str, response: httpx.Response) -> Exception:
    """The error for a non-2xx answer: retryable for 408/409/429/5xx, fatal for the rest."""
    detail = response.text[:300].strip().replace("\n", " ")
    cause = f"HTTP {response.status_code}" + (f": {detail}" if detail else "")
    if response.status_code in RETRYABLE_STATUS:
        return RetryableError(cause, status=response.status_code, retry_after=parse_retry_after(response.headers.get("retry-after")))
    return FatalError(cause, status=response.status_code)


async def post_json(client: httpx.AsyncClient, url: str, payload: dict[str, Any], headers: dict[str, str], backend: str) -> dict[str, Any]:
    """POST and return the JSON body, classifying every failure as retryable or fatal."""
    try:
        response = await client.post(url, json=payload, headers=headers)
    except httpx.TimeoutException as exc:
        raise RetryableError(f"HTTP timeout ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise RetryableError(f"connection error ({type(exc).__name__}: {exc})") from exc
    if response.status_code >= 400:
        raise classify_status(backend, response)
    try:
        body = response.json()
    except ValueError:
        raise RetryableError(f"HTTP {response.status_code} with a body that is not JSON: {response.text[:120]!r}") from None
    if not isinstance(body, dict):
        raise RetryableError(f"HTTP {response.status_code} with a JSON body that is not an object")
    return body


class OpenAICompatBackend(Backend):
    kind = "openai"
    supports_json_schema = True

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ):
        super().__init__(name, model, **kwargs)
        self.base_url = (base_url or "https://api.openai.com/v1").rstrip("/")
        self._api_key = api_key
        # httpx's own timeout is a backstop; Backend.complete enforces timeout_s per attempt.
        self._client = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(self.timeout_s + 5.0))

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    def identity(self) -> str:
        return f"{self.kind}|{self.base_url}|{self.model}"

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend({"role": m.role, "content": m.content} for m in request.messages)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
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
        body = await post_json(self._client, f"{self.base_url}/chat/completions", payload, headers, self.name)
        return parse_chat_completion(body, self.model, payload, structured=request.json_schema is not None)

    async def aclose(self) -> None:
        await self._client.aclose()


def parse_chat_completion(body: dict[str, Any], default_model: str, payload: dict[str, Any], *, structured: bool) -> Completion:
    """Read an OpenAI chat.completion body. Shared with the embedded backend, which returns the same shape."""
    if "error" in body and not body.get("choices"):
        raise RetryableError(f"error body: {str(body['error'])[:200]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise RetryableError("response has no choices")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        content = ""
    usage = body.get("usage") or {}
    return Completion(
        text=str(content),
        model=str(body.get("model") or default_model),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        finish_reason=choice.get("finish_reason"),
        structured=structured,
        raw={"request": payload, "response": body},
    )
