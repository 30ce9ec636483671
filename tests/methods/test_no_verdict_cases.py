"""Verdicts that should be "no verdict" say so: grade_score_options returns a null winner_index on a tied mode (a
purely position-biased judge names no option), and the MCP prompts speak only of result fields that exist."""

from __future__ import annotations

import re

import pytest

from judge_mcp import prompts
from judge_mcp.methods.grade_score.scoring import grade_score_options
from judge_mcp.contract.results import ComparePairResult, GradeScoreResult


def _first_position_answer(payload: dict) -> str:
    return '{"selection": "Option 1", "explanation": "the first one", "reasoning": "r", "evaluation": "e"}'


async def test_a_tied_mode_names_no_winner(make_judge) -> None:
    judge, _ = make_judge(lambda p: "Selection: Option 1")  # always the first-shown option
    judge.backend.supports_json_schema = False
    result = await grade_score_options(judge, instruction="Capital of Australia?", options=["Sydney", "Canberra"])
    assert result.option_counts == [1, 1] and result.tied_indices == [0, 1]
    assert result.winner_index is None  # not option 0, which a position-biased judge would win every time
    assert any("tied" in w and "null" in w for w in result.warnings)


@pytest.mark.parametrize("name, model", [("mcp_pick_best.txt", GradeScoreResult), ("mcp_compare_drafts.txt", ComparePairResult)])
def test_the_mcp_prompts_name_only_fields_the_result_has(name: str, model) -> None:
    named = set(re.findall(r"`([a-z_]+)`", prompts.load(name)))
    assert named, name
    assert named <= set(model.model_fields), (name, named - set(model.model_fields))


# ---- lwe_judge: the meta-prompt path says when its own vanilla orders disagreed ---------------------------------------
from judge_mcp.methods import lwe  # noqa: E402
from judge_mcp.contract.results import LweResult  # noqa: E402
from testkit.scripted_judges import LweScript  # noqa: E402


def _case(i: int) -> dict[str, str]:
    return {"prompt": f"Question {i}: what is {i} + {i}?", "response_a": f"GOOD: {2 * i}", "response_b": f"It is {2 * i + 1}."}


async def test_lwe_says_when_its_own_vanilla_orders_disagreed(make_judge) -> None:
    judge, _ = make_judge(LweScript("first"))  # a position-biased judge: A first, B when swapped
    result = await lwe.lwe_judge(judge, **_case(1), session="bias", batch_size=4)
    assert result.path == "meta_prompt" and (result.vanilla.ab, result.vanilla.ba) == ("A", "B")
    assert result.orders_disagreed is True
    assert any("disagreed between the orders" in w for w in result.warnings)
    assert "orders_disagreed" in LweResult.model_fields


async def test_lwe_orders_disagreed_is_false_when_they_agree_and_null_when_unknown(make_judge) -> None:
    judge, _ = make_judge(LweScript("consistent"))
    assert (await lwe.lwe_judge(judge, **_case(2), session="calm")).orders_disagreed is False
    assert (await lwe.lwe_judge(judge, **_case(3), session="full", selective=False)).orders_disagreed is None
    judge, _ = make_judge(LweScript("vanilla_garbage"))
    result = await lwe.lwe_judge(judge, **_case(4), session="vg")
    assert result.orders_disagreed is None and not any("disagreed between" in w for w in result.warnings)
