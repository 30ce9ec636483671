"""Length caps (maxLength) in structured-output schemas, per backend: an OpenAI-compatible server gets them, one that
refuses them gets the schema once more without them, hosted OpenAI never gets them, and the embedded backend keeps
the methods' caps, fills in the rest and scales them with its output budget."""

from __future__ import annotations

import json

import pytest

from judge_mcp.backends.local import LocalBackend, cap_free_strings
from judge_mcp.backends.openai_compat import OpenAICompatBackend, without_length_caps
from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods import pairwise
from testkit.scripted_servers import Reply


async def test_openai_compatible_server_gets_the_caps(make_judge):
    judge, server = make_judge(lambda p: json.dumps({"REASONING": "r", "INFERRED INSTRUCTION": "Write a poem."}))
    await flip.infer_instruction_reward(judge, instruction="Write a poem.", responses=["roses"])
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["REASONING"]["maxLength"] == flip.FIELD_MAX_CHARS["REASONING"]


async def test_a_server_refusing_maxlength_gets_the_schema_once_more_without_caps(make_judge):
    def responder(payload):
        schema = payload["response_format"]["json_schema"]["schema"]
        if "maxLength" in json.dumps(schema):
            return Reply(status=400, raw_body=b'{"error": {"message": "Invalid schema: \'maxLength\' is not permitted.", "type": "invalid_request_error"}}', headers={"content-type": "application/json"})
        return json.dumps({"REASONING": "r", "INFERRED INSTRUCTION": "Write a poem."})

    judge, server = make_judge(responder)
    result = await flip.infer_instruction_reward(judge, instruction="Write a poem.", responses=["roses", "tulips"])
    assert all(it.parse_ok for it in result.results)
    capped = [r for r in server.requests if "maxLength" in json.dumps(r["response_format"])]
    assert 1 <= len(capped) <= 2 and len(server.requests) == len(capped) + 2  # each refused call resent once
    assert any(r.get("dropped_parameters") == ["maxLength"] for r in judge.records)
    assert judge.backend.learned.no_length_caps is True


async def test_other_400s_are_not_retried_without_caps(make_judge):
    judge, server = make_judge(lambda p: Reply(status=400, raw_body=b'{"error": {"message": "model not found"}}'))
    with pytest.raises(Exception, match="model not found"):
        await flip.infer_instruction_reward(judge, instruction="Write a poem.", responses=["roses"])
    assert len(server.requests) == 1


def test_hosted_openai_gets_no_length_caps():
    hosted = OpenAICompatBackend("o", "gpt-4o", base_url="https://api.openai.com/v1", api_key="k")
    other = OpenAICompatBackend("l", "m", base_url="http://127.0.0.1:8080/v1")
    from judge_mcp.backends.base import user

    req = user("x", json_schema=pairwise.verdict_schema("sop"))
    assert "maxLength" not in json.dumps(hosted.payload(req)) and "maxLength" in json.dumps(other.payload(req))
    assert without_length_caps(req.json_schema)["properties"].keys() == req.json_schema["properties"].keys()


def test_embedded_backend_keeps_method_caps_and_fills_the_rest():
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 300}, "b": {"type": "string"}}}
    capped = cap_free_strings(schema)
    assert capped["properties"]["a"]["maxLength"] == 300 and isinstance(capped["properties"]["b"]["maxLength"], int)


def test_embedded_backend_caps_the_budget_and_scales_the_caps_with_it():
    from judge_mcp.backends.base import user

    local = LocalBackend("local", None, max_output_tokens=1024)
    sop = local.payload(user("x", max_tokens=4096, json_schema=pairwise.verdict_schema("sop")))
    assert sop["max_tokens"] == 1024
    own = sop["response_format"]["json_schema"]["schema"]["properties"]["own_answer"]["maxLength"]
    assert own == pairwise.FIELD_MAX_CHARS["own_answer"] // 4
    fl = local.payload(user("x", max_tokens=flip.MAX_TOKENS, json_schema=flip.answer_schema()))
    assert fl["max_tokens"] == flip.MAX_TOKENS  # under the cap: untouched
    assert fl["response_format"]["json_schema"]["schema"]["properties"]["REASONING"]["maxLength"] == flip.FIELD_MAX_CHARS["REASONING"]
    with pytest.raises(ValueError, match="max_output_tokens"):
        LocalBackend("local", None, max_output_tokens=0)
