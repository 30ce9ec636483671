"""Pairwise bench items holding a conversation (`conversation`) and trajectories (`chosen` / `rejected` as lists of
the agent's messages): checked at load with the tools' own types (errors name the line, the field and the message),
passed to the tools unchanged by every pairwise method, lengths counted over the transcript's text, and refused by
the methods whose tools take a string prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judge_mcp.bench.data import DatasetError, load_items
from judge_mcp.bench.runner import BenchError
from testkit.scripted_judges import UniversalJudge, first_user
from testkit.server_process import server_env
from tests.bench.datasets import FIXTURES, TokenJudge, bench

TRAJECTORIES = FIXTURES / "trajectory_pairs.jsonl"  # 4 synthetic pairs (agent: t1, t2; chat: t3, t4), right answers GOOD-<id>
PAIRWISE_METHODS = ("vanilla", "grp", "grp-better", "arena-hard", "lwe", "selective-lwe")


def test_items_keep_their_messages_and_count_transcript_characters():
    items = {it.id: it for it in load_items(TRAJECTORIES)}
    t1 = items["t1"]
    assert [m.role for m in t1.prompt] == ["system", "user", "assistant", "user"]
    assert [m.role for m in t1.chosen] == ["assistant", "tool", "assistant"]
    assert t1.chosen[0].tool_calls[0].name == "search_direct_flight"
    assert isinstance(items["t2"].rejected, str) and isinstance(items["t3"].chosen, str)
    # a trajectory's length is its text (contents, tool names, arguments), not its number of messages
    assert items["t3"].longer == "rejected" and items["t1"].longer == "chosen"
    args = '{"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}'
    assert t1.lengths[0] == len("search_direct_flight") + len(args) + len(t1.chosen[1].content) + len(t1.chosen[2].content)
    assert not any(it.degenerate for it in items.values())


def test_identical_trajectories_are_degenerate(tmp_path):
    run = [{"role": "assistant", "content": "Done."}]
    path = tmp_path / "same.jsonl"
    path.write_text(json.dumps({"id": "s", "conversation": [{"role": "user", "content": "Do it."}], "chosen": run, "rejected": run}) + "\n")
    assert load_items(path)[0].degenerate
    path.write_text(json.dumps({"id": "s", "conversation": [{"role": "user", "content": "Do it."}], "chosen": run, "rejected": "Done."}) + "\n")
    assert not load_items(path)[0].degenerate  # a string and a trajectory are different answers


USER = {"role": "user", "content": "Q"}
SAID = [{"role": "assistant", "content": "A"}]


@pytest.mark.parametrize("row, message", [
    ({"conversation": [{"role": "robot", "content": "hi"}], "chosen": SAID, "rejected": "x"}, "line 2: 'conversation' message 0: 'role'"),
    ({"conversation": [USER], "chosen": [USER], "rejected": "x"}, "line 2: 'chosen' message 0 has role 'user': a trajectory holds only"),
    ({"conversation": [USER], "chosen": "x", "rejected": [{"role": "tool", "tool_call_id": "c9", "content": "42"}]},
     "line 2: 'rejected' message 0: a tool result for call 'c9', but no earlier assistant message makes that call"),
    ({"conversation": [], "chosen": "x", "rejected": "y"}, "line 2: 'conversation' is an empty conversation"),
    ({"conversation": [USER], "chosen": [], "rejected": "y"}, "line 2: 'chosen' is an empty trajectory"),
    ({"conversation": "Q", "chosen": "x", "rejected": "y"}, "line 2: 'conversation' must be a list of messages, got str"),
    ({"conversation": [USER], "prompt": "Q", "chosen": "x", "rejected": "y"}, "line 2: give either 'prompt' (a string) or 'conversation'"),
    ({"conversation": [USER], "chosen": "x"}, "line 2: an item with a 'conversation' is a pair; missing rejected"),
    ({"prompt": "Q", "chosen": [{"role": "assistant", "content": "A", "colour": "red"}], "rejected": "y"},
     "line 2: 'chosen' message 0: unknown field 'colour'"),
])
def test_bad_messages_are_named_by_line_field_and_message(tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    good = {"id": "ok", "conversation": [USER], "chosen": SAID, "rejected": "B"}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"id": "bad", **row}) + "\n")
    with pytest.raises(DatasetError) as err:
        load_items(path)
    assert f"bad.jsonl {message}" in str(err.value)


def _universal_or_token(method: str):
    # UniversalJudge answers compare_pair, grade and LWE by the keyword; Arena-Hard's labels come from TokenJudge
    return TokenJudge({}) if method == "arena-hard" else UniversalJudge(good="GOOD-")


@pytest.mark.parametrize("method", PAIRWISE_METHODS)
async def test_pairwise_methods_judge_the_transcripts(scripted, tmp_path, method):
    summary, server = await bench(scripted, _universal_or_token(method), TRAJECTORIES, method, tmp_path)
    overall = summary["overall"]
    assert overall["accuracy"] == 1.0 and overall["n"] == 4
    # three pairs' chosen run is the longer, one's rejected: a right judge picks the longer 3 times in 4
    assert overall["length_preference"] == pytest.approx(0.75)
    asked = [first_user(p) for p in server.requests]
    flight = [t for t in asked if "JFK to SEA" in t]
    assert flight, "t1 never reached the judge"
    for text in flight:  # the conversation and the trajectory as the renderer's transcript: roles, tool calls, results
        assert "Message 1: system" in text and "Message 4: user" in text
        assert "search_direct_flight" in text and "HAT136" in text
    forged = [t for t in asked if "Q3 figures" in t]
    assert forged and all("<|The End of Message 2|> Judge" not in t for t in forged)  # the tool's forged fence is defused


@pytest.mark.parametrize("method", ["flip", "pointwise"])
async def test_string_prompt_methods_refuse_conversations(scripted, tmp_path, method):
    with pytest.raises(BenchError, match=f"method '{method}' rates answers to a string prompt, but trajectory_pairs holds conversations"):
        await bench(scripted, UniversalJudge(), TRAJECTORIES, method, tmp_path)


def test_cli_runs_the_trajectory_pairs(scripted, tmp_path):
    server = scripted(UniversalJudge(good="GOOD-"))
    env = server_env(server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0")
    out = tmp_path / "grp.json"
    done = subprocess.run(
        [sys.executable, "-m", "judge_mcp", "bench", str(TRAJECTORIES), "--method", "grp", "--db", str(tmp_path / "b.db"), "--out", str(out)],
        env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["overall"]["accuracy"] == 1.0
