"""Wire tests for the HTTP backends: real HTTP on 127.0.0.1 against scripted servers speaking the OpenAI chat
completions and Anthropic messages formats. Shared behaviour (usage, finish reasons, retries, timeouts, broken
bodies, key safety, concurrency) runs against both backends; the OpenAI request shape is checked here, the
Anthropic one in test_anthropic.py."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any

import anyio
from multidict import CIMultiDict
import pytest

from judge_mcp.backends.base import Backend, ChatRequest, Completion, Message, user
from judge_mcp.backends.errors import BackendError, RetryableError
from judge_mcp.backends.client import classify_status, error_detail, redact, retry_after_s, secrets_in
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.backends.retry import RetryPolicy, parse_retry_after
from tests.helpers import Rendezvous
from testkit.scripted_servers import Reply, chat_body
from testkit.scripted_servers import message_body

KEY = "sk-test-7f3a9c1e-do-not-leak"
KINDS = ["openai", "anthropic"]
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["A", "B"]}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
}


def seq(*replies: Reply | str) -> Callable[[dict[str, Any]], Reply | str]:
    """A responder answering with `replies` in turn, repeating the last one."""
    queue = list(replies)

    def respond(payload: dict[str, Any]) -> Reply | str:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def echo_key(status: int) -> Callable[[dict[str, Any]], Reply]:
    """An error body that repeats the credential the server was sent (some proxies do)."""

    def respond(payload: dict[str, Any]) -> Reply:
        return Reply(status=status, raw_body=json.dumps({"error": {"message": f"bad key {KEY} / Bearer {KEY}"}}).encode())

    return respond


def ok_body(kind: str, content: str = "ok") -> bytes:
    body = chat_body(content, "test-model") if kind == "openai" else message_body(content, "test-model")
    return json.dumps(body).encode()


@pytest.fixture
def wire(make_backend) -> Callable[..., tuple[Backend, Any]]:
    """wire(kind, responder, **backend_kwargs) -> (backend, server) over real loopback HTTP."""

    def make(kind: str, responder: Any, **kwargs: Any) -> tuple[Backend, Any]:
        defaults = {"max_retries": 2, "backoff_base_s": 0.01, "backoff_max_s": 2.0, "api_key": KEY}
        return make_backend(responder, kind, name=f"wire-{kind}", model="test-model", **{**defaults, **kwargs})

    return make


def statuses(completion: Completion) -> list[str]:
    return [e["error"] for e in completion.raw.get("retried_errors", [])]


# ---- OpenAI request shape -------------------------------------------------------------------------------------


async def test_openai_request_shape_headers_and_structured_output(wire):
    backend, server = wire("openai", lambda p: '{"verdict": "A", "reason": "x"}')
    request = user("Which is better?", system="You are a fair judge.", json_schema=SCHEMA, schema_name="pair")
    completion = await backend.complete(request)

    [payload] = server.requests
    assert payload["model"] == "test-model"
    assert payload["messages"] == [
        {"role": "system", "content": "You are a fair judge."},
        {"role": "user", "content": "Which is better?"},
    ]
    assert "temperature" in payload and payload["temperature"] == 0
    assert payload["max_tokens"] == 1024
    assert payload["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "pair", "schema": SCHEMA, "strict": True},
    }
    headers = server.headers[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in headers
    assert completion.structured is True
    assert json.loads(completion.text) == {"verdict": "A", "reason": "x"}


async def test_openai_without_schema_or_key_sends_neither(wire):
    backend, server = wire("openai", lambda p: "plain", api_key=None)
    request = ChatRequest(messages=(Message("user", "q"), Message("assistant", "a"), Message("user", "q2")), temperature=0.7)
    completion = await backend.complete(request)
    [payload] = server.requests
    assert "response_format" not in payload
    assert payload["temperature"] == 0.7
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]  # no system message invented
    assert "authorization" not in server.headers[0]
    assert completion.structured is False and completion.text == "plain"


async def test_openai_posts_to_chat_completions_under_base_url(monkeypatch):
    """The default endpoint (no server to reach here: the post itself is recorded; the wire is tested above)."""
    seen: list[str] = []

    async def post(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        seen.append(url)
        return chat_body("hi", "gpt-x")

    monkeypatch.setattr(OpenAICompatBackend, "post", post)
    backend = OpenAICompatBackend("mock", "gpt-x", api_key=KEY)
    completion = await backend.complete(user("hello"))
    assert seen == ["https://api.openai.com/v1/chat/completions"]
    assert completion.text == "hi" and completion.model == "gpt-x"
    assert KEY not in backend.identity() and "https://api.openai.com/v1" in backend.identity()


# ---- shared behaviour over both wire formats ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_usage_finish_reason_and_model_parsed(wire, kind):
    backend, _ = wire(kind, lambda p: Reply(content="[[A>B]]", prompt_tokens=17, completion_tokens=3, finish_reason="length"))
    completion = await backend.complete(user("q"))
    assert completion.text == "[[A>B]]"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (17, 3)
    assert completion.finish_reason == "length"
    assert completion.model == "test-model"
    assert completion.attempts == 1 and completion.raw["attempts"] == 1
    assert completion.usage.latency_ms > 0


# Each provider's own fields for hidden reasoning and prompt-cache reads and writes (none is reported: None, not 0)
CACHE_USAGE = {
    "openai": ({"prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 192}}, (1500, 1024, None, 192)),
    "anthropic": ({"cache_read_input_tokens": 1024, "cache_creation_input_tokens": 300}, (1500 + 1024 + 300, 1024, 300, None)),
}


@pytest.mark.parametrize("kind", KINDS)
async def test_reasoning_and_prompt_cache_counts_are_read_from_each_providers_usage_fields(wire, kind):
    extra, expected = CACHE_USAGE[kind]
    backend, _ = wire(kind, lambda p: Reply(content="[[A>B]]", prompt_tokens=1500, completion_tokens=250, usage=extra))
    u = (await backend.complete(user("q"))).usage
    assert (u.prompt_tokens, u.cached_prompt_tokens, u.cache_write_tokens, u.reasoning_tokens) == expected
    assert u.completion_tokens == 250


@pytest.mark.parametrize("kind", KINDS)
async def test_counts_a_provider_does_not_report_stay_none(wire, kind):
    backend, _ = wire(kind, lambda p: Reply(content="x", usage={"prompt_tokens_details": None, "completion_tokens_details": {}}))
    u = (await backend.complete(user("q"))).usage
    assert (u.reasoning_tokens, u.cached_prompt_tokens, u.cache_write_tokens) == (None, None, None)


@pytest.mark.parametrize("kind", KINDS)
async def test_normal_stop_maps_to_stop(wire, kind):
    backend, _ = wire(kind, lambda p: "fine")
    completion = await backend.complete(user("q"))
    assert completion.finish_reason == "stop"


@pytest.mark.parametrize("kind", KINDS)
async def test_429_retry_after_is_honoured(wire, kind):
    backend, server = wire(kind, seq(Reply(status=429, headers={"retry-after": "0.4"}), "after the wait"))
    completion = await backend.complete(user("q"))
    assert completion.text == "after the wait"
    assert completion.attempts == 2 and len(server.requests) == 2
    [err] = completion.raw["retried_errors"]
    assert err["retry_in_s"] == pytest.approx(0.4)
    assert err["error"].startswith("HTTP 429")


@pytest.mark.parametrize("kind", KINDS)
async def test_429_retry_after_ms_wins(wire, kind):
    backend, _ = wire(kind, seq(Reply(status=429, headers={"retry-after-ms": "150", "retry-after": "9"}), "ok"), backoff_max_s=0.25)
    completion = await backend.complete(user("q"))
    assert [e["retry_in_s"] for e in completion.raw["retried_errors"]] == [pytest.approx(0.15)]
    assert completion.attempts == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_retry_after_past_the_longest_backoff_is_waited_for_in_full_within_the_calls_bound(wire, kind):
    """A server's wait longer than the longest backoff (backoff_max_s) is honoured whole, not cut to the backoff and
    refused again, when it ends within the call's bound."""
    backend, server = wire(kind, seq(Reply(status=429, headers={"retry-after": "0.3"}), "ok"), backoff_max_s=0.05)
    completion = await backend.complete(user("q"))
    assert completion.text == "ok" and len(server.requests) == 2
    assert [e["retry_in_s"] for e in completion.raw["retried_errors"]] == [pytest.approx(0.3)]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_retry_after_past_the_calls_bound_is_not_retried_and_is_named(wire, kind):
    """A server asking for a wait that would end past the call's bound is not asked again early: the call fails at
    once (it used to wait backoff_max_s, retry, be refused, and fail a minute later without saying why)."""
    backend, server = wire(kind, seq(Reply(status=429, headers={"retry-after": "3600"}), "ok"), backoff_max_s=0.25)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    assert len(server.requests) == 1
    assert "HTTP 429" in str(err.value) and "the server asks to wait 3600s, past the call's time bound" in str(err.value), str(err.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_nothing_is_sent_while_more_of_the_asked_wait_is_left_than_a_call_may_take(wire, kind):
    """After a refusal asking for a wait past the call's bound, later calls fail at once without a request (each would
    be refused again, and could not wait that long), saying what is left of the wait; once it has passed, requests go
    again. timeout_s 0.3: a call may take 1.2 s (two attempts of 0.3 s to the first byte and 0.3 s for the body)."""
    backend, server = wire(kind, seq(Reply(status=429, headers={"retry-after": "2.5"}), "ok"), backoff_max_s=0.05, timeout_s=0.3)
    with pytest.raises(BackendError):
        await backend.complete(user("q"))
    with pytest.raises(BackendError) as err:
        await backend.complete(user("another question"))
    assert len(server.requests) == 1, "the second call sent a request the server had asked not to get"
    assert "HTTP 429" in str(err.value) and "not sent: the server asked to wait 2.5s" in str(err.value), str(err.value)
    assert "longer than a call may take (1.2s)" in str(err.value), str(err.value)
    await anyio.sleep(2.6)
    assert (await backend.complete(user("q"))).text == "ok" and len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_wait_past_the_calls_bound_is_named(wire, kind):
    """A retry whose wait would end past the call's bound is not made, and the error says why it stopped there."""
    backend, server = wire(kind, seq(Reply(status=503, headers={"retry-after": "1.5"}), "ok"), timeout_s=0.3)
    with pytest.raises(BackendError) as err:
        await backend.complete(user("q"))
    assert len(server.requests) == 1
    assert "HTTP 503" in str(err.value) and "not retried: a wait of 1.5s would end past the call's time bound" in str(err.value), str(err.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_429_without_retry_after_uses_jittered_backoff(wire, kind):
    backend, server = wire(kind, seq(Reply(status=429), Reply(status=429), "ok"), backoff_base_s=0.08)
    completion = await backend.complete(user("q"))
    first, second = (e["retry_in_s"] for e in completion.raw["retried_errors"])
    assert 0.04 <= first <= 0.08  # ceiling base * 2**0, full jitter over its upper half
    assert 0.08 <= second <= 0.16  # ceiling doubles
    assert len(server.requests) == 3


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [500, 502, 503, 529, 408, 409])
async def test_transient_status_is_retried_then_succeeds(wire, kind, status):
    backend, server = wire(kind, seq(Reply(status=status), "recovered"))
    completion = await backend.complete(user("q"))
    assert completion.text == "recovered"
    assert completion.attempts == 2 and len(server.requests) == 2
    assert statuses(completion)[0].startswith(f"HTTP {status}")


@pytest.mark.parametrize("kind", KINDS)
async def test_mixed_5xx_sequence_then_success(wire, kind):
    backend, server = wire(kind, seq(Reply(status=500), Reply(status=502), Reply(status=503), "finally"), max_retries=3)
    completion = await backend.complete(user("q"))
    assert completion.text == "finally"
    assert [s.split(":")[0] for s in statuses(completion)] == ["HTTP 500", "HTTP 502", "HTTP 503"]
    assert completion.attempts == 4 and len(server.requests) == 4


@pytest.mark.parametrize("kind", KINDS)
async def test_retries_are_bounded_then_backend_error_names_backend_and_cause(wire, kind):
    backend, server = wire(kind, lambda p: Reply(status=503), max_retries=2)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    err = info.value
    assert len(server.requests) == 3
    assert err.backend == f"wire-{kind}" and err.attempts == 3 and err.status == 503
    assert f"wire-{kind}" in str(err) and "HTTP 503" in str(err) and "3 attempt" in str(err)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(wire, kind, status):
    backend, server = wire(kind, lambda p: Reply(status=status), max_retries=3)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert len(server.requests) == 1
    assert info.value.status == status and info.value.attempts == 1
    assert f"HTTP {status}" in str(info.value) and "scripted" in str(info.value)  # the server's message is kept


@pytest.mark.parametrize("kind", KINDS)
async def test_hanging_server_is_cut_at_timeout(wire, kind):
    backend, server = wire(kind, lambda p: Reply(content="too late", delay_s=4.0), timeout_s=0.3, max_retries=1)
    start = time.perf_counter()
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    elapsed = time.perf_counter() - start
    assert "timed out after 0.3s" in str(info.value)
    assert "raise JUDGE_MCP_TIMEOUT_S above 0.3" in str(info.value) or f"raise timeout_s in [backends.{backend.name}] above 0.3" in str(info.value)
    assert info.value.attempts == 2 and len(server.requests) == 2
    assert elapsed < 3.0  # cut long before the server would have answered


@pytest.mark.parametrize("kind", KINDS)
async def test_timeout_then_fast_answer_succeeds(wire, kind):
    backend, _ = wire(kind, seq(Reply(content="slow", delay_s=2.0), "fast"), timeout_s=0.3, max_retries=1)
    completion = await backend.complete(user("q"))
    assert completion.text == "fast"
    assert statuses(completion) == ["timed out after 0.3s waiting for the reply to start (no first byte)"]


@pytest.mark.parametrize("kind", KINDS)
async def test_dropped_connection_is_retried(wire, kind):
    backend, server = wire(kind, seq(Reply(drop=True), "back"))
    completion = await backend.complete(user("q"))
    assert completion.text == "back" and len(server.requests) == 2
    assert statuses(completion)[0].startswith("connection error")


@pytest.mark.parametrize("kind", KINDS)
async def test_always_dropped_connection_gives_backend_error(wire, kind):
    backend, server = wire(kind, lambda p: Reply(drop=True), max_retries=1)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert "connection error" in str(info.value) and info.value.attempts == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("broken", ["invalid", "truncated", "empty", "array"])
async def test_broken_json_body_is_retried_then_reported(wire, kind, broken):
    good = ok_body(kind, "fine")
    body = {"invalid": b"<html>bad gateway</html>", "truncated": good[: len(good) // 2], "empty": b"", "array": b"[1, 2]"}[broken]
    backend, server = wire(kind, seq(Reply(raw_body=body), Reply(raw_body=good)))
    completion = await backend.complete(user("q"))
    assert completion.text == "fine" and completion.attempts == 2

    backend2, server2 = wire(kind, lambda p: Reply(raw_body=body), max_retries=1)
    with pytest.raises(BackendError) as info:
        await backend2.complete(user("q"))
    assert "body that is not JSON" in str(info.value) or "not an object" in str(info.value)
    assert len(server2.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_body_without_an_answer_is_retried_then_reported(wire, kind):
    empty = {"openai": {"id": "x", "choices": [], "usage": {}}, "anthropic": {"id": "x", "type": "message", "usage": {}}}[kind]
    backend, server = wire(kind, lambda p: Reply(raw_body=json.dumps(empty).encode()), max_retries=1)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert ("no choices" if kind == "openai" else "no content") in str(info.value)
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_odd_body_shapes_become_backend_errors_not_crashes(wire, kind):
    odd = {"openai": {"choices": [{"message": "just a string"}]}, "anthropic": {"type": "message", "content": "just a string"}}[kind]
    backend, _ = wire(kind, lambda p: Reply(raw_body=json.dumps(odd).encode()), max_retries=0)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert info.value.backend == f"wire-{kind}"


@pytest.mark.parametrize("kind", KINDS)
async def test_error_object_in_a_200_body_is_an_error(wire, kind):
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    backend, _ = wire(kind, lambda p: Reply(raw_body=json.dumps(body).encode()), max_retries=0)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("q"))
    assert "error body" in str(info.value) and "overloaded_error" in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_unreadable_usage_counts_zero(wire, kind):
    good = json.loads(ok_body(kind, "fine"))
    good["usage"] = {"prompt_tokens": "many", "input_tokens": None, "completion_tokens": [], "output_tokens": "x"}
    backend, _ = wire(kind, lambda p: Reply(raw_body=json.dumps(good).encode()))
    completion = await backend.complete(user("q"))
    assert completion.text == "fine"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (0, 0)


@pytest.mark.parametrize("kind", KINDS)
async def test_raw_call_record_holds_no_key(wire, kind):
    backend, server = wire(kind, seq(Reply(status=503), "answer"))
    completion = await backend.complete(user("q", system="s", json_schema=SCHEMA))
    sent = server.headers[0].get("authorization", "") + server.headers[0].get("x-api-key", "")
    assert KEY in sent  # the key did go over the wire...
    record = json.dumps(completion.raw)
    assert KEY not in record  # ...but not into the call record
    assert completion.raw["response"] and completion.raw["request"]["messages"]
    assert KEY not in repr(backend) and KEY not in backend.identity()


@pytest.mark.parametrize("kind", KINDS)
async def test_key_echoed_in_error_bodies_is_redacted(wire, kind):
    backend, server = wire(kind, seq(echo_key(429)(None), "answer"))
    completion = await backend.complete(user("q"))
    record = json.dumps(completion.raw)
    assert KEY not in record and "[redacted]" in record

    backend2, _ = wire(kind, echo_key(401))
    with pytest.raises(BackendError) as info:
        await backend2.complete(user("q"))
    assert KEY not in str(info.value) and "[redacted]" in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_key_echoed_in_a_success_body_is_redacted(wire, kind):
    backend, _ = wire(kind, lambda p: f"your key is {KEY}")
    completion = await backend.complete(user("q"))
    assert KEY not in completion.text and KEY not in json.dumps(completion.raw)
    assert "[redacted]" in completion.text


@pytest.mark.parametrize("kind", KINDS)
async def test_concurrency_limit_holds_on_the_wire(wire, kind):
    pairs = Rendezvous(2, lambda p: "x")  # requests are answered two at a time, only when both are in flight
    backend, server = wire(kind, pairs, concurrency=2)
    results: list[Completion] = []

    async def one(i: int) -> None:
        results.append(await backend.complete(user(f"q{i}")))

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(one, i)
    assert len(results) == 6 and len(server.requests) == 6
    assert (pairs.met, pairs.broken) == (6, 0) and server.max_in_flight == 2


# ---- the helpers in http.py and retry.py ----------------------------------------------------------------------


def test_parse_retry_after_forms():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after(future) <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert parse_retry_after(past) == 0.0


def test_retry_after_ms_header_preferred():
    assert retry_after_s(CIMultiDict({"Retry-After-Ms": "250", "Retry-After": "5"})) == 0.25
    assert retry_after_s(CIMultiDict({"retry-after-ms": "junk", "retry-after": "5"})) == 5.0
    assert retry_after_s(CIMultiDict()) is None


def test_policy_delay_bounds():
    policy = RetryPolicy(max_retries=5, base_s=1.0, max_s=4.0)
    for retry_no, (lo, hi) in enumerate([(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (2.0, 4.0)], start=1):
        for _ in range(20):
            assert lo <= policy.delay(retry_no) <= hi
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(1, retry_after=60.0) == 4.0


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}, "requests: Rate limit reached"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded_error: Overloaded"),
        ({"error": "model not loaded"}, "model not loaded"),
        ({"message": "upstream failed"}, "upstream failed"),
    ],
)
def test_error_detail_reads_both_error_shapes(body, expected):
    assert error_detail(json.dumps(body)) == expected


def test_error_detail_falls_back_to_text():
    assert error_detail("Bad\nGateway\n") == "Bad Gateway"
    assert error_detail("<html>\nBad Gateway\n</html>") == "an HTML page ('Bad Gateway', 26 characters)"  # summarised, not dumped


def test_classify_status_kinds():
    retryable = classify_status(529, CIMultiDict({"Retry-After": "2"}), json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}))
    assert isinstance(retryable, RetryableError) and retryable.status == 529 and retryable.retry_after == 2.0
    assert str(retryable) .startswith("HTTP 529: overloaded_error: x")
    fatal = classify_status(400, {}, "nope")
    assert not isinstance(fatal, RetryableError) and fatal.status == 400


def test_secrets_and_redaction():
    secrets = secrets_in({"Authorization": f"Bearer {KEY}", "x-api-key": KEY, "content-type": "application/json"})
    assert secrets[0] == f"Bearer {KEY}" and KEY in secrets and "application/json" not in secrets
    assert redact(f"a Bearer {KEY} b {KEY}", secrets) == "a [redacted] b [redacted]"
