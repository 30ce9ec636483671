"""Issue 13 items 1, 2 and 4a: the methods' defaults follow the papers.

FLIP's answer order (the paper's reasoning-first by default, instruction-first as an option, every shipped
prompt/schema pair consistent), the pairwise answer budget and the continuation of a cut-off answer, bounded
schemas on every backend that honours them, and truncation reported as its own cause. Fake backends speak the real
wire format over real HTTP (tests/scripted.py).
"""

from __future__ import annotations

import json
import re

import pytest
from mcp import Client

from judge_mcp import prompts
from judge_mcp.backends.local import LocalBackend, cap_free_strings
from judge_mcp.backends.openai_compat import OpenAICompatBackend, without_length_caps
from judge_mcp.bench import pointwise
from judge_mcp.methods import flip, pairwise
from judge_mcp.methods.ask import CONTINUATIONS
from judge_mcp.args import InputError
from tests.scripted import Reply

# ---- item 1: every shipped prompt/schema pair asks for the order its schema allows ----------------------------
_EXPLANATION_FIRST = re.compile(r"(?im)^- (?:begin|start) (?:with|your evaluation by providing) [^\n]*explanation")


def _quoted_order(text: str, keys: list[str]) -> list[str]:
    """The keys in the order the text's answer-format description first names them (quoted)."""
    spans = text.split("JSON")  # the format descriptions follow "JSON"
    tail = "JSON".join(spans[1:]) if len(spans) > 1 else text
    found = {k: tail.find(f'"{k}"') for k in keys}
    assert all(pos >= 0 for pos in found.values()), f"the format description does not name every key: {found}"
    return sorted(keys, key=found.get)


def _pairs():
    """(name, prompt text the model sees, schema) for every structured prompt the methods ship."""
    for variant in flip.PROMPT_VARIANTS:
        for order in flip.ANSWER_ORDERS:
            for with_context in (False, True):
                text = flip.system_prompt(variant, with_context=with_context, structured=True, answer_order=order)
                context = "a user prompt" if with_context else None
                text += "\n" + flip.user_prompt("a response", context=context, structured=True, answer_order=order)
                yield f"flip v{variant} {order} ctx={with_context}", text, flip.answer_schema(order)
    for goal in pairwise.GOALS:
        for template in pairwise.TEMPLATES:
            yield f"grp {template} {goal}", pairwise.system_prompt(goal, template, True), pairwise.verdict_schema(template)
    yield "flip pointwise", pointwise.system_prompt(True) + "\n" + pointwise.user_prompt("q", "a", True), pointwise.answer_schema()


@pytest.mark.parametrize("name, text, schema", list(_pairs()), ids=lambda v: v if isinstance(v, str) and len(v) < 40 else "")
def test_no_shipped_prompt_asks_for_an_order_its_schema_forbids(name, text, schema):
    keys = list(schema["properties"])
    if len(keys) > 1:
        assert _quoted_order(text, keys) == keys, name
    # "Begin with an explanation" only where the schema's first field is the explanation
    first = keys[0].lower()
    if _EXPLANATION_FIRST.search(text):
        assert "reason" in first, f"{name}: the prompt asks for the explanation first, the schema starts with {keys[0]}"


def test_flip_default_is_the_papers_order_and_prompt_verbatim():
    paper = prompts.render("flip_system_1.txt", answer_format="X")
    assert "- Begin with a brief explanation of your reasoning." in paper
    default = flip.system_prompt(1, with_context=False, structured=False)
    assert default == prompts.render("flip_system_1.txt", answer_format=flip.answer_format(flip.PAPER_KEY, structured=False)).rstrip("\n")
    assert flip.answer_format(flip.PAPER_KEY, structured=False) == '{ "REASONING": "<explanation>", "INFERRRED INSTRUCTION": "<instruction>" }'
    assert list(flip.answer_schema()["properties"]) == ["REASONING", "INFERRED INSTRUCTION"]


@pytest.mark.parametrize("variant", flip.PROMPT_VARIANTS)
def test_flip_instruction_first_replaces_the_order_bullet_in_every_variant(variant):
    text = flip.system_prompt(variant, with_context=False, structured=False, answer_order="instruction_first")
    assert not _EXPLANATION_FIRST.search(text)
    assert "Give the inferred instruction first" in text
    fmt = flip.answer_format(flip.PAPER_KEY, structured=False, answer_order="instruction_first")
    assert fmt.index("INFERRRED INSTRUCTION") < fmt.index("REASONING") and fmt in text
    assert list(flip.answer_schema("instruction_first")["properties"]) == ["INFERRED INSTRUCTION", "REASONING"]


async def test_flip_answer_order_reaches_the_wire_and_the_result(make_judge):
    answer = json.dumps({"INFERRED INSTRUCTION": "Write a haiku about autumn.", "REASONING": "a haiku"})
    judge, server = make_judge(lambda p: answer)
    result = await flip.infer_instruction_reward(judge, instruction="Write a haiku about autumn.", responses=["leaves"], answer_order="instruction_first")
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["INFERRED INSTRUCTION", "REASONING"]
    assert result.answer_order == "instruction_first" and result.results[0].parse_ok and result.results[0].reward == 1.0


async def test_flip_bad_answer_order_is_a_clear_error(make_judge):
    judge, server = make_judge(lambda p: "{}")
    with pytest.raises(InputError, match="'answer_order' must be one of"):
        await flip.infer_instruction_reward(judge, instruction="x y z", responses=["r"], answer_order="explanation_last")
    assert server.requests == []


# ---- item 2: pairwise budget and continuation -------------------------------------------------------------------
def test_pairwise_default_budget_is_the_papers_setting():
    assert pairwise.MAX_TOKENS["sop"] == 4096  # JudgeBench's Arena-Hard judge
    assert min(pairwise.MAX_TOKENS.values()) >= 4096


async def test_pairwise_budget_is_sent_and_configurable(make_judge):
    judge, server = make_judge(lambda p: "Answer A is worse. [[B>A]]")
    await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", swap=False)
    await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", swap=False, max_tokens=700)
    assert [r["max_tokens"] for r in server.requests] == [4096, 700]


@pytest.mark.parametrize("bad", [0, -5, 40_000, 1.5, "4096", True])
async def test_pairwise_bad_budget_is_a_clear_error(make_judge, bad):
    judge, server = make_judge(lambda p: "[[A>B]]")
    with pytest.raises(InputError, match="'max_tokens' must be a whole number from 1 to 32768"):
        await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", max_tokens=bad)
    assert server.requests == []


def _text_judge(judge):
    judge.backend.supports_json_schema = False  # the paper's text grammar: continuation applies
    return judge


async def test_a_cut_off_answer_is_continued_before_any_reask(make_judge):
    def responder(payload):
        last = payload["messages"][-1]
        if last["role"] == "user" and last["content"] == prompts.load("continue.txt"):
            return "so Assistant B is worse.\n\nMy final verdict is: [[A>B]]"
        return Reply(content="My own answer: Paris. Assistant A says Paris; Assistant B says Lyon, ", finish_reason="length")

    judge, server = make_judge(responder)
    result = await pairwise.compare_pair(_text_judge(judge), prompt="Capital?", response_a="Paris", response_b="Lyon", swap=False)
    trial = result.trials[0]
    assert trial.parse_ok and trial.continued and not trial.reasked and not trial.truncated and result.winner == "A"
    assert len(server.requests) == 2
    follow = server.requests[1]["messages"]
    assert follow[-2] == {"role": "assistant", "content": "My own answer: Paris. Assistant A says Paris; Assistant B says Lyon, "}
    assert "Assistant B says Lyon, so Assistant B is worse." in trial.rationale  # the pieces joined
    assert [r["purpose"] for r in judge.records] == ["compare_pair:AB", "compare_pair:AB:continue1"]


async def test_continuation_is_not_a_reask_and_survives_no_reask(make_judge):
    calls = []

    def responder(payload):
        calls.append(payload)
        if len(calls) == 1:
            return Reply(content="Thinking about both answers", finish_reason="length")
        return "[[B>A]]"

    judge, server = make_judge(responder)
    judge = _text_judge(judge)
    judge.no_reask = True
    result = await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", swap=False)
    assert result.trials[0].continued and result.trials[0].parse_ok and result.trials[0].better == "B"


async def test_an_answer_still_cut_off_is_reported_as_truncated(make_judge):
    judge, server = make_judge(lambda p: Reply(content="and so on and so on", finish_reason="length"))
    judge = _text_judge(judge)
    judge.no_reask = True
    result = await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", swap=False)
    trial = result.trials[0]
    assert len(server.requests) == 1 + CONTINUATIONS  # at most CONTINUATIONS continuations, then no re-ask
    assert not trial.parse_ok and trial.continued and trial.truncated and trial.unparsed_reason == "truncated"


async def test_an_unparsed_answer_that_finished_says_no_verdict(make_judge):
    judge, server = make_judge(lambda p: "Both are fine.")
    result = await pairwise.compare_pair(judge, prompt="Q", response_a="a", response_b="b", swap=False)
    trial = result.trials[0]
    assert not trial.parse_ok and trial.reasked and not trial.continued and trial.unparsed_reason == "no_verdict"


async def test_a_structured_answer_is_not_continued_and_its_truncation_is_reported(make_judge):
    judge, server = make_judge(lambda p: Reply(content='{"REASONING": "loop loop loop', finish_reason="length"))
    judge.no_reask = True
    result = await flip.infer_instruction_reward(judge, instruction="Write a haiku.", responses=["leaves"])
    item = result.results[0]
    assert len(server.requests) == 1  # a schema answer cannot be resumed mid-object: no continuation
    assert not item.parse_ok and not item.continued and item.truncated and item.unparsed_reason == "truncated"


async def test_flip_text_answer_is_continued(make_judge):
    def responder(payload):
        if payload["messages"][-1]["content"] == prompts.load("continue.txt"):
            return 'INSTRUCTION": "Write a haiku about autumn." }'
        return Reply(content='{ "REASONING": "a haiku about leaves", "INFERRRED ', finish_reason="length")

    judge, server = make_judge(responder)
    judge.backend.supports_json_schema = False
    result = await flip.infer_instruction_reward(judge, instruction="Write a haiku about autumn.", responses=["leaves"])
    item = result.results[0]
    assert item.parse_ok and item.continued and item.inferred_instruction == "Write a haiku about autumn."


# ---- item 4a: bounded schemas on every backend, truncation its own cause ------------------------------------------
def test_methods_declare_length_caps_on_every_free_text_field():
    schemas = [flip.answer_schema(o) for o in flip.ANSWER_ORDERS] + [pairwise.verdict_schema(t) for t in pairwise.TEMPLATES]
    for schema in schemas:
        for name, spec in schema["properties"].items():
            if "enum" not in spec:
                assert isinstance(spec.get("maxLength"), int) and spec["maxLength"] >= 1000, name
    # the SOP own answer gets room; the free text of FLIP fits its 512-token budget at ~4 characters a token
    assert pairwise.verdict_schema("sop")["properties"]["own_answer"]["maxLength"] >= 8000
    assert sum(s["maxLength"] for s in flip.answer_schema()["properties"].values()) <= flip.MAX_TOKENS * 4


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
    assert judge.backend.send_length_caps is False


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


# ---- the MCP layer ------------------------------------------------------------------------------------------------
async def test_tools_take_answer_order_and_max_tokens(mcp_app):
    def responder(payload):
        if "pairwise_verdict" in json.dumps(payload.get("response_format", {})):
            return json.dumps({"own_answer": "o", "evaluation": "e", "verdict": "[[A>B]]"})
        return json.dumps({"INFERRED INSTRUCTION": "Write a poem.", "REASONING": "r"})

    server, backend = mcp_app(responder)
    async with Client(server) as client:
        flip_out = await client.call_tool(
            "infer_instruction_reward", {"instruction": "Write a poem.", "responses": ["roses"], "answer_order": "instruction_first"}
        )
        pair_out = await client.call_tool("compare_pair", {"prompt": "Q", "response_a": "a", "response_b": "b", "max_tokens": 900})
        bad = await client.call_tool("compare_pair", {"prompt": "Q", "response_a": "a", "response_b": "b", "max_tokens": 0})
    assert flip_out.structured_content["answer_order"] == "instruction_first"
    assert [t["parse_ok"] for t in pair_out.structured_content["trials"]] == [True, True]
    assert {r["max_tokens"] for r in backend.requests if "pairwise_verdict" in json.dumps(r.get("response_format", {}))} == {900}
    assert bad.is_error and "max_tokens" in str(bad.content[0].text)
