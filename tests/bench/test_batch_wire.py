"""Reading the providers' batch result lines (judge_mcp/backends/batch_wire.py): which outcomes are answers, which
are worth sending again and which fail."""

from __future__ import annotations

from judge_mcp.backends.batch_wire import anthropic_outcome, jsonl, openai_outcome
from testkit.scripted_servers import chat_body, message_body


def test_openai_lines():
    ok = openai_outcome({"custom_id": "k", "response": {"status_code": 200, "body": chat_body("hi")}, "error": None})
    assert ok.kind == "ok" and ok.body is not None and ok.body["choices"][0]["message"]["content"] == "hi"
    limited = openai_outcome({"custom_id": "k", "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}}})
    assert limited == ("retry", None, "HTTP 429: slow down")
    invalid = openai_outcome({"custom_id": "k", "response": {"status_code": 400, "body": {"error": {"message": "bad schema"}}}})
    assert invalid.kind == "fail" and "bad schema" in invalid.cause
    # an error file's line without a response (the request never ran): sent again
    lost = openai_outcome({"custom_id": "k", "response": None, "error": {"code": "batch_expired", "message": "not run in time"}})
    assert lost.kind == "retry" and "not run in time" in lost.cause


def test_anthropic_lines():
    ok = anthropic_outcome({"custom_id": "k", "result": {"type": "succeeded", "message": message_body("hi")}})
    assert ok.kind == "ok" and ok.body is not None and ok.body["content"][0]["text"] == "hi"
    overloaded = {"type": "errored", "error": {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}}
    assert anthropic_outcome({"custom_id": "k", "result": overloaded}) == ("retry", None, "overloaded_error: busy")
    invalid = {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens"}}}
    assert anthropic_outcome({"custom_id": "k", "result": invalid}).kind == "fail"
    for kind in ("expired", "canceled"):
        out = anthropic_outcome({"custom_id": "k", "result": {"type": kind}})
        assert out.kind == "fail" and kind in out.cause


def test_jsonl_keeps_only_lines_with_a_custom_id():
    raw = b'{"custom_id": "a", "x": 1}\n\nnot json\n[1, 2]\n{"no_id": true}\n{"custom_id": "b"}\n'
    assert [line["custom_id"] for line in jsonl(raw)] == ["a", "b"]
