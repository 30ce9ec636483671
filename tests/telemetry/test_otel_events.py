"""The labels and explanations of the `gen_ai.evaluation.result` events for the verdicts the end-to-end tests do not
reach (an inconsistent pair, a panel's tied vote, a tied Grade Score mode, LWE's meta-prompt path, an echoing or
unparsed FLIP response), and the provider named for the embedded model."""

from __future__ import annotations

from types import SimpleNamespace as NS

from judge_mcp.backends.local import LocalBackend
from judge_mcp.config.values import OtelSettings
from judge_mcp.telemetry.events import evaluations, tool_attributes
from judge_mcp.telemetry.otel import Tracing
from tests.otel_spans import Recorder


def trial(ok: bool = True, rationale: str = "why") -> NS:
    return NS(parse_ok=ok, rationale=rationale)


def pair(**kw) -> NS:
    base = {"winner": None, "consistent": None, "p_better": None, "trials": [trial(), trial()], "panel_votes": None}
    return NS(**{**base, **kw})


def label(tool: str, result: NS) -> tuple[str, str]:
    (event,) = evaluations(tool, result, capture_text=False)
    return event["gen_ai.evaluation.score.label"], event["gen_ai.evaluation.explanation"]


def test_pairs_without_a_winner_say_why_without_the_rationale() -> None:
    assert label("compare_pair", pair(consistent=False)) == ("no verdict", "the orders disagree (position bias)")
    assert label("compare_pair", pair(consistent=False, trials=[trial(), trial(ok=False)])) == ("no verdict", "an order's answer was unparsed")
    assert label("compare_pair", pair(winner="A", consistent=True, trials=[trial()])) == ("A", "one order judged")
    assert label("compare_pair", pair(consistent=False, trials=[trial(ok=False)])) == ("no verdict", "the answer was unparsed")
    votes = NS(votes={"A": 1, "B": 1}, answered=3, abstained=1)
    assert label("compare_pair", pair(panel_votes=votes)) == ("tie", "panel of 3 answering (A: 1, B: 1; 1 abstained)")
    votes = NS(votes={"A": 2, "B": 1}, answered=3, abstained=0)
    assert label("compare_pair", pair(winner="A", panel_votes=votes))[0] == "A"


def test_the_rationale_joins_the_explanation_only_when_captured() -> None:
    result = pair(winner="B", consistent=True, trials=[trial(rationale="B names Canberra"), trial(rationale="")])
    (event,) = evaluations("compare_pair", result, capture_text=True)
    assert event["gen_ai.evaluation.explanation"] == "both orders agree\nB names Canberra"
    assert "Canberra" not in label("compare_pair", result)[1]


def test_lwe_grade_score_and_flip_labels() -> None:
    lwe = NS(winner="A", path="meta_prompt", parse_ok=True, p_better=None, panel_votes=None, judgment="text")
    assert label("lwe_judge", lwe) == ("A", "decided by the case-specific prompt (meta-prompt path)")
    grade = NS(winner_index=None, tied_indices=[0, 2], panel_votes=None, option_counts=[2, 0, 2], parsed_trials=4, unparsed_trials=0,
               grade_score=0.4, trials=[])
    assert label("grade_score_options", grade) == ("tie", "picked in 2 of 4 parsed rotations (0 unparsed)")
    items = [NS(index=0, parse_ok=False, unparsed_reason="truncated", echoes_instruction=False, reward=0.0, reasoning=""),
             NS(index=1, parse_ok=True, unparsed_reason=None, echoes_instruction=True, reward=0.9, reasoning="")]
    events = evaluations("infer_instruction_reward", NS(results=items), capture_text=False)
    assert [(e["gen_ai.evaluation.score.label"], e["gen_ai.evaluation.score.value"]) for e in events] == [("unparsed", 0.0), ("echo", 0.9)]
    assert evaluations("judge_stats", NS(), capture_text=False) == []


def test_tool_attributes_name_a_panel_and_leave_the_arguments_out() -> None:
    usage = NS(calls=4, cached_calls=0, prompt_tokens=40, completion_tokens=20)
    args = NS(backends=["gpt", "claude"], logged=lambda: {"prompt": "judged"})
    out = tool_attributes(args, NS(model="panel", usage=usage), capture_text=False)
    assert out["judge_mcp.backend"] == "gpt+claude" and out["judge_mcp.calls"] == 4
    assert "gen_ai.tool.call.arguments" not in out
    assert "judged" in tool_attributes(args, NS(model="panel", usage=usage), capture_text=True)["gen_ai.tool.call.arguments"]


def test_the_embedded_model_is_llama_cpp_with_no_server() -> None:
    tracing = Tracing(Recorder().provider, OtelSettings(enabled=True), owned=False)
    attributes = tracing.backend_attributes(LocalBackend("default", "/models/qwen.gguf"))
    assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "llama.cpp"
    assert attributes["gen_ai.request.model"] == "qwen.gguf" and "server.address" not in attributes
