"""The answer formats the methods ask for: every shipped prompt names its schema's fields in the schema's order, every
free-text field has a length cap, and FLIP's answer order is the paper's (reasoning first) by default, with the
instruction first as an option that reaches the wire."""

from __future__ import annotations

import json
import re

import pytest

from judge_mcp import prompts
from judge_mcp.bench import pointwise
from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods import pairwise
from judge_mcp.contract.fields import InputError


# ---- field order ---------------------------------------------------------------------------------------------------
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


# ---- length caps ---------------------------------------------------------------------------------------------------
def test_methods_declare_length_caps_on_every_free_text_field():
    schemas = [flip.answer_schema(o) for o in flip.ANSWER_ORDERS] + [pairwise.verdict_schema(t) for t in pairwise.TEMPLATES]
    for schema in schemas:
        for name, spec in schema["properties"].items():
            if "enum" not in spec:
                assert isinstance(spec.get("maxLength"), int) and spec["maxLength"] >= 1000, name
    # the SOP own answer gets room; the free text of FLIP fits its 512-token budget at ~4 characters a token
    assert pairwise.verdict_schema("sop")["properties"]["own_answer"]["maxLength"] >= 8000
    assert sum(s["maxLength"] for s in flip.answer_schema()["properties"].values()) <= flip.MAX_TOKENS * 4
