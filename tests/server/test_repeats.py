"""A slow call survives its client (issue 49): progress at least every heartbeat.EVERY_S while it runs, and the same
call sent again joins the one still running (or, for lwe_judge, is answered again from its result): never judged
twice. Over the official client, in memory, against a scripted backend whose answers take a while."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from judge_mcp.runtime import repeats
from judge_mcp.server import heartbeat
from testkit.scripted_judges import PAIR, LweScript, UniversalJudge, lwe_case
from tests.helpers import delayed


async def test_a_slow_call_sends_progress_between_its_steps_always_increasing(mcp_app, monkeypatch) -> None:
    monkeypatch.setattr(heartbeat, "EVERY_S", 0.2)
    server, _ = mcp_app(delayed(UniversalJudge(), 0.9))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server) as client:
        result = await client.call_tool("compare_pair", {**PAIR, "swap": True}, progress_callback=on_progress)
    assert not result.is_error
    beats = [s for s in seen if s[2] and s[2].startswith("still judging")]
    assert len(beats) >= 2, seen  # ~0.9 s of waiting for the backend, a beat every 0.2 s
    values = [s[0] for s in seen]
    assert all(b > a for a, b in zip(values, values[1:])), values  # MCP: every notification's progress increases
    assert all(total is None or value <= total for value, total, _ in seen)


async def test_without_a_progress_token_nothing_is_sent_and_the_call_answers(mcp_app, monkeypatch) -> None:
    monkeypatch.setattr(heartbeat, "EVERY_S", 0.05)
    server, _ = mcp_app(delayed(UniversalJudge(), 0.3))
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert not result.is_error and result.structured_content["winner"] == "B"


async def test_the_same_call_sent_while_it_runs_joins_it(mcp_app) -> None:
    server, backend = mcp_app(delayed(UniversalJudge(), 0.5))
    results = []
    async with Client(server) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(lambda: _append(results, client.call_tool("compare_pair", PAIR)))
    assert len(backend.requests) == 2  # one judgment: its two orders
    data = [r.structured_content for r in results]
    assert [d["winner"] for d in data] == ["B", "B", "B"]
    joined = [d for d in data if any("joined the same call" in w for w in d["warnings"])]
    assert len(joined) == 2 and len({d["verdict_id"] for d in data}) == 1


async def test_a_call_at_a_temperature_is_never_joined(mcp_app) -> None:

    server, backend = mcp_app(delayed(UniversalJudge(), 0.3))
    args = {"instruction": "Say hi.", "response": "hi", "criteria": "friendly", "samples": 2}
    async with Client(server) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(client.call_tool, "score_response", args)
    assert len(backend.requests) == 4  # two calls, two samples each: new samples are what a repeat asks for


async def test_lwe_judge_sent_again_after_it_answered_is_not_judged_again(mcp_app) -> None:
    script = LweScript("first")  # position-biased: every case is inconsistent, so it buffers feedback
    server, backend = mcp_app(script)
    case = {**lwe_case(1), "session": "again"}
    async with Client(server) as client:
        first = await client.call_tool("lwe_judge", case)
        sent = len(backend.requests)
        again = await client.call_tool("lwe_judge", case)
        shown = await client.call_tool("lwe_session", {"session": "again", "action": "show"})
    assert first.structured_content["path"] == "meta_prompt" and sent >= 4
    assert len(backend.requests) == sent  # nothing sent for the repeat
    assert again.structured_content["verdict_id"] == first.structured_content["verdict_id"]
    assert any("not judged again" in w for w in again.structured_content["warnings"])
    assert shown.structured_content["pending_feedback"] == 1  # buffered once


async def test_a_repeat_waiting_on_a_cancelled_call_runs_it_itself() -> None:
    keeper = repeats.Repeats()
    started, release = anyio.Event(), anyio.Event()
    runs = []

    async def slow() -> str:
        runs.append(1)
        started.set()
        await release.wait()
        return "verdict"

    out = []
    first_scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run_in, first_scope, keeper, slow)
        await started.wait()
        tg.start_soon(lambda: _append(out, keeper.run("k", slow, replay=False)))
        await anyio.sleep(0.05)
        first_scope.cancel()  # the first caller goes away
        await anyio.sleep(0.05)
        release.set()
    assert out == [("verdict", None)] and len(runs) == 2


async def _run_in(scope: anyio.CancelScope, keeper: repeats.Repeats, fn) -> None:
    with scope:
        await keeper.run("k", fn, replay=False)


async def _append(out: list, awaitable) -> None:
    out.append(await awaitable)


@pytest.mark.parametrize("tool", ["compare_pair", "lwe_judge"])
def test_the_key_is_per_tenant_and_per_argument(tool: str) -> None:
    a = repeats.call_key("team-a", tool, {"prompt": "p", "response_a": "x"})
    assert a == repeats.call_key("team-a", tool, {"response_a": "x", "prompt": "p"})
    assert a != repeats.call_key("team-b", tool, {"prompt": "p", "response_a": "x"})
    assert a != repeats.call_key("team-a", tool, {"prompt": "p", "response_a": "y"})
