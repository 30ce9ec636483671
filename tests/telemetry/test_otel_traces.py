"""OpenTelemetry (the `otel` extra): a span per tool call, a GenAI client span per request sent to a model, a
`gen_ai.evaluation.result` event per verdict, and no judged text in any of them unless the operator opts in.

End to end through the official MCP client over each transport: in memory the spans go to the SDK's
InMemorySpanExporter (tests/otel_spans.Recorder); over stdio and HTTP a `judge-mcp serve` subprocess exports them
over OTLP/HTTP to a loopback receiver (tests/otel_spans.Collector) named by OTEL_EXPORTER_OTLP_ENDPOINT alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from judge_mcp.telemetry import hooks as telemetry, otel as telemetry_otel
from testkit.scripted_servers import Reply
from testkit.scripted_judges import (
    BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge, logprob_content, shown_first, verdict_json,
)
from tests.helpers import as_reply
from tests.otel_spans import Collector, Recorder

SECRET = "sk-judged-SECRETTEXT-5e1f07c2"


class Traces:
    def __init__(self, recorder: Recorder, collector: Collector):
        self.recorder, self.collector = recorder, collector
        self.env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}

    def source(self, transport: str) -> Recorder | Collector:
        return self.recorder if transport == "memory" else self.collector

    def spans(self, transport: str) -> list[dict[str, Any]]:
        return self.source(transport).spans()


@pytest.fixture
def traces(monkeypatch) -> Any:
    """Spans of this test's server, wherever it runs: in process, the Recorder's provider stands in for the global one."""
    recorder, collector = Recorder(), Collector()
    monkeypatch.setattr(telemetry_otel, "current_provider", lambda: recorder.provider)
    monkeypatch.setattr(telemetry, "_on", None)  # restored after the test: later Apps start from off
    yield Traces(recorder, collector)
    collector.stop()


def named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


def evaluation(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [attrs for name, attrs in span["events"] if name == "gen_ai.evaluation.result"]


async def test_a_tool_call_is_a_span_over_its_model_calls_with_its_verdict_as_an_evaluation_event(connect, traces) -> None:
    async with connect(UniversalJudge(), **traces.env) as judged:
        first = await judged.client.call_tool("compare_pair", PAIR)
        again = await judged.client.call_tool("compare_pair", PAIR)  # both orders answered from the call cache
    assert not first.is_error and not again.is_error
    spans = traces.spans(judged.transport)
    tools = named(spans, "execute_tool compare_pair")
    chats = named(spans, "chat ")
    assert len(tools) == 2 and len(chats) == 2  # the cached call sent nothing: no chat span
    tool = tools[0]
    assert tool["kind"] == "INTERNAL"
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attributes"]["gen_ai.tool.name"] == "compare_pair"
    assert tool["attributes"]["judge_mcp.backend"] == "default"
    assert tool["attributes"]["judge_mcp.model"] == "openai/scripted-model"
    assert tool["attributes"]["judge_mcp.outcome"] == "ok"
    assert {t["attributes"]["judge_mcp.verdict_id"] for t in tools} == {first.structured_content["verdict_id"], again.structured_content["verdict_id"]}
    assert sorted((t["attributes"]["judge_mcp.calls"], t["attributes"]["judge_mcp.cached_calls"]) for t in tools) == [(0, 2), (2, 0)]
    for chat in chats:
        a = chat["attributes"]
        assert chat["name"] == "chat scripted-model" and chat["kind"] == "CLIENT"
        assert chat["parent_id"] in {t["span_id"] for t in tools}
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "openai"
        assert a["gen_ai.request.model"] == "scripted-model" and a["gen_ai.response.model"] == "scripted-model"
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 5)
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(judged.backend.base_url.rsplit(":", 1)[1].split("/")[0])
        assert a["gen_ai.response.finish_reasons"] in (["stop"], ("stop",))
        assert "error.type" not in a
    for t in tools:
        (event,) = evaluation(t)
        assert event["gen_ai.evaluation.name"] == "compare_pair"
        assert event["gen_ai.evaluation.score.label"] == "B"
        assert event["gen_ai.evaluation.explanation"] == "both orders agree"
        assert "gen_ai.evaluation.score.value" not in event  # no log-probabilities: no p_better
    if judged.transport != "memory":  # the served process: the MCP SDK's server span is the tool span's parent
        servers = named(spans, "tools/call compare_pair")
        assert {s["kind"] for s in servers} == {"SERVER"}
        assert {t["parent_id"] for t in tools} <= {s["span_id"] for s in servers}
        assert tool["resource"]["service.name"] == "judge-mcp"


def leaky_judge() -> Any:
    """UniversalJudge, quoting the judged text back in every explanation (as models do)."""
    judge = UniversalJudge()

    def respond(payload: dict[str, Any]) -> Reply:
        reply = as_reply(judge(payload))
        try:
            answer = json.loads(reply.content or "")
        except ValueError:
            reply.content = f"{reply.content}\nAs the answer says: {SECRET}"
            return reply
        for key in ("evaluation", "explanation", "REASONING"):
            if key in answer:
                answer[key] = f"{answer[key]} (quoting {SECRET})"
        reply.content = json.dumps(answer)
        return reply

    return respond


SECRET_CALLS = [
    ("compare_pair", {**PAIR, "response_b": f"{GOOD} {SECRET}", "criteria": f"check {SECRET}", "reference": f"Canberra {SECRET}"}),
    ("infer_instruction_reward", {"instruction": f"{RIGHT_INSTRUCTION} {SECRET}", "responses": [BAD, f"{GOOD} {SECRET}"]}),
    ("grade_score_options", {"instruction": f"{CAPITAL_Q} {SECRET}", "options": [BAD, f"{GOOD} {SECRET}"], "criteria": SECRET}),
    ("lwe_judge", {**PAIR, "prompt": f"{CAPITAL_Q} {SECRET}", "session": "otel"}),
    ("compare_pair", {**PAIR, "response_a": SECRET * 10_000}),  # refused: the error names the argument, not its text
]


async def call_all(client: Any) -> list[Any]:
    return [await client.call_tool(tool, arguments) for tool, arguments in SECRET_CALLS]


async def test_judged_text_is_in_no_span_or_event_by_default(connect, traces) -> None:
    async with connect(leaky_judge(), **traces.env) as judged:
        results = await call_all(judged.client)
    assert [r.is_error for r in results] == [False, False, False, False, True]
    source = traces.source(judged.transport)
    spans = source.spans()
    assert len(named(spans, "execute_tool ")) == len(SECRET_CALLS) and named(spans, "chat ")
    assert SECRET not in source.raw()
    assert "SECRETTEXT" not in json.dumps(spans, default=str)


async def test_judged_text_goes_into_spans_when_the_operator_opts_in(connect, traces) -> None:
    if connect.args[0] != "memory":
        pytest.skip("the opt-in is the same code over every transport: checked in memory")
    async with connect(leaky_judge(), **traces.env, JUDGE_MCP_OTEL_CAPTURE_TEXT="1") as judged:
        await call_all(judged.client)
    spans = traces.recorder.spans()
    chat = named(spans, "chat ")[0]["attributes"]
    assert SECRET in chat["gen_ai.input.messages"] and SECRET in chat["gen_ai.output.messages"]
    assert json.loads(chat["gen_ai.output.messages"])[0]["role"] == "assistant"
    tool = named(spans, "execute_tool compare_pair")[0]
    assert SECRET in tool["attributes"]["gen_ai.tool.call.arguments"]
    assert SECRET in evaluation(tool)[0]["gen_ai.evaluation.explanation"]


def pair_with_probs(payload: dict[str, Any]) -> Reply:
    order = "AB" if "Sydney" in shown_first(payload) else "BA"
    p_first = {"AB": 0.2, "BA": 0.9}[order]  # P(the first shown is better): A is better with (0.2 + (1 - 0.9)) / 2 = 0.15
    content = verdict_json(p_first >= 0.5)
    return Reply(content=content, logprobs=logprob_content(content, p_first) if payload.get("logprobs") else None)


async def test_the_score_is_p_better_of_a_and_other_tools_label_their_verdicts(mcp_app, traces) -> None:
    from mcp import Client

    server, _ = mcp_app(pair_with_probs, **traces.env)
    async with Client(server) as client:
        await client.call_tool("compare_pair", PAIR)
    (event,) = evaluation(named(traces.recorder.spans(), "execute_tool compare_pair")[0])
    assert event["gen_ai.evaluation.score.label"] == "B"
    assert event["gen_ai.evaluation.score.value"] == pytest.approx(0.15, abs=0.01)

    server, _ = mcp_app(UniversalJudge(), **traces.env)
    async with Client(server) as client:
        await client.call_tool("grade_score_options", {"instruction": CAPITAL_Q, "options": [BAD, GOOD]})
        await client.call_tool("infer_instruction_reward", {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]})
        await client.call_tool("lwe_judge", {**PAIR, "session": "labels"})
        await client.call_tool("judge_stats", {})
    spans = traces.recorder.spans()
    (grade,) = evaluation(named(spans, "execute_tool grade_score_options")[0])
    assert grade["gen_ai.evaluation.score.label"] == "option 1" and 0.0 <= grade["gen_ai.evaluation.score.value"] <= 1.0
    flip = evaluation(named(spans, "execute_tool infer_instruction_reward")[0])
    assert [e["judge_mcp.response.index"] for e in flip] == [0, 1]
    assert {e["gen_ai.evaluation.score.label"] for e in flip} == {"scored"}
    assert flip[1]["gen_ai.evaluation.score.value"] > flip[0]["gen_ai.evaluation.score.value"]
    (lwe,) = evaluation(named(spans, "execute_tool lwe_judge")[0])
    assert lwe["gen_ai.evaluation.score.label"] == "B"
    stats = named(spans, "execute_tool judge_stats")[0]
    assert evaluation(stats) == [] and stats["attributes"]["judge_mcp.outcome"] == "ok"


async def test_failures_carry_their_error_type_and_anthropic_calls_name_their_provider(mcp_app, traces) -> None:
    from mcp import Client

    server, _ = mcp_app(lambda payload: Reply(status=500, raw_body=f"overloaded {SECRET}".encode()), JUDGE_MCP_MAX_RETRIES="0", **traces.env)
    async with Client(server) as client:
        failed = await client.call_tool("compare_pair", {**PAIR, "swap": False})
        refused = await client.call_tool("compare_pair", {**PAIR, "swap": "sideways"})
    assert failed.is_error and refused.is_error
    spans = traces.recorder.spans()
    chat = named(spans, "chat ")[0]
    assert chat["attributes"]["error.type"] == "500" and chat["status"] == "ERROR"
    tool_failed, tool_refused = named(spans, "execute_tool compare_pair")
    assert tool_failed["attributes"]["error.type"] == "500" and tool_failed["attributes"]["judge_mcp.outcome"] == "error"
    assert tool_refused["attributes"]["error.type"] == "InputError" and tool_refused["status"] == "ERROR"
    assert SECRET not in traces.recorder.raw()

    server, _ = mcp_app(UniversalJudge(), kind="anthropic", **traces.env)
    async with Client(server) as client:
        assert not (await client.call_tool("compare_pair", PAIR)).is_error
    chat = named(traces.recorder.spans(), "chat ")[-1]["attributes"]
    assert chat["gen_ai.provider.name"] == chat["gen_ai.system"] == "anthropic"
    assert chat["gen_ai.usage.input_tokens"] > 0


async def test_the_python_api_traces_its_tool_calls_into_the_host_programs_provider(scripted, traces, tmp_path) -> None:
    from judge_mcp import Judge, JudgeError
    from tests.helpers import app_env

    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db", JUDGE_MCP_OTEL="1", OTEL_TRACES_EXPORTER="none")) as judge:
        pair = await judge.compare_pair(**PAIR)
        with pytest.raises(JudgeError):
            await judge.compare_pair(**{**PAIR, "swap": "sideways"})
    spans = traces.recorder.spans()
    ok, refused = named(spans, "execute_tool compare_pair")
    assert pair.winner == "B" and evaluation(ok)[0]["gen_ai.evaluation.score.label"] == "B"
    assert {c["parent_id"] for c in named(spans, "chat ")} == {ok["span_id"]}
    assert refused["attributes"]["error.type"] == "InputError"
