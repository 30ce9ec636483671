"""The `sampling` backend end to end: judge-mcp asks the model of the MCP client that called the tool, through
sampling/createMessage, and the official client's sampling callback (tests/connect.ClientModel) plays the judge.

Over each transport (memory, stdio, streamable HTTP): a client on the initialize handshake (`mode="legacy"`) is asked
mid-call; a client on the 2026-07-28 protocol (the official client's default) gets the requests in input_required
rounds and calls again with the answers. A client without sampling, and a handshake client over stateless HTTP (no
channel back to it), get an error naming the problem."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from testkit.scripted_judges import CASES, GOOD, PAIR, UniversalJudge, method_of, reasked, shown_first
from tests.connect import TRANSPORTS, ClientModel, connect

pytestmark = pytest.mark.anyio


def text_judge(payload: dict[str, Any]) -> str:
    """A judge answering in the papers' text grammars (sampling has no structured output): compare_pair names the
    answer mentioning Sydney the worse one, wherever it is shown; the other tools as UniversalJudge."""
    if method_of(payload) == "compare_pair":
        return "My final verdict is: " + ("[[B>A]]" if "Sydney" in shown_first(payload) else "[[A>B]]")
    return str(UniversalJudge()(payload))


def sampling_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"JUDGE_MCP_BACKEND": "sampling", "JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_MAX_RETRIES": "1", **extra}


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def cache_rows(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT backend, model FROM call_cache ORDER BY backend").fetchall()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_compare_pair_asks_the_clients_model_in_both_orders(transport: str, tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="claude-sonnet-4-5")
    env = sampling_env(tmp_path, JUDGE_MCP_MODEL="sonnet")
    async with connect(transport, env, tmp_path, sampling_callback=model, mode="legacy") as client:
        result = await client.call_tool("compare_pair", PAIR)
        again = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["winner"] == "B" and out["consistent"] is True
    assert out["model"] == "sampling/claude-sonnet-4-5"  # the model the client reported, not the hint
    assert len(model.requests) == 2  # both orders, each one createMessage request
    shown_first = sorted(GOOD in p.messages[0].content_as_list[0].text.split("Assistant B")[0] for p in model.requests)
    assert shown_first == [False, True]  # A first in one request, B first in the other
    for params in model.requests:
        assert params.temperature == 0 and params.max_tokens > 0
        assert params.model_preferences.hints[0].name == "sonnet"
        assert params.system_prompt or params.messages[0].role == "user"
    # the self-preference guard warns by default: the client's own model may be the author of what it judges
    assert any("self-preference risk" in w and "MCP client's own model" in w for w in out["warnings"])
    # the repeat in the same MCP session is answered from the call cache, keyed by the session and the model it reported
    assert again.structured_content["winner"] == "B" and again.structured_content["usage"]["cached_calls"] == 2
    assert len(model.requests) == 2
    rows = cache_rows(tmp_path / "judge.db")
    assert len(rows) == 2 and len(set(rows)) == 1 and rows[0][1] == "claude-sonnet-4-5"
    assert re.fullmatch(r"sampling\|[0-9a-f]{32}\|claude-sonnet-4-5", rows[0][0])  # the session's random key, the model


@pytest.mark.parametrize("tool", ["infer_instruction_reward", "grade_score_options"])
async def test_other_tools_judge_with_the_clients_model(tool: str, tmp_path: Path) -> None:
    model = ClientModel(text_judge)
    arguments, read, right = CASES[tool]
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert read(result.structured_content) == right
    assert result.structured_content["model"] == "sampling/client-model-1"
    assert len(model.requests) == len(arguments.get("responses") or arguments["options"])
    assert any("self-preference risk" in w for w in result.structured_content["warnings"])


async def test_response_models_of_another_family_leave_no_warning_and_the_same_family_is_named(tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="claude-sonnet-4-5")
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        other = await client.call_tool("compare_pair", {**PAIR, "response_models": ["gpt-4o", "gemini-2.0-flash"]})
        same = await client.call_tool("compare_pair", {**PAIR, "response_models": ["gpt-4o", "claude-opus-4"]})
    assert other.structured_content["warnings"] == [] and other.structured_content["self_preference"] == []
    found = same.structured_content["self_preference"]
    assert [(p["judge_model"], p["families"], p["answers"]) for p in found] == [("sampling/claude-sonnet-4-5", ["anthropic"], [1])]
    assert any("anthropic family" in w for w in same.structured_content["warnings"])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_client_without_sampling_gets_an_error_naming_it(transport: str, tmp_path: Path) -> None:
    async with connect(transport, sampling_env(tmp_path), tmp_path, mode="legacy") as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert result.is_error
    message = text_of(result)
    assert "did not declare the sampling capability" in message and "JUDGE_MCP_BACKEND" in message


async def test_a_client_that_declines_gets_the_clients_error_once(tmp_path: Path) -> None:
    declined = ClientModel(lambda payload: types.ErrorData(code=-1, message="User rejected sampling request"))
    async with connect("memory", sampling_env(tmp_path, JUDGE_MCP_MAX_RETRIES="3"), tmp_path, sampling_callback=declined, mode="legacy") as client:
        result = await client.call_tool("compare_pair", {**PAIR, "swap": False})
    assert result.is_error and "User rejected sampling request" in text_of(result)
    assert len(declined.requests) == 1  # a refusal is not asked again (that would ask the user again)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_client_answers_in_input_required_rounds(transport: str, tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="claude-sonnet-4-5")
    async with connect(transport, sampling_env(tmp_path), tmp_path, sampling_callback=model) as client:
        assert client.protocol_version == "2026-07-28"  # no request from server to client mid-call on this protocol
        result = await client.call_tool("compare_pair", PAIR)
        again = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert (out["winner"], out["consistent"], out["model"]) == ("B", True, "sampling/claude-sonnet-4-5")
    assert len(model.requests) == 4  # each call: both orders, in one input_required round, then the call again with the answers
    assert any("self-preference risk" in w for w in out["warnings"])
    # this protocol has no session: each call is a client of its own, and a sampling answer is never served to
    # another (issue 34: another client's model could have said anything), so the repeat asks the model again
    assert again.structured_content["usage"]["cached_calls"] == 0 and len(model.requests) == 4
    with sqlite3.connect(tmp_path / "judge.db") as conn:  # one verdict row for the call, however many rounds it took
        assert conn.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 2


async def test_a_2026_client_leaves_no_cache_rows_none_could_read(tmp_path: Path) -> None:
    """On the 2026-07-28 protocol each request is a session of its own, so an answer stored under it is never served
    again. Such rows used to be written on every round (6 for one compare_pair with a re-ask), read by nothing."""
    def unsure_first(payload: dict[str, Any]) -> str:
        return text_judge(payload) if reasked(payload) else "Both answers have merits."

    model = ClientModel(unsure_first)
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model) as client:
        for _ in range(2):
            result = await client.call_tool("compare_pair", PAIR)
            assert not result.is_error and result.structured_content["winner"] == "B", text_of(result)
            assert result.structured_content["usage"]["cached_calls"] == 0
    assert len(model.requests) == 8  # each call: both orders, then both re-asks
    assert cache_rows(tmp_path / "judge.db") == []


async def test_a_request_that_needs_an_earlier_answer_goes_in_the_next_round(tmp_path: Path) -> None:
    def unsure_first(payload: dict[str, Any]) -> str:  # no verdict until re-asked, which carries the first answer
        return text_judge(payload) if reasked(payload) else "Both answers have merits."

    model = ClientModel(unsure_first)
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model) as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error, text_of(result)
    assert result.structured_content["winner"] == "B"
    assert [t["reasked"] for t in result.structured_content["trials"]] == [True, True]
    assert len(model.requests) == 4  # round one: both orders; round two: both re-asks


async def test_a_2026_client_over_stateless_http_is_asked_too(tmp_path: Path) -> None:
    model = ClientModel(text_judge)
    async with connect("http", sampling_env(tmp_path, JUDGE_MCP_HTTP_STATELESS="1"), tmp_path, sampling_callback=model) as client:
        result = await client.call_tool("grade_score_options", CASES["grade_score_options"][0])
    assert not result.is_error, text_of(result)
    assert result.structured_content["winner_index"] == 1 and len(model.requests) == 3


async def test_a_2026_client_without_sampling_gets_an_error_naming_it(tmp_path: Path) -> None:
    async with connect("memory", sampling_env(tmp_path), tmp_path) as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert result.is_error and "did not declare the sampling capability" in text_of(result)


async def test_stateless_http_with_a_handshake_client_gets_an_error_naming_it(tmp_path: Path) -> None:
    model = ClientModel(text_judge)
    env = sampling_env(tmp_path, JUDGE_MCP_HTTP_STATELESS="1")
    async with connect("http", env, tmp_path, sampling_callback=model, mode="legacy") as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert result.is_error
    assert "stateless HTTP" in text_of(result) and "JUDGE_MCP_BACKEND" in text_of(result)
    assert model.requests == []


async def test_the_verdict_log_names_the_clients_model(tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="gpt-4.1")
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        await client.call_tool("compare_pair", PAIR)
    with sqlite3.connect(tmp_path / "judge.db") as conn:
        backend, judged_by, output = conn.execute("SELECT backend, model, output FROM verdicts").fetchone()
    assert (backend, judged_by) == ("default", "sampling/gpt-4.1")
    assert json.loads(output)["winner"] == "B"


async def test_images_reach_the_clients_model_as_image_content(tmp_path: Path) -> None:
    from tests.image_data import png, uri

    model = ClientModel(text_judge)
    screenshots = {**PAIR, "response_a_images": [uri(png(1))], "response_b_images": [uri(png(2))]}
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        result = await client.call_tool("compare_pair", screenshots)
    assert not result.is_error, text_of(result)
    for params in model.requests:
        blocks = params.messages[0].content_as_list
        assert blocks[0].type == "text" and "<|User Prompt|>" in blocks[0].text  # the prompt, then captions and images
        images = [b for b in blocks if b.type == "image"]
        assert len(images) == 2 and {i.mime_type for i in images} == {"image/png"}
        assert {i.data for i in images} == {base64.b64encode(png(1)).decode(), base64.b64encode(png(2)).decode()}


async def test_a_client_that_never_answers_gets_a_bounded_timeout(tmp_path: Path) -> None:
    asked = anyio.Event()
    requests: list[Any] = []

    async def silent(context: Any, params: Any) -> Any:
        requests.append(params)
        asked.set()
        await anyio.sleep_forever()

    env = sampling_env(tmp_path, JUDGE_MCP_TIMEOUT_S="0.5", JUDGE_MCP_MAX_RETRIES="3")
    async with connect("memory", env, tmp_path, sampling_callback=silent, mode="legacy") as client:
        result = await client.call_tool("compare_pair", {**PAIR, "swap": False})
    assert result.is_error and "timed out after 0.5s" in text_of(result)
    assert len(requests) == 2  # one timed-out attempt is retried once (the backends' retry policy), then it gives up


async def test_a_panel_member_on_the_clients_model_carries_the_warning(tmp_path: Path) -> None:
    from tests.helpers import start_scripted

    scripted = start_scripted(text_judge)
    toml = tmp_path / "backends.toml"
    toml.write_text(f'[backends.client]\nkind = "sampling"\nmodel = "sonnet"\nintelligence_priority = 0.9\n\n'
                    f'[backends.other]\nkind = "openai"\nbase_url = "{scripted.base_url}"\nmodel = "scripted-model"\nstructured_output = "off"\n')
    model = ClientModel(text_judge, model="claude-sonnet-4-5")
    env = {"JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_MAX_RETRIES": "1"}
    try:
        async with connect("memory", env, tmp_path, sampling_callback=model, mode="legacy") as client:
            result = await client.call_tool("compare_pair", {**PAIR, "backends": ["client", "other"]})
    finally:
        scripted.stop()
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["winner"] == "B"
    assert {m["backend"]: m["model"] for m in out["panel"]} == {"client": "sampling/claude-sonnet-4-5", "other": "openai/scripted-model"}
    assert [w for w in out["warnings"] if "self-preference" in w] == [
        w for w in out["warnings"] if "judge 'client' is the MCP client's own model (sampling/claude-sonnet-4-5)" in w
    ] != []
    preferences = model.requests[0].model_preferences
    assert preferences.hints[0].name == "sonnet" and preferences.intelligence_priority == 0.9


async def test_the_cache_follows_the_model_the_client_reports(tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="model-one")
    other_pair = {**PAIR, "prompt": "Which city is Australia's capital?"}
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        await client.call_tool("compare_pair", PAIR)  # asked: no model known yet, stored under model-one
        model.model = "model-two"  # the user switches the client's model
        first = await client.call_tool("compare_pair", PAIR)  # looked up under model-one, the last one reported: its answers
        switched = await client.call_tool("compare_pair", other_pair)  # a miss: asked, and the answers say model-two
        again = await client.call_tool("compare_pair", PAIR)  # now looked up under model-two: asked again
        repeat = await client.call_tool("compare_pair", other_pair)
    assert first.structured_content["usage"]["cached_calls"] == 2 and first.structured_content["model"] == "sampling/model-one"
    assert switched.structured_content["usage"]["calls"] == 2 and switched.structured_content["model"] == "sampling/model-two"
    assert again.structured_content["usage"]["calls"] == 2 and again.structured_content["model"] == "sampling/model-two"
    assert repeat.structured_content["usage"]["cached_calls"] == 2
    assert len(model.requests) == 6
    assert sorted({(backend.split("|")[2], model) for backend, model in cache_rows(tmp_path / "judge.db")}) == [
        ("model-one", "model-one"), ("model-two", "model-two")
    ]


async def test_an_answer_without_a_model_name_is_not_cached(tmp_path: Path) -> None:
    model = ClientModel(text_judge, model="")
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=model, mode="legacy") as client:
        await client.call_tool("compare_pair", PAIR)
        again = await client.call_tool("compare_pair", PAIR)
    assert again.structured_content["usage"]["calls"] == 2 and again.structured_content["model"] == "sampling/client"
    assert cache_rows(tmp_path / "judge.db") == []


async def test_a_2026_client_that_declines_ends_the_call_on_its_side(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    declined = ClientModel(lambda payload: types.ErrorData(code=-1, message="User rejected sampling request"))
    async with connect("memory", sampling_env(tmp_path), tmp_path, sampling_callback=declined) as client:
        with pytest.raises(MCPError, match="User rejected sampling request"):  # the official client stops the rounds
            await client.call_tool("compare_pair", PAIR)
    assert len(declined.requests) == 2


async def test_a_2026_panel_of_the_clients_model_and_a_server(tmp_path: Path) -> None:
    from tests.helpers import start_scripted

    scripted = start_scripted(text_judge)
    toml = tmp_path / "backends.toml"
    toml.write_text(f'[backends.client]\nkind = "sampling"\n\n'
                    f'[backends.other]\nkind = "openai"\nbase_url = "{scripted.base_url}"\nmodel = "scripted-model"\nstructured_output = "off"\n')
    model = ClientModel(text_judge, model="gpt-4.1")
    env = {"JUDGE_MCP_DB": str(tmp_path / "judge.db"), "JUDGE_MCP_CONFIG": str(toml), "JUDGE_MCP_MAX_RETRIES": "1"}
    try:
        async with connect("memory", env, tmp_path, sampling_callback=model) as client:
            result = await client.call_tool("compare_pair", {**PAIR, "backends": ["client", "other"], "response_models": ["gpt-4o", "x"]})
    finally:
        scripted.stop()
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["winner"] == "B" and [m["status"] for m in out["panel"]] == ["ok", "ok"]
    assert len(model.requests) == 2
    # the client reported gpt-4.1, of the family of response_a's author: the guard names it once the model is known
    assert [(p["backend"], p["judge_model"], p["answers"]) for p in out["self_preference"]] == [("client", "sampling/gpt-4.1", [0])]
    assert [w for w in out["warnings"] if "self-preference" in w] == [
        "self-preference risk: judge 'client' (sampling/gpt-4.1) is of the openai family, like the author of response_a (by gpt-4o); "
        "judges tend to favour their own family's answers"
    ]
    with sqlite3.connect(tmp_path / "judge.db") as conn:
        assert conn.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 1
