"""runtime/run.py, the path every judging call takes: the method from the table, the judges chosen (the guard
consulted once), the judging (an Outcome, nothing written), then the one write. Real HTTP on scripted servers; the
steps are observed where they touch the world: the backend's requests, the guard's two consultations and the
verdict log's write, each appending to one list of events."""

from __future__ import annotations

import threading
from dataclasses import fields
from pathlib import Path

import pytest

from judge_mcp.config.settings import ConfigError
from judge_mcp.contract.args import ComparePairArgs
from judge_mcp.contract.fields import InputError
from judge_mcp.contract.results import ComparePairResult
from judge_mcp.methods import pairwise
from judge_mcp.methods.self_preference import Guard
from judge_mcp.runtime import run
from judge_mcp.storage.verdict_log import VerdictLog
from testkit.scripted_judges import PAIR, correct_judge
from testkit.scripted_servers import Reply
from tests.helpers import app_env, make_app

ONE_ORDER = {**PAIR, "swap": False}


@pytest.fixture
def observed(scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """observed(responder) -> (App, events): an App whose default backend and `second` (the same scripted server,
    named as a model of the openai family) answer with `responder`; `events` gets "call" for each request the server receives,
    "chosen" and "reported" for the guard's consultations (before and after the judging), "write" for the verdict
    row's write."""
    events: list[str] = []
    apps = []

    def wrap(cls: type, name: str, event: str) -> None:
        real = getattr(cls, name)

        def spy(self, *args, **kwargs):
            events.append(event)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, spy)

    wrap(Guard, "judges", "chosen")
    wrap(Guard, "reported", "reported")
    wrap(VerdictLog, "log", "write")

    def make(responder):
        def respond(payload):
            events.append("call")
            return responder(payload)

        server = scripted(respond)
        config = tmp_path / "judge.toml"
        config.write_text(f'[backends.second]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodel = "gpt-4o-mini"\nmax_retries = 0\n')
        app = make_app(app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_CONFIG=str(config)))
        apps.append(app)
        return app, events

    yield make
    for app in apps:
        app.store.close()


def verdict_rows(app) -> int:
    return app.store.query("SELECT COUNT(*) AS n FROM verdicts")[0]["n"]


def cache_rows(app) -> int:
    return app.store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"]


async def test_one_judge_the_guard_once_before_the_calls_and_once_after_then_the_one_write(observed) -> None:
    app, events = observed(correct_judge)
    result, records = await run.run_method(app, "compare_pair", ONE_ORDER)
    assert events == ["chosen", "call", "reported", "write"]
    assert isinstance(result, ComparePairResult) and result.winner == "B" and len(records) == 1
    row = VerdictLog(app.store).recent("compare_pair")[0]
    assert row["verdict_id"] == result.verdict_id and row["calls"] == records and row["inputs"]["response_a"] == PAIR["response_a"]


async def test_a_panel_chooses_its_judges_once_judges_concurrently_and_writes_once_after(observed) -> None:
    app, events = observed(correct_judge)
    result, records = await run.run_method(app, "compare_pair", {**ONE_ORDER, "backends": ["default", "second"]})
    assert events == ["chosen", "call", "call", "reported", "write"]
    assert result.winner == "B" and [m.status for m in result.panel] == ["ok", "ok"]
    assert sorted(r["panel_member"] for r in records) == ["default", "second"]
    row = VerdictLog(app.store).recent("compare_pair")[0]
    assert row["backend"] == "default+second" and row["calls"] == records


async def test_the_judges_are_chosen_before_any_call(observed) -> None:
    """An unknown panel member and a guard that excludes every judge fail the call before a request is sent."""
    app, events = observed(correct_judge)
    with pytest.raises(ConfigError, match="nope"):
        await run.run_method(app, "compare_pair", {**ONE_ORDER, "backends": ["default", "nope"]})
    authors = {"response_models": ["gpt-4o", "gpt-4o"], "exclude_same_family": True}
    with pytest.raises(InputError, match="leaves no judge"):
        await run.run_method(app, "compare_pair", {**ONE_ORDER, "backend": "second", **authors})
    assert events == ["chosen"]  # the guard, before any call
    assert "call" not in events and "write" not in events and verdict_rows(app) == 0


async def test_judging_gives_an_outcome_and_writes_nothing_the_record_writes_it(observed) -> None:
    """The judging is not a callback of the write: `judge` returns an Outcome (a named record, not a tuple) and writes
    nothing; `record` then writes the verdict row with the Outcome's cache rows in one transaction."""
    app, events = observed(correct_judge)
    args = ComparePairArgs.parse(PAIR)
    judges = run.Judges.chosen(app, args, None)
    outcome = await run.judge(app, "compare_pair", judges, lambda context: pairwise.compare_pair(context, args))
    assert [f.name for f in fields(run.Outcome)] == ["result", "backend", "model", "records", "cache_rows"]
    assert outcome.backend == "default" and outcome.model == "openai/scripted-model" and outcome.result.winner == "B"
    assert len(outcome.records) == len(outcome.cache_rows) == 2 and events == ["chosen", "call", "call", "reported"]
    assert verdict_rows(app) == 0 and cache_rows(app) == 0  # nothing written: the answers wait in the call cache's memory

    result = await run.record(app, "compare_pair", args.logged(), outcome)
    assert events[-1] == "write" and verdict_rows(app) == 1 and cache_rows(app) == 2
    row = VerdictLog(app.store).recent("compare_pair")[0]
    assert (row["backend"], row["model"], row["calls"], row["verdict_id"]) == ("default", outcome.model, outcome.records, result.verdict_id)


async def test_a_failed_judging_writes_no_verdict_but_caches_the_answers_that_came_back(observed) -> None:
    """Both orders are asked at once; the second request to arrive fails (no retries): the call fails, no verdict
    row is written, and the one answer that came back is in the call cache (a repeat sends only the other)."""
    lock, arrived = threading.Lock(), []

    def second_fails(payload):
        with lock:
            arrived.append(1)
            first = len(arrived) == 1
        return correct_judge(payload) if first else Reply(status=500)

    app, events = observed(second_fails)
    with pytest.raises(Exception, match="500"):
        await run.run_method(app, "compare_pair", PAIR)
    assert "write" not in events and verdict_rows(app) == 0 and cache_rows(app) == 1

    arrived.clear()
    arrived.append(1)  # from now on every request fails: a repeat fails on the one order not cached
    with pytest.raises(Exception, match="500"):
        await run.run_method(app, "compare_pair", PAIR)
    assert events.count("call") == 3 and verdict_rows(app) == 0
