"""Hostile model replies: the reply side fuzzed the way tests/contract/test_hostile_input.py fuzzes the input side. Whatever text
the model answers (deep JSON nesting, lone surrogates, huge numbers, control characters, half objects, our own
labels and fences), every tool ends in a result whose trials are parsed or honestly unparsed, or in a named tool
error; never "internal error" and never a crash."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from mcp import Client

from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, RIGHT_INSTRUCTION
from testkit.scripted_servers import Reply

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
DEEP = "[" * 50_000 + "]" * 50_000
DEEP_OBJECT = '{"verdict": ' + '{"a": [' * 3000 + "1" + "]}" * 3000 + "}"  # valid JSON, nested past the parser's limit
fragments = st.sampled_from(
    [
        DEEP,
        DEEP_OBJECT,
        '{"verdict": "[[A>B]]"',  # an object that never closes
        '{"verdict": "[[A>B]]"}{"verdict": "[[B>A]]"}',
        '{"selection": 1e999999}',
        '{"score": 123456789012345678901234567890123456789}',
        "\\ud800",
        "\ud800 lone surrogate",
        "\x00\x01\x1b[31m",
        "[[A>B]] [[B>A]]",
        "Selection: Option 99",
        "<|The End of Assistant B's Answer|>",
        '{"instruction": null, "explanation": 7}',
        "",
        "   ",
        "NaN",
        "{}" * 1000,
    ]
)
replies = st.one_of(fragments, st.text(max_size=300), st.lists(fragments, min_size=1, max_size=4).map("\n".join))
counter = itertools.count()


def _calls(k: int) -> list[tuple[str, dict[str, Any]]]:
    """Arguments that differ per example, so the call cache never answers from an earlier example."""
    q = f"{CAPITAL_Q} (case {k})"
    return [
        ("compare_pair", {"prompt": q, "response_a": BAD, "response_b": GOOD}),
        ("infer_instruction_reward", {"instruction": f"{RIGHT_INSTRUCTION} ({k})", "responses": [BAD, GOOD]}),
        ("grade_score_options", {"instruction": q, "options": [BAD, GOOD]}),
        ("lwe_judge", {"prompt": q, "response_a": BAD, "response_b": GOOD, "session": "fuzz"}),
    ]


def _check(tool: str, result: Any) -> None:
    if result.is_error:
        text = result.content[0].text
        assert "internal error" not in text and text != f"Error executing tool {tool}", text
        event(f"{tool}: tool error")
        return
    data = result.structured_content
    # an unparsed trial never carries a verdict, and never decides the tool's answer
    if tool == "compare_pair":
        unparsed = [t for t in data["trials"] if not t["parse_ok"]]
        assert all(t["better"] is None and t["label"] is None for t in unparsed), unparsed
        assert data["winner"] is None or not unparsed, data
    elif tool == "grade_score_options":
        unparsed = [t for t in data["trials"] if not t["parse_ok"]]
        assert all(t["selected_position"] is None and t["selected_index"] is None for t in unparsed), unparsed
        assert data["winner_index"] is None or len(unparsed) < len(data["trials"]), data
    elif tool == "infer_instruction_reward":
        unparsed = [r for r in data["results"] if not r["parse_ok"]]
        assert all(r["reward"] == 0.0 for r in unparsed), unparsed
        assert data["best_index"] not in [r["index"] for r in unparsed], data
    else:  # lwe_judge. Both orders got the same reply, so two parsed vanilla verdicts name opposite answers: never consistent
        vanilla = data["vanilla"]
        assert vanilla is not None and not vanilla["consistent"] and data["path"] == "meta_prompt", data
        assert None in (vanilla["ab"], vanilla["ba"]) or vanilla["ab"] != vanilla["ba"], vanilla
        assert data["parse_ok"] == (data["winner"] is not None), data
        unparsed = [side for side in (vanilla["ab"], vanilla["ba"]) if side is None] + ([] if data["parse_ok"] else ["meta path"])
    event(f"{tool}: {'unparsed trials' if unparsed else 'result'}")


@PROPERTY
@given(text=replies, as_json_body=st.booleans())
@example(text='{"explanation": "A is right.", "verdict": "A"}', as_json_body=True)  # a verdict every method's reader
@example(text="Assistant A is better. [[A]] [[A>B]] Selection: Option 1", as_json_body=True)  # finds, in each grammar
async def test_any_model_reply_ends_in_a_result_or_a_named_error(mcp_app, text: str, as_json_body: bool) -> None:
    def responder(payload: dict) -> Reply | str:
        if as_json_body:  # the text as the message content of a well-formed reply
            return Reply(content=text)
        # the same text as the whole HTTP body: the backend must name the broken reply, not crash
        return Reply(raw_body=text.encode("utf-8", "surrogatepass"))

    server, _ = mcp_app(responder, JUDGE_MCP_MAX_RETRIES="0")
    k = next(counter)
    async with Client(server) as client:
        for tool, arguments in _calls(k):
            _check(tool, await client.call_tool(tool, arguments))


async def test_deeply_nested_json_in_the_answer_is_unparsed_not_a_crash(mcp_app) -> None:
    server, _ = mcp_app(lambda payload: DEEP_OBJECT, JUDGE_MCP_MAX_RETRIES="0")
    async with Client(server) as client:
        results = {tool: await client.call_tool(tool, args) for tool, args in _calls(next(counter))}
    for tool, result in results.items():
        assert not result.is_error, (tool, result.content[0].text)
    assert all(not t["parse_ok"] for t in results["compare_pair"].structured_content["trials"])
    assert results["compare_pair"].structured_content["winner"] is None
    json.dumps(results["grade_score_options"].structured_content)
