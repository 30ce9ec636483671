"""The bench with a judge panel (`--backends`): the panel scored beside each member alone, a vote without a majority
as a tie, the argument, and the report's panel rows. (Panels on the tools: tests/methods/test_panel.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_mcp.runtime.app import App
from testkit.scripted_judges import first_shown_judge
from judge_mcp.config.settings import load_settings
from tests.bench.datasets import PAIRS, right_judge


async def test_bench_panel_scores_the_panel_and_each_member_alone(scripted, tmp_path: Path) -> None:
    import io

    from judge_mcp.bench.methods import Options
    from judge_mcp.bench.runner import RunSpec, run
    from judge_mcp.storage.sqlite import SqliteEngine

    judges = {"right1": (right_judge, "m1"), "right2": (right_judge, "m2"), "biased": (first_shown_judge, "gpt-4o-mini")}
    servers = {name: scripted(responder) for name, (responder, _) in judges.items()}
    config = tmp_path / "judge.toml"
    config.write_text("".join(
        f'[backends.{n}]\nkind = "openai"\nbase_url = "{servers[n].base_url}"\nmodel = "{m}"\nmax_retries = 0\n\n' for n, (_, m) in judges.items()
    ))
    settings = load_settings({"JUDGE_MCP_CONFIG": str(config), "JUDGE_MCP_DB": str(tmp_path / "x.db")})

    async def bench(options: Options) -> dict:
        app = App(settings, store=SqliteEngine(tmp_path / "bench.db"))
        try:
            return await run(app, RunSpec(dataset=PAIRS, method="grp", options=options), progress_stream=io.StringIO())
        finally:
            await app.aclose()

    summary = await bench(Options(panel=("right1", "right2", "biased"), response_model="gpt-4o"))
    o = summary["overall"]
    # chosen first: all three name it; chosen second: two of three do, so the panel is right in both placements
    assert (o["n"], o["accuracy"], o["pair_accuracy"], o["consistency"]) == (6, 1.0, 1.0, 1.0)
    assert o["calls_per_item"] == 6.0  # 3 members x 2 placements, one order each
    assert summary["backend"] == "right1+right2+biased" and summary["backend_key"].startswith("panel[right1+right2+biased]@")
    members = summary["panel"]
    assert set(members) == {"right1", "right2", "biased"}
    assert members["right1"]["pair_accuracy"] == 1.0 and members["right1"]["calls_per_item"] == 2.0
    assert 0 < members["right1"]["seconds_per_item"] <= o["seconds_per_item"]
    assert members["biased"]["pair_accuracy"] == 0.0 and members["biased"]["position_bias"] == 1.0
    assert summary["self_preference"] == {"same_family_judges": ["biased"]}

    excluded = await bench(Options(panel=("right1", "right2", "biased"), response_model="gpt-4o", exclude_same_family=True))
    assert excluded["method_key"] == "grp+exclude-family[gpt-4o]" and excluded["overall"]["pair_accuracy"] == 1.0
    assert set(excluded["panel"]) == {"right1", "right2"}
    assert excluded["overall"]["cached_calls_per_item"] == 4.0 and excluded["overall"]["calls_per_item"] == 0.0  # the shared call cache
    assert len(servers["biased"].requests) == 12  # only the first run asked it


def test_bench_cli_backends_argument() -> None:
    import argparse

    from judge_mcp.bench.command import format_summary, parse_backends

    assert parse_backends(argparse.Namespace(backend=None, backends="a, b,c")) == ("a", "b", "c")
    with pytest.raises(ValueError, match="not both"):
        parse_backends(argparse.Namespace(backend="a", backends="a,b"))
    with pytest.raises(ValueError, match="2 to 8 distinct"):
        parse_backends(argparse.Namespace(backend=None, backends="a,a"))
    row = {"n": 2, "accuracy": 0.5, "pair_accuracy": 0.5}
    text = format_summary({"dataset": "d", "method_key": "grp", "model": "panel: x, y", "overall": row, "panel": {"x": row, "y": row}, "self_preference": {"same_family_judges": []}})
    assert "panel members, each scored alone" in text and "\n  x " in text and "model family: none" in text


async def test_bench_panel_without_a_majority_is_a_tie_not_a_parse_failure(scripted, tmp_path: Path) -> None:
    import io

    from judge_mcp.bench.methods import Options
    from judge_mcp.bench.runner import RunSpec, run
    from judge_mcp.storage.sqlite import SqliteEngine

    servers = {"right": scripted(right_judge), "biased": scripted(first_shown_judge)}
    config = tmp_path / "judge.toml"
    config.write_text("".join(f'[backends.{n}]\nkind = "openai"\nbase_url = "{s.base_url}"\nmodel = "m-{n}"\n\n' for n, s in servers.items()))
    app = App(load_settings({"JUDGE_MCP_CONFIG": str(config), "JUDGE_MCP_DB": str(tmp_path / "x.db")}), store=SqliteEngine(tmp_path / "bench.db"))
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="grp", options=Options(panel=("right", "biased"))), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    o = summary["overall"]
    # chosen first: both name it; chosen second: one vote each way, a tie (wrong, no parse failure)
    assert (o["first_order_accuracy"], o["accuracy"], o["pair_accuracy"], o["ties"], o["parse_failures"]) == (1.0, 0.5, 0.0, 6, 0)
    assert o["position_bias"] == 1.0  # the panel's parsed verdicts all named the first-shown answer


def test_report_shows_a_panel_run_with_each_member_beside_it() -> None:
    from judge_mcp.bench import html_report as report

    row = {"n": 30, "accuracy": 0.5, "pair_accuracy": 0.1, "position_bias": 0.456}
    run = {"dataset": "llmbar_natural", "kind": "pairwise", "method_key": "grp", "backend": "a+b", "model": "panel: x, y",
           "overall": row, "categories": {}, "panel": {"a": {**row, "pair_accuracy": 0.233}, "b": row}}
    text = report.markdown([run])
    assert "| grp (panel a+b) |" in text and "| grp · member a | 30 | 0.233 | – | – | 0.500 |" in text and "| grp · member b |" in text
    html = report.render([run])
    assert "grp · member a" in html and "grp (panel a+b)" in html
