"""The Anthropic Messages backend: request shape on the wire, structured output, response parsing, the
schema adjustments for Claude's constrained decoding, and the refused-parameter fallbacks. (Retries, timeouts,
broken bodies and key safety run for both backends in test_backends_http.py.)"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from judge_mcp.backends import build_backend
from judge_mcp.backends.anthropic import AnthropicBackend, anthropic_schema, messages_url, parse_message
from judge_mcp.backends.base import ChatRequest, Message, user
from judge_mcp.backends.errors import BackendError, RetryableError
from judge_mcp.config.settings import BackendConfig
from testkit.scripted_servers import Reply
from testkit.scripted_servers import ScriptedAnthropicServer, message_body

KEY = "sk-ant-test-51c0ffee-do-not-leak"
SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["A", "B"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 10, "description": "quality"},
    },
    "required": ["verdict", "score"],
}


@pytest.fixture
def anth(make_backend) -> Callable[..., tuple[AnthropicBackend, ScriptedAnthropicServer]]:
    def make(responder: Any, **kwargs: Any) -> tuple[AnthropicBackend, ScriptedAnthropicServer]:
        defaults = {"max_retries": 1, "backoff_base_s": 0.01, "api_key": KEY}
        return make_backend(responder, "anthropic", name="claude", model="claude-test", **{**defaults, **kwargs})

    return make


def refuse(words: str, param: str) -> Callable[[dict[str, Any]], Reply | str]:
    """A server for a model that answers 400 while `param` is in the request."""

    def respond(payload: dict[str, Any]) -> Reply | str:
        if param in payload:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": words}}
            return Reply(status=400, raw_body=json.dumps(body).encode())
        return '{"verdict": "B", "score": 7}'

    return respond


# ---- the request on the wire ----------------------------------------------------------------------------------


async def test_request_shape_headers_and_structured_output(anth):
    backend, server = anth(lambda p: '{"verdict": "A", "score": 8}')
    request = user("Which answer is worse?", system="You are a careful judge.", json_schema=SCHEMA, max_tokens=300)
    completion = await backend.complete(request)

    [payload] = server.requests
    assert server.paths == ["/v1/messages"]
    assert payload["model"] == "claude-test"
    assert payload["system"] == "You are a careful judge."  # top level, never inside messages
    assert payload["messages"] == [{"role": "user", "content": "Which answer is worse?"}]
    assert "temperature" in payload and payload["temperature"] == 0
    assert payload["max_tokens"] == 300
    fmt = payload["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"] == anthropic_schema(SCHEMA)
    assert fmt["schema"]["additionalProperties"] is False
    assert "response_format" not in payload and "output_format" not in payload

    headers = server.headers[0]
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert "anthropic-beta" not in headers  # structured outputs are GA: no beta header

    assert completion.structured is True
    assert json.loads(completion.text) == {"verdict": "A", "score": 8}
    assert backend.supports_json_schema is True


async def test_plain_request_has_no_output_config_and_no_system(anth):
    backend, server = anth(lambda p: "plain text", api_key=None)
    request = ChatRequest(messages=(Message("user", "q"), Message("assistant", "a"), Message("user", "q2")), temperature=0.6)
    completion = await backend.complete(request)
    [payload] = server.requests
    assert "output_config" not in payload and "system" not in payload
    assert payload["temperature"] == 0.6
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert "x-api-key" not in server.headers[0]  # no key configured: none sent (local Anthropic-compatible servers)
    assert completion.structured is False and completion.text == "plain text"


async def test_temperature_is_clamped_to_anthropics_range(anth):
    backend, server = anth(lambda p: "x")
    await backend.complete(user("q", temperature=1.7))
    assert server.requests[0]["temperature"] == 1.0


async def test_system_role_messages_fold_into_system(anth):
    backend, server = anth(lambda p: "x")
    await backend.complete(ChatRequest(messages=(Message("system", "extra rule"), Message("user", "q")), system="base"))
    [payload] = server.requests
    assert payload["system"] == "base\n\nextra rule"
    assert payload["messages"] == [{"role": "user", "content": "q"}]


async def test_usage_stop_reason_and_model_from_the_wire(anth):
    backend, _ = anth(lambda p: Reply(content="[[B>A]]", prompt_tokens=40, completion_tokens=9, finish_reason="length"))
    completion = await backend.complete(user("q"))
    assert completion.text == "[[B>A]]"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (40, 9)
    assert completion.finish_reason == "length"  # max_tokens -> length
    assert completion.raw["response"]["stop_reason"] == "max_tokens"


async def test_overloaded_529_is_retried(anth):
    replies = [Reply(status=529), "ok"]
    backend, server = anth(lambda p: replies.pop(0) if len(replies) > 1 else replies[0])
    completion = await backend.complete(user("q"))
    assert completion.text == "ok" and len(server.requests) == 2
    assert completion.raw["retried_errors"][0]["error"] == "HTTP 529: overloaded_error: scripted 529"


async def test_default_endpoint_and_v1_base_url(monkeypatch):
    """The endpoint for each base URL form (the post itself is recorded; the wire is tested above)."""
    seen: list[str] = []

    async def post(self, url: str, payload: dict, headers: dict) -> dict:
        seen.append(url)
        return message_body("hi", "claude-x")

    monkeypatch.setattr(AnthropicBackend, "post", post)
    for base_url in (None, "https://gateway.example/anthropic/v1/"):
        backend = AnthropicBackend("mock", "claude-x", base_url=base_url, api_key=KEY)
        completion = await backend.complete(user("hello"))
        assert completion.text == "hi"
    assert seen == ["https://api.anthropic.com/v1/messages", "https://gateway.example/anthropic/v1/messages"]
    assert messages_url("http://127.0.0.1:9/") == "http://127.0.0.1:9/v1/messages"


def test_identity_has_endpoint_and_model_not_key():
    backend = AnthropicBackend("a", "claude-x", base_url="http://127.0.0.1:9", api_key=KEY)
    other = AnthropicBackend("a", "claude-x", base_url="http://127.0.0.1:10", api_key=KEY)
    assert "http://127.0.0.1:9" in backend.identity() and "claude-x" in backend.identity()
    assert KEY not in backend.identity() and KEY not in repr(backend)
    assert backend.identity() != other.identity()
    assert backend.model_id == "anthropic/claude-x" and backend.kind == "anthropic"


def test_build_backend_makes_an_anthropic_backend():
    cfg = BackendConfig(name="c", kind="anthropic", model="claude-x", base_url="http://127.0.0.1:9", api_key=KEY,
                        concurrency=3, timeout_s=7.5, max_retries=2)
    backend = build_backend(cfg)
    assert isinstance(backend, AnthropicBackend)
    assert (backend.concurrency, backend.timeout_s, backend.policy.max_retries) == (3, 7.5, 2)
    assert backend.url == "http://127.0.0.1:9/v1/messages"
    assert backend.headers()["x-api-key"] == KEY


# ---- refused parameters ---------------------------------------------------------------------------------------


async def test_model_refusing_temperature_gets_requests_without_it(anth):
    backend, server = anth(refuse("temperature is deprecated for this model.", "temperature"))
    first = await backend.complete(user("q", json_schema=SCHEMA))
    assert json.loads(first.text)["verdict"] == "B"
    assert first.raw["dropped_parameters"] == ["temperature"]
    assert first.attempts == 1  # resending without the parameter is not a retry
    second = await backend.complete(user("q2"))
    assert second.text and "dropped_parameters" not in second.raw
    assert ["temperature" in p for p in server.requests] == [True, False, False]
    assert "output_config" in server.requests[1]  # structured output kept


async def test_model_refusing_structured_output_falls_back_to_text(anth):
    backend, server = anth(refuse("output_config.format: structured outputs are not supported by this model", "output_config"))
    completion = await backend.complete(user("q", json_schema=SCHEMA))
    assert completion.structured is False
    assert completion.raw["dropped_parameters"] == ["output_config"]
    assert backend.supports_json_schema is False  # methods now use their text grammars
    assert ["output_config" in p for p in server.requests] == [True, False]
    assert AnthropicBackend("other", "claude-test", api_key="k").supports_json_schema is True  # other backends unaffected


async def test_other_400s_are_not_resent(anth):
    backend, server = anth(refuse("messages: roles must alternate", "temperature"))
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert len(server.requests) == 1 and info.value.status == 400
    assert "invalid_request_error: messages: roles must alternate" in str(info.value)


# ---- the schema adjustments -----------------------------------------------------------------------------------


def test_anthropic_schema_closes_objects_and_moves_unsupported_constraints():
    schema = {
        "type": "object",
        "properties": {
            "minimum": {"type": "string", "minLength": 2},  # a property *named* like a keyword survives
            "scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 2, "maxItems": 4},
            "pick": {"anyOf": [{"$ref": "#/$defs/Choice"}, {"type": "null"}]},
            "one": {"type": "array", "minItems": 1},
        },
        "$defs": {"Choice": {"type": "object", "properties": {"i": {"type": "integer", "exclusiveMinimum": 0}}}},
        "required": ["minimum"],
    }
    before = copy.deepcopy(schema)
    out = anthropic_schema(schema)
    assert schema == before  # the caller's schema is not mutated
    assert out["additionalProperties"] is False
    assert out["$defs"]["Choice"]["additionalProperties"] is False
    assert set(out["properties"]) == {"minimum", "scores", "pick", "one"}
    assert out["properties"]["minimum"] == {"type": "string", "description": "(minLength: 2)"}
    scores = out["properties"]["scores"]
    assert "minItems" not in scores and "maxItems" not in scores and "minItems: 2" in scores["description"]
    assert scores["items"] == {"type": "number", "description": "(minimum: 0, maximum: 1)"}
    assert out["properties"]["one"]["minItems"] == 1  # 0 and 1 are supported
    assert out["$defs"]["Choice"]["properties"]["i"]["description"] == "(exclusiveMinimum: 0)"
    assert out["required"] == ["minimum"]


def test_anthropic_schema_keeps_existing_descriptions():
    out = anthropic_schema(SCHEMA)
    assert out["properties"]["score"]["description"] == "quality (minimum: 1, maximum: 10)"
    assert out["properties"]["verdict"] == {"type": "string", "enum": ["A", "B"]}


# ---- parsing message bodies -----------------------------------------------------------------------------------


def test_parse_message_joins_text_blocks_and_skips_others():
    body = {
        "type": "message",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "Verdict: "},
            {"type": "tool_use", "id": "t", "name": "n", "input": {}},
            {"type": "text", "text": "[[A>B]]"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 7},
    }
    completion = parse_message(body, "default", {"model": "claude-x"}, structured=False)
    assert completion.text == "Verdict: [[A>B]]"
    assert completion.usage.prompt_tokens == 125 and completion.usage.completion_tokens == 7
    assert completion.finish_reason == "stop" and completion.model == "claude-x"


@pytest.mark.parametrize(
    "stop_reason, expected",
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("refusal", "refusal"), ("pause_turn", "pause_turn"), (None, None)],
)
def test_parse_message_stop_reasons(stop_reason, expected):
    body = {"content": [], "stop_reason": stop_reason, "usage": {}}
    completion = parse_message(body, "m", {}, structured=True)
    assert completion.finish_reason == expected and completion.text == "" and completion.model == "m"


def test_parse_message_error_body_is_retryable():
    with pytest.raises(RetryableError, match="api_error: boom"):
        parse_message({"type": "error", "error": {"type": "api_error", "message": "boom"}}, "m", {}, structured=False)
