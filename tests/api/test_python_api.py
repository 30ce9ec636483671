"""The Python API (`from judge_mcp import Judge`): the tools' arguments, checks, results and errors, on the server's
database and settings, against scripted backends speaking the real wire formats; and the README's pytest example
run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from judge_mcp import Judge, JudgeError
from testkit.scripted_servers import Reply
from testkit.scripted_judges import UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.contract.results import ComparePairResult, FlipResult, GradeScoreResult
from judge_mcp.server.build import build_server
from tests.helpers import app_env, make_app

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What is the capital of Australia?"


async def test_the_tools_as_methods_return_the_tools_result_models(scripted, tmp_path: Path) -> None:
    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        pair = await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.", criteria="the right city")
        flip = await judge.infer_instruction_reward(instruction=QUESTION, responses=["Canberra.", "Sydney."])
        grade = await judge.grade_score_options(instruction=QUESTION, options=["Sydney", "Canberra", "Perth"])
    assert isinstance(pair, ComparePairResult) and pair.winner == "B" and pair.consistent is True
    assert isinstance(flip, FlipResult) and flip.best_index == 0
    assert isinstance(grade, GradeScoreResult) and grade.winner_index == 1
    assert len(server.requests) == 2 + 2 + 3  # both orders, one per response, one per rotation


async def test_calls_share_the_servers_database_cache_and_telemetry(scripted, tmp_path: Path) -> None:
    server = scripted(UniversalJudge())
    env = app_env(server, tmp_path / "judge.db")
    async with Judge(env=env) as judge:
        first = await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
    sent = len(server.requests)
    async with Judge(db=tmp_path / "judge.db", env={k: v for k, v in env.items() if k != "JUDGE_MCP_DB"}) as judge:
        again = await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
        stats = await judge.judge_stats(last=10)
    assert len(server.requests) == sent  # a new Judge on the same file answers from the call cache
    assert again.winner == first.winner == "B" and again.usage.cached_calls == 2
    assert stats.all_time.verdicts == 2 and [(g.tool, g.verdicts) for g in stats.all_time.groups] == [("compare_pair", 2)]
    app = make_app(env)  # the MCP server on the same database counts the Python API's verdicts
    try:
        async with Client(build_server(app)) as client:
            served = await client.call_tool("judge_stats", {"last": 10})
    finally:
        await app.aclose()
    assert served.structured_content["all_time"]["verdicts"] == 2


async def test_bad_arguments_raise_judge_error_naming_them(scripted, tmp_path: Path) -> None:
    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        with pytest.raises(JudgeError, match="response_b"):
            await judge.compare_pair(prompt=QUESTION, response_a="Sydney.")
        with pytest.raises(JudgeError, match="colour"):
            await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.", colour="red")
        with pytest.raises(JudgeError, match="swap"):
            await judge.compare_pair(prompt=QUESTION, response_a="a", response_b="b", swap="yes please")
        with pytest.raises(JudgeError, match="nope"):
            await judge.compare_pair(prompt=QUESTION, response_a="a", response_b="b", backend="nope")
    assert server.requests == []


async def test_a_failing_backend_raises_after_its_retries(scripted, tmp_path: Path) -> None:
    server = scripted(lambda payload: Reply(status=500))
    env = app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="1")
    async with Judge(env=env) as judge:
        with pytest.raises(JudgeError, match="500"):
            await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
    assert 2 <= len(server.requests) <= 4  # each order: the call and one retry, then reported


async def test_an_unparsed_answer_is_a_result_that_says_so(scripted, tmp_path: Path) -> None:
    server = scripted(lambda payload: "I would rather not say.")
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        result = await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
    assert result.winner is None and all(not t.parse_ok for t in result.trials)


async def test_backend_names_the_toml_backend_calls_use_by_default(scripted, tmp_path: Path) -> None:
    first, second = scripted(UniversalJudge()), scripted(UniversalJudge())
    toml = tmp_path / "backends.toml"
    toml.write_text(
        f'[backends.one]\nkind = "openai"\nbase_url = "{first.base_url}"\nmodel = "m1"\n'
        f'[backends.two]\nkind = "openai"\nbase_url = "{second.base_url}"\nmodel = "m2"\n'
    )
    async with Judge(db=tmp_path / "judge.db", config=toml, backend="two") as judge:
        result = await judge.compare_pair(prompt=QUESTION, response_a="Sydney.", response_b="Canberra.")
        named = await judge.compare_pair(prompt=QUESTION, response_a="Perth.", response_b="Canberra.", backend="one")
    assert result.model.endswith("m2") and named.model.endswith("m1")
    assert len(second.requests) == 2 and len(first.requests) == 2
    with pytest.raises(JudgeError, match="three"):
        Judge(db=tmp_path / "judge.db", config=toml, backend="three")


def test_a_configuration_error_is_raised_at_construction(tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match="JUDGE_MCP_BACKEND"):
        Judge(db=tmp_path / "judge.db", env={"JUDGE_MCP_BACKEND": "carrier-pigeon"})


def test_importing_the_package_does_not_load_the_api() -> None:
    code = "import sys, judge_mcp; assert 'judge_mcp.api' not in sys.modules and 'mcp' not in sys.modules; judge_mcp.Judge"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_readme_pytest_example_runs_as_written(scripted, tmp_path: Path) -> None:
    section = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    example = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(example) == 1
    (tmp_path / "test_drafts.py").write_text(example[0], encoding="utf-8")
    server = scripted(UniversalJudge(good="one thread at a time"))
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=server.base_url, JUDGE_MCP_MODEL="scripted-model",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_drafts.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and len(server.requests) == 2


async def test_the_methods_take_conversations_and_trajectories(scripted, tmp_path: Path) -> None:
    from judge_mcp import Message, ToolCall

    chat = [Message(role="system", content="Answer in one word."), {"role": "user", "content": QUESTION}]
    good = [Message(role="assistant", tool_calls=[ToolCall(id="c1", name="atlas", arguments={"country": "Australia"})]),
            Message(role="tool", tool_call_id="c1", content="capital: Canberra"), Message(role="assistant", content="Canberra.")]
    bad = [{"role": "assistant", "content": "Sydney."}]
    server = scripted(UniversalJudge())
    async with Judge(env=app_env(server, tmp_path / "judge.db")) as judge:
        pair = await judge.compare_pair(prompt=chat, response_a=bad, response_b=good)
        grade = await judge.grade_score_options(instruction=chat, options=[bad, good])
        flip = await judge.infer_instruction_reward(instruction=QUESTION, responses=[good, bad], context=chat)
        lwe = await judge.lwe_judge(prompt=chat, response_a=bad, response_b=good, session="traj")
        checked = await judge.grade_score_options(instruction=chat, options=[bad, good], unrelated_option=True)
        with pytest.raises(JudgeError, match="'response_a' message 0 has role 'user'"):
            await judge.compare_pair(prompt=chat, response_a=[{"role": "user", "content": "x"}], response_b=good)
        stats = await judge.judge_stats()
    assert (pair.winner, grade.winner_index, flip.best_index, lwe.winner, checked.winner_index) == ("B", 1, 0, "B", 1)
    assert checked.unrelated_index == 2 and checked.unrelated_option  # a text from the built-in pool beside two runs
    shown = "\n".join(m["content"] if isinstance(m["content"], str) else "" for r in server.requests for m in r["messages"])
    assert '<|The Start of Tool Call 1.1: atlas (id c1)|>\n{"country": "Australia"}' in shown
    assert {g.inputs for g in stats.all_time.groups} == {"conversation+trajectory"}


PRELOAD_WHILE_AN_API_CALL_RUNS = """
import asyncio, sys
from judge_mcp import Judge
from judge_mcp.methods import registry
from testkit.scripted_judges import UniversalJudge
from testkit.scripted_servers import ScriptedServer
from tests.helpers import app_env

answer, seen = UniversalJudge(), []

def responder(payload):
    if not seen:  # the call is at its backend: the preload starts now, while it runs
        waiting = [m for m in registry.METHOD_MODULES if m not in sys.modules]
        thread = registry.preload()
        thread.join(0.3)  # (a chance to import what it should not)
        seen.append((waiting, [m for m in waiting if m in sys.modules], thread))
    return answer(payload)

async def main():
    async with Judge(env=app_env(server, sys.argv[1])) as judge:
        await judge.compare_pair(prompt="q", response_a="a", response_b="b", swap=False)

with ScriptedServer(responder) as server:
    asyncio.run(main())
waiting, imported, thread = seen[0]
assert waiting and not imported, f"the preload imported {imported} while the call ran"
thread.join(60)  # the call over: the preload imports the rest
assert not thread.is_alive() and all(m in sys.modules for m in registry.METHOD_MODULES)
print("ok")
"""


def test_the_methods_preload_waits_while_an_api_call_runs(tmp_path: Path) -> None:
    """A call of the Python API holds the methods' preload off as a tool call does (registry.judging): it does not
    share the interpreter with the other methods' imports (a fresh interpreter: this one has imported them all)."""
    done = subprocess.run([sys.executable, "-c", PRELOAD_WHILE_AN_API_CALL_RUNS, str(tmp_path / "judge.db")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
