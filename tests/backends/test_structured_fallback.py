"""Structured output on every OpenAI-compatible server: one that refuses `response_format` gets the call once more
without it and the papers' text grammars from then on (one warning); one that ignores the schema is still parsed or
reported unparsed; the setting `structured_output` (TOML key, JUDGE_MCP_STRUCTURED_OUTPUT) overrides detection."""

from __future__ import annotations

import json
import logging

import pytest

from judge_mcp.backends import BackendError, build_backend
from testkit.scripted_servers import Reply
from testkit.scripted_judges import PAIR, shown_first
from judge_mcp.config.settings import ConfigError, backend_from_env, backends_from_toml
from judge_mcp.methods import pairwise

REFUSAL = {
    "openai": b'{"error": {"message": "Invalid parameter: \'response_format\' of type \'json_schema\' is not supported with this model.", "type": "invalid_request_error", "param": "response_format"}}',
    "vllm422": b'{"object": "error", "message": "1 validation error: response_format.json_schema: extra fields not permitted", "type": "BadRequestError", "code": 422}',
    "json_object_only": b'{"error": {"message": "response_format.type must be one of \'text\', \'json_object\'", "type": "invalid_request_error"}}',
}


def text_verdict(payload) -> str:
    """A text judge: the answer mentioning Sydney is worse, in the papers' [[A>B]] grammar."""
    return "The other answer is right. [[A>B]]" if "Sydney" not in shown_first(payload) else "The second one is right. [[B>A]]"


def refusing(status: int, body: bytes):
    """A server that refuses any structured-output request; without one it answers as a text judge. A server that
    takes only `json_object` answers JSON to that (the backend never needs it: it falls back to text)."""

    def responder(payload):
        fmt = payload.get("response_format")
        if fmt is not None and fmt.get("type") != "json_object":
            return Reply(status=status, raw_body=body, headers={"content-type": "application/json"})
        if fmt is not None:
            return json.dumps({"verdict": text_verdict(payload)[-7:]})
        return text_verdict(payload)

    return responder


@pytest.mark.parametrize("case,status", [("openai", 400), ("vllm422", 422), ("json_object_only", 400)])
async def test_a_server_refusing_the_schema_gets_the_call_again_without_it_then_text_grammars(make_judge, caplog, case, status):
    judge, server = make_judge(refusing(status, REFUSAL[case]))
    with caplog.at_level(logging.WARNING, logger="judge_mcp.backends.openai_compat"):
        result = await pairwise.compare_pair(judge, **PAIR)
        again = await pairwise.compare_pair(judge, prompt=PAIR["prompt"], response_a=PAIR["response_b"], response_b=PAIR["response_a"])
    assert result.winner == "B" and again.winner == "A" and all(t.parse_ok for t in result.trials + again.trials)
    assert judge.backend.supports_json_schema is False
    with_schema = [r for r in server.requests if "response_format" in r]
    # the first call(s) in flight asked for the schema and were refused; each was sent once more without it
    assert 1 <= len(with_schema) <= 2 and len(server.requests) == len(with_schema) + 4
    assert all("response_format" not in r for r in server.requests[len(with_schema) * 2 :])
    assert any(r.get("dropped_parameters") == ["response_format"] for r in judge.records)
    warnings = [r for r in caplog.records if "refused structured output" in r.getMessage()]
    assert len(warnings) == 1 and "scripted" in warnings[0].getMessage()
    # the later calls are text-grammar requests: the system prompt is the papers' text template
    last = server.requests[-1]
    assert last["messages"][0]["content"] == pairwise.system_prompt("worse", "sop", False)


async def test_other_400s_still_fail_and_keep_the_schema(make_judge):
    judge, server = make_judge(lambda p: Reply(status=400, raw_body=b'{"error": {"message": "model not found"}}'))
    with pytest.raises(BackendError, match="model not found"):
        await pairwise.compare_pair(judge, **PAIR, swap=False)
    assert len(server.requests) == 1 and judge.backend.supports_json_schema is True


async def test_a_server_ignoring_the_schema_is_parsed_from_its_text_or_reported_unparsed(make_judge):
    judge, server = make_judge(text_verdict)  # accepts response_format, answers free text anyway
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner == "B" and all(t.parse_ok for t in result.trials)
    assert all("response_format" in r for r in server.requests) and judge.backend.supports_json_schema is True

    judge, server = make_judge(lambda p: "Both answers have merits; I cannot decide.")
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner is None and result.consistent is not True
    assert all(not t.parse_ok and t.better is None and t.unparsed_reason == "no_verdict" for t in result.trials)


async def test_structured_output_json_schema_never_falls_back(make_judge):
    judge, server = make_judge(refusing(400, REFUSAL["openai"]), structured_output="json_schema")
    with pytest.raises(BackendError, match="response_format"):
        await pairwise.compare_pair(judge, **PAIR, swap=False)
    assert len(server.requests) == 1 and judge.backend.supports_json_schema is True


async def test_structured_output_off_never_sends_a_schema(make_judge):
    judge, server = make_judge(refusing(400, REFUSAL["openai"]), structured_output="off")
    result = await pairwise.compare_pair(judge, **PAIR)
    assert result.winner == "B" and len(server.requests) == 2
    assert all("response_format" not in r for r in server.requests)


async def test_anthropic_structured_output_off(scripted, store):
    from judge_mcp.calls.cache import CallCache
    from judge_mcp.calls.context import CallContext
    from tests.helpers import http_backend

    server = scripted(text_verdict, "anthropic")
    backend = http_backend(server, max_retries=0, structured_output="off")
    try:
        result = await pairwise.compare_pair(CallContext(backend, CallCache(store), store), **PAIR)
    finally:
        await backend.aclose()
    assert result.winner == "B" and all("output_config" not in r for r in server.requests)


def test_the_setting_from_the_environment_and_the_toml_file(tmp_path):
    env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:9/v1"}
    assert backend_from_env(env).structured_output == "auto"
    cfg = backend_from_env({**env, "JUDGE_MCP_STRUCTURED_OUTPUT": " OFF "})
    assert cfg.structured_output == "off" and build_backend(cfg).supports_json_schema is False
    assert build_backend(backend_from_env({**env, "JUDGE_MCP_STRUCTURED_OUTPUT": "json_schema"})).structured_output == "json_schema"
    with pytest.raises(ConfigError, match="JUDGE_MCP_STRUCTURED_OUTPUT must be one of auto, json_schema, off"):
        backend_from_env({**env, "JUDGE_MCP_STRUCTURED_OUTPUT": "json"})
    path = tmp_path / "judge.toml"
    path.write_text('[backends.vllm]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nstructured_output = "off"\n'
                    '[backends.local]\nkind = "local"\nstructured_output = "off"\n', encoding="utf-8")
    named = backends_from_toml(path, {})
    assert named["vllm"].structured_output == "off" and build_backend(named["vllm"]).supports_json_schema is False
    assert build_backend(named["local"]).supports_json_schema is False
    path.write_text('[backends.vllm]\nkind = "openai"\nstructured_output = "never"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[backends.vllm\] structured_output must be one of"):
        backends_from_toml(path, {})
