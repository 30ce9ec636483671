"""The bench's baselines: the pointwise rating's grammar (FLIP paper, Prompt 1) and the Arena-Hard judge as JudgeBench
runs it (its parse, its prompts verbatim, its request, ties, and the continuation that --no-reask leaves out)."""

from __future__ import annotations

from typing import Any

import pytest

from judge_mcp.bench.methods import Options
from judge_mcp.bench import arena_hard
from judge_mcp.bench.pointwise import parse_rating
from judge_mcp import prompts
from testkit.reasoning_servers import OpenAIReasoner
from testkit.scripted_judges import first_user, is_arena_hard
from tests.bench.datasets import PAIRS, bench, good_first, right_judge


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{ "REASONING": "fine", "SCORE": "7" }', (7.0, "fine")),
        ('{"reasoning": "ok", "score": 9}', (9.0, "ok")),
        ('```json\n{"SCORE": "8/10", "REASONING": "x"}\n```', (8.0, "x")),
        ('{"REASONING": "cut off", "SCORE": "6"', (6.0, "cut off")),
        ('{"REASONING": "x", "SCORE": "10"}', (10.0, "x")),
    ],
)
def test_parse_rating_accepts_the_papers_format(text, expected):
    assert parse_rating(text) == expected


@pytest.mark.parametrize("text", ["", "I think it is good.", '{"REASONING": "x", "SCORE": "11"}', '{"SCORE": "0"}', '{"SCORE": "<your-score>"}', '{"SCORE": true}'])
def test_parse_rating_rejects_out_of_range_and_missing_scores(text):
    assert parse_rating(text) is None


# ---- the Arena-Hard judge as JudgeBench runs it --------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("My final verdict is: [[A>>B]]", ("A>B", False)),
        ("[[B>A]] ... so, again, [[B>A]]", ("B>A", False)),
        ("My final verdict is tie: [[A=B]]", ("A=B", False)),
        ("first [[A>>B]], then [[A>B]]", (None, False)),  # labels that differ as printed: unparsed
        ("[[A>B]] or maybe [[B>A]]", (None, False)),
        ("no label yet", (None, True)),  # no label: JudgeBench continues the conversation once
    ],
)
def test_arena_hard_parse_follows_judgebench(text, expected):
    assert arena_hard.parse_decision(text) == expected


def test_arena_hard_prompts_are_the_judgebench_texts():
    system = prompts.load("arena_hard_system.txt")
    assert system.startswith("Please act as an impartial judge") and "Begin your evaluation by generating your own answer" in system
    for label in ("[[A>>B]]", "[[A>B]]", "[[A=B]]", "[[B>A]]", "[[B>>A]]"):
        assert label in system
    user = prompts.render("arena_hard_user.txt", prompt="P?", answer_a="one", answer_b="two")
    assert user == (
        "<|User Prompt|>\nP?\n\n<|The Start of Assistant A's Answer|>\none\n<|The End of Assistant A's Answer|>\n\n"
        "<|The Start of Assistant B's Answer|>\ntwo\n<|The End of Assistant B's Answer|>"
    )


async def test_arena_hard_sends_judgebench_s_request(scripted, tmp_path):
    summary, server = await bench(scripted, right_judge, PAIRS, "arena-hard", tmp_path)
    # the fixture's degenerate pair counts wrong in the JudgeBench score, as JudgeBench scores it: 6 of 7
    assert summary["overall"]["judgebench_score"] == 6 / 7 and summary["overall"]["reasked_verdicts"] == 0
    first = server.requests[0]
    assert first["messages"][0] == {"role": "system", "content": prompts.load("arena_hard_system.txt")}
    assert first["messages"][1]["content"].startswith("<|User Prompt|>\nTask p")
    assert first["max_tokens"] == 4096 and first["temperature"] == 0 and "response_format" not in first
    assert len(server.requests) == 12  # one call per placement, no continuation needed


async def test_arena_hard_tie_is_no_winner_and_counts_wrong(scripted, tmp_path):
    summary, _ = await bench(scripted, lambda p: "Both are fine. My final verdict is tie: [[A=B]]", PAIRS, "arena-hard", tmp_path)
    o = summary["overall"]
    assert o["accuracy"] == 0.0 and o["pair_accuracy"] == 0.0 and o["judgebench_score"] == 0.0
    assert o["ties"] == 6 and o["parse_failures"] == 0 and o["position_bias"] is None


def late_labeller(payload: dict[str, Any]) -> str:
    """Writes no label in its first answer; labels correctly when asked again (a continuation or a re-ask)."""
    if not any(m["role"] == "assistant" for m in payload["messages"]):
        return "Let me first write my own answer to the prompt."
    if is_arena_hard(payload):
        return "Having compared them: " + ("[[A>B]]" if good_first(first_user(payload)) else "[[B>A]]")
    return right_judge(payload)


async def test_arena_hard_continuation_counted_and_strict_mode_refuses_it(scripted, tmp_path):
    """A verdict that came only from JudgeBench's continuation is counted; --no-reask does not send it."""
    server = scripted(late_labeller)
    summary, _ = await bench(scripted, None, PAIRS, "arena-hard", tmp_path, server=server)
    o = summary["overall"]
    assert o["pair_accuracy"] == 1.0 and o["reasked_verdicts"] == 12 and len(server.requests) == 24
    continued = [p for p in server.requests if len(p["messages"]) == 4]
    assert continued and all(p["messages"][3]["content"] == prompts.load("arena_hard_continue.txt") for p in continued)
    # the first answer and the continuation are read together (JudgeBench appends them)

    # a fresh database (so no call cache): the strict run sends the 12 first answers and no continuation
    strict, _ = await bench(scripted, None, PAIRS, "arena-hard", tmp_path, db_name="strict.db", server=server, options=Options(no_reask=True))
    s = strict["overall"]
    assert strict["method_key"] == "arena-hard+strict"
    assert s["pair_accuracy"] == 0.0 and s["parse_failures"] == 12 and s["reasked_verdicts"] == 0
    assert len(server.requests) == 24 + 12 and all(len(p["messages"]) == 2 for p in server.requests[24:])


# ---- JudgeBench's o1 rule (utils/models.py, OpenAIAPI.chat) ----------------------------------------------------------------
def judgebench_o1_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """JudgeBench's o1 branch of OpenAIAPI.chat, as its code does it (the list mutated in place, the same f-string)."""
    if messages[0]["role"] == "system":
        system_message = messages.pop(0)["content"]
        user_message = messages[0]["content"]
        messages[0] = {
            "role": "user",
            "content": f"<|BEGIN_SYSTEM_MESSAGE|>\n{system_message.strip()}\n<|END_SYSTEM_MESSAGE|>\n\n{user_message}",
        }
    return messages


O1 = {"JUDGE_MCP_MODEL": "o1-mini-2024-09-12", "JUDGE_MCP_API_KEY": "sk-test"}


async def test_an_o1_judge_gets_judgebench_s_o1_request(scripted, tmp_path):
    model = OpenAIReasoner(judge=right_judge)  # refuses max_tokens and temperature, as o1 models do
    summary, server = await bench(scripted, model, PAIRS, "arena-hard", tmp_path, env=O1)
    assert summary["overall"]["judgebench_score"] == 6 / 7 and model.refusals == 0 and len(server.requests) == 12
    system = prompts.load("arena_hard_system.txt")  # JudgeBench's arena_hard_judge_system.jinja2 byte for byte (test_jb_vanilla)
    for sent in server.requests:
        user = sent["messages"][0]["content"].split("<|END_SYSTEM_MESSAGE|>\n\n", 1)[1]
        assert user.startswith("<|User Prompt|>\nTask p")
        # exactly what JudgeBench's client sends an o1 judge: model and messages, nothing else
        assert sent == {"model": "o1-mini-2024-09-12",
                        "messages": judgebench_o1_messages([{"role": "system", "content": system}, {"role": "user", "content": user}])}


async def test_an_o1_judge_s_continuation_follows_the_folded_message(scripted, tmp_path):
    server = scripted(OpenAIReasoner(judge=late_labeller))
    summary, _ = await bench(scripted, None, PAIRS, "arena-hard", tmp_path, server=server, env=O1)
    assert summary["overall"]["pair_accuracy"] == 1.0 and len(server.requests) == 24
    continued = [p for p in server.requests if len(p["messages"]) == 3]
    assert len(continued) == 12
    for sent in continued:
        assert set(sent) == {"model", "messages"} and [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        assert sent["messages"][0]["content"].startswith("<|BEGIN_SYSTEM_MESSAGE|>\n")
        assert sent["messages"][2]["content"] == prompts.load("arena_hard_continue.txt")


async def test_a_reasoning_judge_outside_the_o1_rule_keeps_the_system_message(scripted, tmp_path):
    """JudgeBench applies its rule to o1 names only: an o3-mini judge gets Arena-Hard's request, as its server takes it."""
    model = OpenAIReasoner(judge=right_judge)
    summary, server = await bench(scripted, model, PAIRS, "arena-hard", tmp_path, env={**O1, "JUDGE_MCP_MODEL": "o3-mini"})
    assert summary["overall"]["judgebench_score"] == 6 / 7 and model.refusals == 0
    first = server.requests[0]
    assert first["messages"][0] == {"role": "system", "content": prompts.load("arena_hard_system.txt")}
    assert first["max_completion_tokens"] == 4096 + 16384 and "temperature" not in first and "max_tokens" not in first
    # the bench reports the hidden reasoning beside the other token figures: 600 per call, one call per placement
    assert summary["overall"]["reasoning_tokens_per_item"] == 1200.0


async def test_a_run_whose_backend_reports_no_reasoning_says_so(scripted, tmp_path):
    summary, _ = await bench(scripted, right_judge, PAIRS, "arena-hard", tmp_path)
    assert summary["overall"]["reasoning_tokens_per_item"] is None and summary["overall"]["completion_tokens_per_item"] > 0
