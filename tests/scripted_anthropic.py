"""A scripted Anthropic Messages server on 127.0.0.1 (`POST /v1/messages`), the twin of tests/scripted.py.

It speaks the real wire format over real HTTP and takes the same `responder(payload) -> Reply | str`; a Reply's
`finish_reason` uses the shared vocabulary ("stop", "length", ...) and is sent as the matching `stop_reason`.
"""

from __future__ import annotations

from typing import Any

from tests.scripted import Reply, ScriptedServer

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def message_body(content: str, model: str = "scripted", finish_reason: str = "stop", prompt_tokens: int = 10, completion_tokens: int = 5) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": content}],
        "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
    }


def error_body(status: int) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": f"scripted {status}"}}


class ScriptedAnthropicServer(ScriptedServer):
    """`POST {base_url}/v1/messages`; the request path is recorded in `paths`."""

    base_path = ""

    def success_body(self, reply: Reply, payload: dict[str, Any]) -> dict[str, Any]:
        return message_body(reply.content or "", payload.get("model", "scripted"), reply.finish_reason, reply.prompt_tokens, reply.completion_tokens)

    def error_body(self, status: int) -> dict[str, Any]:
        return error_body(status)
