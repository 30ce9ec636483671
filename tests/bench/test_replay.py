"""Replaying recorded judgments (testkit/replay.py): JudgeBench's recorded runs through jb-vanilla and
arena-hard give JudgeBench's score and the strict score by hand; a recording of other prompts is refused request by
request; AlpacaEval's recorded annotations give back their own preferences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit import replay
from tests.bench.datasets import FIXTURES
from tests.bench.test_alpaca_eval import REFERENCE, ROWS, fixture_judge

JB_SOURCE = FIXTURES / "judgebench_source.jsonl"


def _judgment(text: str | None, prompt: str = "not kept") -> dict[str, Any] | None:
    return None if text is None else {"judgment": {"judge_model": "m", "prompt": prompt, "response": text}, "decision": "recorded"}


def _recording(tmp_path: Path, answers: list[tuple[str | None, str | None]]) -> Path:
    """JudgeBench's recorded shape: the pairs of the fixture with their two judgments (as given, then swapped)."""
    pairs = [json.loads(line) for line in JB_SOURCE.read_text(encoding="utf-8").splitlines()]
    path = tmp_path / "recorded.jsonl"
    path.write_text("".join(json.dumps({**p, "judge_name": "x", "judgments": [_judgment(a), _judgment(b)]}) + "\n"
                            for p, (a, b) in zip(pairs, answers)), encoding="utf-8")
    return path


def _right(label: str, order: int, right: bool) -> str:
    """Output (a)/(b) naming the labelled better response (or the other one) in order 0 (as given) or 1 (swapped)."""
    first_better = (label == "A>B") == (order == 0)
    return "Output (a)" if first_better == right else "Output (b)"


def test_a_judgebench_recording_replays_to_its_score_by_hand(tmp_path):
    labels = [json.loads(line)["label"] for line in JB_SOURCE.read_text(encoding="utf-8").splitlines()]
    answers = [
        (_right(labels[0], 0, True), _right(labels[0], 1, True)),  # right twice: right under both rules
        (_right(labels[1], 0, True), None),  # right, then a failed judgment: JudgeBench right, strict wrong
        (_right(labels[2], 0, True), _right(labels[2], 1, False)),  # inconsistent: wrong under both
        (_right(labels[3], 0, False), _right(labels[3], 1, False)),  # wrong twice
        ("Output (a) is better", _right(labels[4], 1, True)),  # unparsed (as JudgeBench: it raises), then right
    ]
    summary, misses = replay.replay("judgebench", _recording(tmp_path, answers), "jb-vanilla", tmp_path / "r.db", tmp_path)
    o = summary["overall"]
    assert misses == [] and o["n"] == 5
    assert o["judgebench_score"] == 3 / 5 and o["strict_score"] == 1 / 5 and o["parse_failures"] == 2


def test_an_arena_hard_recording_with_continuations_replays_whole(tmp_path):
    labels = [json.loads(line)["label"] for line in JB_SOURCE.read_text(encoding="utf-8").splitlines()]

    def verdict(label: str, order: int) -> str:
        first_better = (label == "A>B") == (order == 0)
        # JudgeBench's recorded text: "\n" + first answer (+ "\n" + the continuation's)
        return "\nLet me think first.\nMy final verdict is: " + ("[[A>>B]]" if first_better else "[[B>A]]")

    answers = [(verdict(lab, 0), verdict(lab, 1)) for lab in labels]
    answers[4] = ("\nNo label here.\nStill none.", verdict(labels[4], 1))  # both attempts without a label
    summary, misses = replay.replay("judgebench", _recording(tmp_path, answers), "arena-hard", tmp_path / "r.db", tmp_path)
    o = summary["overall"]
    assert misses == [] and o["judgebench_score"] == 1.0 and o["strict_score"] == 4 / 5
    assert o["parse_failures"] == 1  # its continuation was answered empty: still no label


def test_the_prompts_judgebench_recorded_are_compared_with_judge_mcp_s(tmp_path, capsys):
    pairs = [json.loads(line) for line in JB_SOURCE.read_text(encoding="utf-8").splitlines()]
    ours = [[replay.user_message("jb-vanilla", p["question"], a, b) for a, b in ((p["response_A"], p["response_B"]), (p["response_B"], p["response_A"]))]
            for p in pairs]
    # what JudgeBench's Jinja template renders, as recorded; one recorded with a trailing newline that it never sends
    recorded = _recording(tmp_path, [("Output (a)", "Output (b)")] * 5)
    lines = []
    for k, (line, both) in enumerate(zip(recorded.read_text(encoding="utf-8").splitlines(), ours)):
        row = json.loads(line)
        row["judgments"][0]["judgment"]["prompt"] = both[0] + ("\n" if k == 2 else "")
        row["judgments"][1]["judgment"]["prompt"] = both[1]
        lines.append(json.dumps(row))
    recorded.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert replay.main(["judgebench", str(recorded), "--method", "jb-vanilla"]) == 0
    assert "recorded prompts equal to judge-mcp's user message: 9 of 10" in capsys.readouterr().out


def test_a_request_the_recording_lacks_is_refused_and_counted(tmp_path):
    answers, misses = {"known": "Output (a)"}, []
    answer = replay.responder(answers, misses)
    assert answer({"messages": [{"role": "user", "content": "known"}]}) == "Output (a)"
    assert answer({"messages": [{"role": "user", "content": "other"}]}).status == 400 and misses == ["other"]
    assert answer({"messages": [{"role": "user", "content": "other"}, {"role": "assistant", "content": "x"}]}) == ""


def test_alpaca_eval_annotations_replay_to_their_recorded_preferences(tmp_path):
    # AlpacaEval's own run on the fixture (tests/bench_fixtures/alpaca_h2h_reference.json): the completion it got
    # for each request, recorded as its annotations file records it
    by_instruction = {}
    for body in REFERENCE["requests"]:
        reply = fixture_judge(body)
        completion = {"finish_reason": "length", "index": 0, "logprobs": {"content": reply.logprobs}, "text": reply.content}
        by_instruction[next(r["prompt"] for r in ROWS if f'"instruction": """{r["prompt"]}"""' in body["messages"][1]["content"])] = completion
    annotations = [{"instruction": r["prompt"], "output_1": r["output_1"], "generator_1": r["generator_1"], "dataset": "d",
                    "output_2": r["output_2"], "generator_2": r["generator_2"], "preference": p,
                    "raw_completion": by_instruction.get(r["prompt"])} for r, p in zip(ROWS, REFERENCE["preferences"])]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(annotations))
    summary, misses = replay.replay("alpaca-eval", path, "alpaca-eval", tmp_path / "r.db", tmp_path)
    a = summary["alpaca_eval"]
    assert misses == [] and a["recorded_preferences_matched"] == "10 of 10"
    assert a["win_rate"] == REFERENCE["win_rate"]["win_rate"]
