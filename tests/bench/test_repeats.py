"""`judge-mcp bench --repeats K`: every item judged K times as runs of their own, never from the call cache, at the
method's temperature or --temperature; the share of items whose verdict changed and the accuracy's stdev across runs.
Scripted judges over real HTTP; the CLI end to end in a subprocess."""

from __future__ import annotations

import statistics

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from judge_mcp.bench import command as bench_cli
from judge_mcp.bench.repeats import run_repeats
from judge_mcp.bench.runner import BenchError, RunSpec
from testkit.scripted_judges import first_user
from testkit.server_process import server_env
from tests.bench.datasets import ITEM_TOKEN, PAIRS, right_judge
from tests.helpers import app_env, make_app

ALPHA = {"p1", "p2", "p3"}


class DriftingJudge:
    """Right for its first `steady` requests, then wrong on the alpha items (p1-p3): a judge whose verdicts move."""

    def __init__(self, steady: int):
        self.steady, self.seen = steady, 0
        self.lock = threading.Lock()

    def __call__(self, payload: dict) -> str:
        with self.lock:
            self.seen += 1
            late = self.seen > self.steady
        answer = json.loads(right_judge(payload))
        match = ITEM_TOKEN.search(first_user(payload))
        if late and match and match.group(2) in ALPHA:
            answer["verdict"] = "[[B>A]]" if answer["verdict"] == "[[A>B]]" else "[[A>B]]"
        return json.dumps(answer)


async def repeated(scripted, responder, tmp_path: Path, k: int, temperature: float | None = None):
    server = scripted(responder)
    app = make_app(app_env(server, tmp_path / "bench.db", JUDGE_MCP_MAX_RETRIES="0"))
    try:
        summary = await run_repeats(app, RunSpec(dataset=PAIRS, method="grp"), k, temperature, quiet=True)
    finally:
        await app.aclose()
    return summary, server


async def test_verdicts_that_move_between_runs_are_counted_and_no_repeat_comes_from_the_cache(scripted, tmp_path) -> None:
    summary, server = await repeated(scripted, DriftingJudge(steady=12), tmp_path, 2)  # run 1: 6 items x 2 placements
    r = summary["repeats"]
    assert r["method_keys"] == ["grp#r1", "grp#r2"] and r["k"] == 2 and r["temperature"] is None
    assert (r["items"], r["changed_items"], r["changed_share"]) == (6, 3, 0.5)
    assert r["accuracy"]["values"] == [1.0, 0.5] and r["accuracy"]["stdev"] == statistics.stdev([1.0, 0.5]) and r["calls_per_run"] == [12, 12]
    assert len(server.requests) == 24 and all(p["temperature"] == 0 for p in server.requests)  # the method's, sent every time


async def test_a_steady_judge_changes_nothing_at_the_temperature_given(scripted, tmp_path) -> None:
    summary, server = await repeated(scripted, right_judge, tmp_path, 3, temperature=0.7)
    r = summary["repeats"]
    assert r["method_keys"] == ["grp#r1@t0.7", "grp#r2@t0.7", "grp#r3@t0.7"] and r["changed_share"] == 0.0
    assert r["accuracy"] == {"values": [1.0, 1.0, 1.0], "mean": 1.0, "stdev": 0.0, "ci": "too few to say (n=6)"} and r["calls_per_run"] == [12] * 3
    # every repeat's outcome of each item, for bench-report --compare: [right, pair right, consistent, first-shown, parsed]
    assert summary["per_item"] and all(entries == [[1, 1, 1, 1, 2, 1.0]] * 3 for entries in summary["per_item"].values())
    assert len(server.requests) == 36 and all(p["temperature"] == 0.7 for p in server.requests)


async def test_a_repeat_count_out_of_range_is_refused_before_any_call(scripted, tmp_path) -> None:
    with pytest.raises(BenchError, match="--repeats is a whole number from 2 to 20"):
        await repeated(scripted, right_judge, tmp_path, 1)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--temperature", "0.5"], "--temperature applies with --repeats"),
        (["--repeats", "2", "--temperature", "3"], "--temperature is a number from 0 to 2"),
        (["--labels"], "--labels applies to lwe and selective-lwe"),
    ],
)
def test_cli_refuses_repeat_options_it_cannot_apply(tmp_path, capsys, extra: list[str], message: str) -> None:
    parser = argparse.ArgumentParser()
    bench_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["bench", str(PAIRS), "--method", "grp", "--db", str(tmp_path / "b.db"), *extra])
    assert args.fn(args) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "b.db").exists()


def test_cli_prints_the_repeats_line_and_writes_them_to_the_json(scripted, tmp_path) -> None:
    server = scripted(right_judge)
    out = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "judge_mcp", "bench", str(PAIRS), "--method", "grp", "--repeats", "2", "--db", str(tmp_path / "b.db"),
         "--out", str(out), "--quiet"],
        env=server_env(server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0"), cwd=Path(__file__).resolve().parents[2],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "repeats: 2 runs at the method's temperature, never from the cache: verdict changed on 0 of 6 items" in done.stdout
    assert json.loads(out.read_text())["repeats"]["calls_per_run"] == [12, 12] and len(server.requests) == 24
