"""Answers cut off at the token limit (methods/ask.py): a text answer is continued before any re-ask (also when
re-asks are off), an answer still cut off after the continuations is reported as truncated, an unparsed answer that
finished says no verdict, and a structured answer is never continued. Over a scripted OpenAI-compatible server."""

from __future__ import annotations

from judge_mcp import prompts
from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods import pairwise
from judge_mcp.methods.ask import CONTINUATIONS
from testkit.scripted_servers import Reply


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
