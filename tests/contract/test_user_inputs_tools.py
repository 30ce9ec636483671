"""criteria and reference through the official MCP client over every transport: they reach the model in every call
of compare_pair, grade_score_options and lwe_judge, are kept in the verdict log, are told apart by judge_stats, and
the MCP prompts pass them on."""

from __future__ import annotations

from testkit.scripted_servers import prompt_text
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, UniversalJudge

CRITERIA = "Code review: correctness first, then thread safety, then readability; ignore style nits."
REFERENCE = "Canberra is the capital of Australia."


async def test_criteria_and_reference_reach_every_call_and_the_verdict_log(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        client = judged.client
        pair = await client.call_tool("compare_pair", {**PAIR, "criteria": CRITERIA, "reference": REFERENCE})
        plain = await client.call_tool("compare_pair", PAIR)
        grade = await client.call_tool("grade_score_options", {"instruction": CAPITAL_Q, "options": [BAD, GOOD], "criteria": CRITERIA})
        lwe = await client.call_tool("lwe_judge", {**PAIR, "reference": REFERENCE, "session": "inputs"})
        stats = await client.call_tool("judge_stats", {})
    assert not any(r.is_error for r in (pair, plain, grade, lwe, stats)), [r.content for r in (pair, plain, grade, lwe, stats)]
    assert pair.structured_content["winner"] == "B" and grade.structured_content["winner_index"] == 1
    texts = [prompt_text(r) for r in judged.backend.requests]
    with_criteria = [t for t in texts if CRITERIA in t]
    with_reference = [t for t in texts if REFERENCE in t]
    assert len(with_criteria) == 2 + 2  # compare_pair's two orders, grade_score_options' two rotations
    assert len(with_reference) == 2 + 2  # compare_pair's two orders, lwe_judge's two vanilla orders
    logged = {(row["tool"], row["inputs"].get("criteria"), row["inputs"].get("reference")) for row in judged.verdicts()}
    assert logged == {
        ("compare_pair", CRITERIA, REFERENCE), ("compare_pair", None, None), ("grade_score_options", CRITERIA, None), ("lwe_judge", None, REFERENCE),
    }
    groups = {(g["tool"], g["inputs"]): g["verdicts"] for g in stats.structured_content["all_time"]["groups"]}
    assert groups[("compare_pair", "criteria+reference")] == 1 and groups[("compare_pair", "text")] == 1
    assert groups[("grade_score_options", "criteria")] == 1 and groups[("lwe_judge", "reference")] == 1


async def test_the_mcp_prompts_pass_criteria_and_reference_on(connect) -> None:
    async with connect(UniversalJudge()) as judged:
        drafts = await judged.client.get_prompt(
            "compare_drafts", {"task": "Review this patch", "draft_a": "a", "draft_b": "b", "criteria": CRITERIA}
        )
        best = await judged.client.get_prompt("pick_best", {"question": "Sum of 1..100?", "options": "5050\n5000", "reference": "5050"})
    text = drafts.messages[0].content.text
    assert "criteria = " in text and CRITERIA in text and "reference =" not in text
    best_text = best.messages[0].content.text
    assert "reference = " in best_text and best_text.rstrip().endswith("5050") and "criteria =" not in best_text
