"""`judge-mcp demo`: every tool the server offers is called once, each verdict is said in words (what "no verdict"
means included), progress is printed while a call runs, and on the embedded model the answers are capped by a
setting of the demo's own server (not by a changed default)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from testkit.scripted_judges import UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.cli.demo import DEMO_MAX_OUTPUT_TOKENS, STEPS, server_environment
from judge_mcp.cli.demo_text import flip_lines, grade_lines, pair_lines, small_model_note, stats_lines
from judge_mcp.server.build import build_server
from tests.helpers import delayed, make_app


async def test_the_demo_calls_every_tool_the_server_offers(tmp_path: Path) -> None:
    app = make_app({"JUDGE_MCP_DB": str(tmp_path / "judge.db")})
    try:
        async with Client(build_server(app)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
    finally:
        await app.aclose()
    assert {s.tool for s in STEPS} == tools  # each tool; compare_pair twice: two answers, then two agent runs (trajectories)
    assert sorted(s.tool for s in STEPS) == sorted([*tools, "compare_pair"])


def _demo(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judge_mcp", "demo"], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def test_the_demo_says_each_tools_inputs_and_verdict_and_exits_0(scripted, tmp_path: Path) -> None:
    backend = scripted(delayed(UniversalJudge(), 1.2))  # slow enough for the server's progress to show
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = _demo(env, tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for n, step in enumerate(STEPS, 1):
        assert f"[{n}/{len(STEPS)}] {step.tool}:" in out
    assert "question: What is the capital of Australia?" in out and "answer B: Canberra." in out
    assert out.count("VERDICT: B is better (both orders agree).") == 2  # the two answers, the two agent runs
    assert " ".join(out.split()).count("run B: calls search({\"q\": \"capital of Australia\"}); search returns 'Canberra is the capital") == 1
    assert "... order AB judged" in out or "... order BA judged" in out  # progress while the call ran
    assert f"{len(STEPS)} of {len(STEPS)} tool calls succeeded" in out
    assert "Answers are capped" not in out and "JUDGE_MCP_MAX_OUTPUT_TOKENS" not in str(backend.requests)  # a real judge keeps its budgets
    assert max(r["max_tokens"] for r in backend.requests) > DEMO_MAX_OUTPUT_TOKENS


def test_the_demo_exits_1_when_a_call_fails(scripted, tmp_path: Path) -> None:
    from testkit.scripted_servers import Reply

    backend = scripted(lambda p: Reply(status=400))
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = _demo(env, tmp_path)
    assert proc.returncode == 1
    out = proc.stdout
    assert out.count("FAILED after") == 1 and out.count("HTTP 400") == 1  # said once, not once per step
    assert f"[2/{len(STEPS)}]" not in out and f"the {len(STEPS) - 1} step(s) left would fail the same way" in out
    assert f"0 of {len(STEPS)} tool calls succeeded" in out
    assert len(backend.requests) <= 2  # compare_pair's two orders; nothing after the stop


def test_the_demo_keeps_its_verdicts_out_of_the_users_database_unless_one_is_named(scripted, tmp_path: Path) -> None:
    backend = scripted(UniversalJudge())
    home = tmp_path / "home"
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model",
                    HOME=str(home), XDG_DATA_HOME=str(home / "data"))
    proc = _demo(env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(database: a temporary one, removed now; --db PATH keeps the verdicts)" in " ".join(proc.stdout.split())
    assert not list(home.rglob("*.db"))  # nothing written to the per-user database
    kept = tmp_path / "kept.db"
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "demo", "--db", str(kept)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0 and f"(database:{kept})" in "".join(proc.stdout.split())  # wrapped at 110 columns
    with sqlite3.connect(kept) as db:
        assert db.execute("SELECT count(*) FROM verdicts").fetchone()[0] >= 6


def test_only_a_backend_failure_stops_the_demo() -> None:
    from judge_mcp.cli.demo import backend_failed

    assert backend_failed("Error executing tool compare_pair: backend 'default' (openai at http://x/v1, model m) failed: HTTP 400")
    assert backend_failed("backend 'judge' failed after 3 attempts: timed out")
    assert not backend_failed("Error executing tool record_label: unknown verdict_id 'v1'")
    assert not backend_failed("Error executing tool compare_pair: response_a: the backend 'x' is not configured")


def test_the_answer_cap_is_the_demos_own_setting_for_the_embedded_model_only(monkeypatch) -> None:
    monkeypatch.delenv("JUDGE_MCP_MAX_OUTPUT_TOKENS", raising=False)
    env, note = server_environment("local")
    assert env["JUDGE_MCP_MAX_OUTPUT_TOKENS"] == str(DEMO_MAX_OUTPUT_TOKENS) and "capped" in note
    env, note = server_environment("openai")
    assert "JUDGE_MCP_MAX_OUTPUT_TOKENS" not in env and note is None
    monkeypatch.setenv("JUDGE_MCP_MAX_OUTPUT_TOKENS", "512")  # the user's own setting wins
    env, note = server_environment("local")
    assert env["JUDGE_MCP_MAX_OUTPUT_TOKENS"] == "512" and note is None


# ---- the words ----------------------------------------------------------------------------------------------------
def _trial(order: str, better: str | None, parse_ok: bool = True, reason: str | None = None) -> dict:
    return {"order": order, "better": better, "label": None, "parse_ok": parse_ok, "unparsed_reason": reason}


def test_no_verdict_is_explained_as_a_position_habit_or_an_unreadable_answer() -> None:
    biased = {"winner": None, "consistent": False, "goal": "worse", "trials": [_trial("AB", "A"), _trial("BA", "B")]}
    text = " ".join(pair_lines(biased))
    assert "VERDICT: none (winner: null, consistent: false)" in text and "named the answer shown first both times" in text
    assert "the model called B the worse answer, so A is better" in text
    assert "135 million parameters" in small_model_note("compare_pair", biased) and "names B" in small_model_note("compare_pair", biased)
    unread = {"winner": None, "consistent": False, "goal": "worse", "trials": [_trial("AB", None, False, "truncated"), _trial("BA", "B")]}
    text = " ".join(pair_lines(unread))
    assert "could not be read (it was cut off at the token limit)" in text and "never guesses" in text
    assert small_model_note("compare_pair", {"winner": "B"}) is None


def test_a_tied_grade_is_no_pick_whatever_winner_index_says() -> None:
    trials = [{"order": o, "selected_position": 0, "selected_index": o[0], "parse_ok": True} for o in ([0, 1, 2], [2, 0, 1], [1, 2, 0])]
    data = {"trials": trials, "parsed_trials": 3, "tied_indices": [0, 1, 2], "winner_index": 0, "option_counts": [1, 1, 1],
            "position_counts": [3, 0, 0], "grade_score": 0.0, "llm_score": 0.0, "choice_score": 0.3333}
    text = " ".join(grade_lines(data))
    assert "PICK: none: options 0, 1, 2 were each picked equally often (winner_index: 0, the lowest of them" in text
    assert "Every pick was the first option shown" in text and "it picked the first one shown, option 2" in text
    assert "null" in " ".join(grade_lines({**data, "winner_index": None}))


def test_flip_without_a_best_says_why() -> None:
    results = [{"index": 0, "inferred_instruction": "Write a poem.", "reward": 0.5, "parse_ok": True},
               {"index": 1, "inferred_instruction": "", "reward": 0.0, "parse_ok": False}]
    text = " ".join(flip_lines({"results": results, "best_index": None, "tied_best": [], "unparsed": [1], "ranking": [0, 1]}))
    assert "the 0.00 is no judgment" in text and "response 1 could not be read, so its reward is unknown" in text


def test_stats_lines_leave_out_what_a_tool_does_not_count() -> None:
    rate = lambda c, o: {"rate": c / o if o else None, "count": c, "of": o}  # noqa: E731
    group = {"tool": "infer_instruction_reward", "model": "m", "position_bias": {**rate(0, 0), "unbiased": None},
             "ties": rate(1, 1), "parse_failures": rate(0, 2)}
    text = " ".join(stats_lines({"all_time": {"verdicts": 1, "groups": [group]}}))
    assert "first-shown" not in text and "no single winner in 1 of 1" in text and "unreadable answers: 0 of 2" in text
    assert text.startswith("All time in this database: 1 verdicts. Per tool and model: infer_instruction_reward on m:")


def test_stats_lines_say_what_set_two_groups_of_one_tool_apart() -> None:
    rate = lambda c, o: {"rate": c / o if o else None, "count": c, "of": o}  # noqa: E731
    group = {"tool": "compare_pair", "model": "m", "position_bias": {**rate(0, 0), "unbiased": None}, "ties": rate(0, 1),
             "parse_failures": rate(0, 2)}
    lines = stats_lines({"all_time": {"verdicts": 2, "groups": [{**group, "inputs": "text"}, {**group, "inputs": "criteria+trajectory"}]}})
    assert lines[1].startswith("compare_pair on m:") and lines[2].startswith("compare_pair (with criteria, trajectory) on m:")


@pytest.mark.model
def test_the_demo_on_the_embedded_model_calls_every_tool_with_small_budgets(tmp_path: Path) -> None:
    db = tmp_path / "judge.db"
    proc = _demo(clean_env(JUDGE_MCP_DB=str(db)), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(STEPS)} of {len(STEPS)} tool calls succeeded" in proc.stdout and "Answers are capped at" in proc.stdout
    # the one line that points it at a real model, as this demo was started (python -m judge_mcp)
    assert proc.stdout.splitlines()[-2].strip().endswith(f"{sys.executable} -m judge_mcp demo")
    with sqlite3.connect(db) as conn:
        written = [row[0] for row in conn.execute("SELECT json_extract(value, '$.response.usage.completion_tokens') FROM verdicts, json_each(verdicts.calls)")]
    assert written and max(n for n in written if n is not None) <= DEMO_MAX_OUTPUT_TOKENS  # every answer within the demo's cap


def test_the_real_model_line_names_the_command_as_the_user_can_run_it(tmp_path: Path, monkeypatch) -> None:
    """In a checkout `judge-mcp` is not on PATH: the line says `.venv/bin/judge-mcp`, as `make demo` started it."""
    from judge_mcp.cli.demo import command_name

    monkeypatch.setenv("PATH", str(tmp_path))
    assert command_name(".venv/bin/judge-mcp") == ".venv/bin/judge-mcp"
    (tmp_path / "judge-mcp").write_text("#!/bin/sh\n")
    (tmp_path / "judge-mcp").chmod(0o755)
    assert command_name(str(tmp_path / "judge-mcp")) == "judge-mcp"  # the one on PATH
    assert command_name("/elsewhere/judge-mcp") == "/elsewhere/judge-mcp"


def test_a_reader_that_stops_early_ends_the_demo_quietly(scripted, tmp_path: Path) -> None:
    """`judge-mcp demo | head -3`: the pipe closed by its reader is not "the server stopped (ExceptionGroup ...)"
    followed by Python's "Exception ignored ... BrokenPipeError"; the demo stops without a word, as a pipe's writer does."""
    backend = scripted(UniversalJudge())
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model",
                    JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = subprocess.Popen([sys.executable, "-m", "judge_mcp", "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"judge-mcp demo:")
    proc.stdout.close()  # the reader goes, as `head` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, what a writer killed by the signal reports
    assert "server stopped" not in err and "BrokenPipeError" not in err and "Traceback" not in err, err


def test_a_server_that_cannot_start_is_named_by_its_own_message_not_a_task_group(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the database's folder should be")
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_DB=str(tmp_path / "state" / "judge.db"))
    proc = _demo(env, tmp_path)
    assert proc.returncode == 1
    assert "is a file, so it cannot hold the folder the database goes in" in proc.stderr  # the server's own words
    assert "judge-mcp demo: the server stopped (" in proc.stderr and "ExceptionGroup" not in proc.stderr and "TaskGroup" not in proc.stderr
