"""Text work on large inputs (defusing and prompt building, answer parsing, FLIP's echo test and similarity) runs in a
worker thread, so the event loop keeps serving other clients meanwhile; small inputs stay on the loop."""

from __future__ import annotations

import threading

import pytest

from judge_mcp.methods.flip import reward as flip
from judge_mcp.methods import pairwise, text_work
from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD

LONG = " ".join(["Canberra is the capital."] * 1_000)  # 24,999 characters


def _recording(monkeypatch, module, names: list[str]) -> dict[str, set[bool]]:
    """Wrap module.name for each name; record whether each call ran on the event loop's thread."""
    seen: dict[str, set[bool]] = {n: set() for n in names}
    loop_thread = threading.get_ident()
    for name in names:
        original = getattr(module, name)

        def wrapper(*args, _original=original, _name=name, **kwargs):
            seen[_name].add(threading.get_ident() == loop_thread)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)
    return seen


@pytest.mark.parametrize("big", [True, False])
async def test_compare_pair_defuses_and_parses_large_texts_off_the_loop(make_judge, monkeypatch, big: bool) -> None:
    judge, _ = make_judge(lambda p: "My final verdict is: [[A>B]]")
    judge.backend.supports_json_schema = False
    seen = _recording(monkeypatch, pairwise, ["user_prompt", "parse_label"])
    good = f"{GOOD} {LONG}" if big else GOOD
    result = await pairwise.compare_pair(judge, prompt=CAPITAL_Q, response_a=good, response_b=BAD)
    assert all(t.parse_ok for t in result.trials)
    assert seen == {"user_prompt": {not big}, "parse_label": {not big}}


async def test_flip_echo_test_and_similarity_of_large_texts_run_off_the_loop(make_judge, monkeypatch) -> None:
    judge, _ = make_judge(lambda p: '{"REASONING": "r", "INFERRED INSTRUCTION": "Name the capital of Australia."}')
    seen = _recording(monkeypatch, flip, ["user_prompt", "detect_echo"])
    seen_sim = _recording(monkeypatch, flip, ["similarity_score"])
    await flip.infer_instruction_reward(judge, instruction=CAPITAL_Q, responses=[f"{GOOD} {LONG}", BAD])
    assert seen == {"user_prompt": {False, True}, "detect_echo": {False, True}}  # the long response off, the short on
    assert seen_sim["similarity_score"] == {True}  # the inferred and the given instruction are short

    seen_sim = _recording(monkeypatch, flip, ["similarity_score"])
    await flip.infer_instruction_reward(judge, instruction=f"{CAPITAL_Q} {LONG}", responses=[BAD])
    assert seen_sim["similarity_score"] == {False}


def test_the_threshold_is_a_size_of_text() -> None:
    assert len(LONG) + len(GOOD) >= text_work.OFF_LOOP_CHARS > len(GOOD) + len(BAD) + len(CAPITAL_Q)
