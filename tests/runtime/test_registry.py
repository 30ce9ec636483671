"""The method registry: one table behind the server, the bench and the injection script."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp import Client

import judge_mcp.bench.methods  # noqa: F401  (registers the bench's baselines)
from judge_mcp.methods import registry
from judge_mcp.runtime.run import run_method
from judge_mcp.storage.verdict_log import VerdictLog

TOOLS = ("compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge", "score_response")


async def test_every_judging_tool_runs_a_registered_method_whose_result_model_is_its_output_schema(mcp_app) -> None:
    server, _ = mcp_app(lambda payload: "unused")
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in TOOLS:
        model = registry.METHODS[name].result
        assert tools[name].output_schema["properties"].keys() == model.model_json_schema()["properties"].keys(), name
    assert {"arena_hard", "pointwise"} <= registry.METHODS.keys()  # the bench's baselines, not tools
    assert not {"arena_hard", "pointwise"} & tools.keys()


async def test_call_applies_no_reask_and_logs_the_extra_keys_with_the_arguments(mcp_app) -> None:
    """An unreadable answer is re-asked once by default and not at all with no_reask; the logged inputs carry the
    bench's keys and the strict flag; the Judge's call records come back."""
    server, backend = mcp_app(lambda payload: "I cannot decide.")
    app = server.app
    args = dict(prompt="Capital of Australia?", response_a="Sydney", response_b="Canberra", swap=False)

    lenient, records = await run_method(app, "compare_pair", args)
    assert lenient.trials[0].parse_ok is False and lenient.usage.calls == 2
    assert [r["purpose"] for r in records][1].endswith(":reask")

    strict, records = await run_method(app, "compare_pair", {**args, "prompt": "Capital of Austria?"}, no_reask=True, log_extra={"bench_item": "x1"})
    assert strict.trials[0].parse_ok is False and strict.usage.calls == 1 and len(records) == 1
    logged = VerdictLog(app.store).recent("compare_pair", limit=1)[0]["inputs"]
    assert logged["bench_item"] == "x1" and logged["no_reask"] is True and logged["prompt"] == "Capital of Austria?"


async def test_an_unknown_method_is_named_with_the_known_ones(mcp_app) -> None:
    server, _ = mcp_app(lambda payload: "unused")
    with pytest.raises(ValueError, match=r"unknown method 'compare_pairs'.*compare_pair"):
        await run_method(server.app, "compare_pairs", {})


def test_a_second_method_under_a_registered_name_is_refused() -> None:
    async def other(judge, **args):  # pragma: no cover - never run
        raise AssertionError

    with pytest.raises(ValueError, match="compare_pair"):
        registry.register(other, registry.METHODS["compare_pair"].args, registry.METHODS["compare_pair"].result)


PRELOAD_WHILE_A_CALL_RUNS = """
import sys
from judge_mcp.methods import registry

others = ("judge_mcp.methods.lwe", "judge_mcp.methods.score", "judge_mcp.methods.flip.reward", "judge_mcp.methods.grade_score.scoring")
with registry.judging():  # a call sent at once, before the preload started
    thread = registry.preload()
    thread.join(0.3)  # (a chance to import what it should not)
    assert thread.is_alive() and "judge_mcp.methods.pairwise" not in sys.modules, "the preload imported during a call"
    assert registry.imported("judge_mcp.methods.pairwise").compare_pair  # the call imports its own module
    thread.join(0.3)
    assert not [m for m in others if m in sys.modules], "the preload imported during a call"
thread.join(60)  # the call over: the preload imports the rest
assert not thread.is_alive() and all(m in sys.modules for m in registry.METHOD_MODULES)
print("ok")
"""


def test_the_methods_preload_waits_while_a_call_runs_and_the_call_imports_its_own_module() -> None:
    """A first call sent at once does not share the interpreter with the other methods' imports (a fresh
    interpreter: this one has imported them all)."""
    done = subprocess.run([sys.executable, "-c", PRELOAD_WHILE_A_CALL_RUNS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


PRELOAD_AFTER_THE_BACKEND = """
import sys, threading
from judge_mcp.methods import registry

go = threading.Event()
backend = threading.Thread(target=go.wait)  # stands for the backend client's import
backend.start()
thread = registry.preload(after=backend)
thread.join(0.3)  # (a chance to import what it should not)
assert thread.is_alive() and not [m for m in registry.METHOD_MODULES if m in sys.modules], "imported beside the backend's import"
go.set()
thread.join(60)
assert not thread.is_alive() and all(m in sys.modules for m in registry.METHOD_MODULES)
print("ok")
"""


def test_the_methods_preload_starts_once_the_backend_client_is_imported() -> None:
    """The two preloads do not share the interpreter: a first call needs the backend's client whatever the tool."""
    done = subprocess.run([sys.executable, "-c", PRELOAD_AFTER_THE_BACKEND], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
