"""`judge-mcp bench` and `bench-report` as a user runs them: the method and session names, the JSON summary and the
self-contained HTML report (and its Markdown table), and the options it refuses."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from judge_mcp.bench import command as bench_cli
from judge_mcp.bench import metrics, html_report as report
from judge_mcp.bench.published import METHODS
from judge_mcp.bench.runner import session_name
from testkit.scripted_judges import first_shown_judge
from testkit.server_process import server_env
from tests.bench.datasets import LISTS, PAIRS
from tests.helpers import app_env


def test_method_names_in_cli_match_the_registry():
    assert set(bench_cli.METHOD_NAMES) == set(METHODS)


def test_session_names_are_valid_and_distinct():
    a = session_name("llmbar_natural", "selective-lwe", "local/SmolLM2-135M-Instruct.Q4_1.gguf@abcd1234")
    b = session_name("llmbar_natural", "lwe", "local/SmolLM2-135M-Instruct.Q4_1.gguf@abcd1234")
    assert a != b
    for name in (a, b, session_name("x" * 80, "lwe", "k")):
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name)


def test_cli_writes_json_and_an_html_report(scripted, tmp_path):
    server = scripted(first_shown_judge)
    env = server_env(server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0")
    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "bench.db"
    for method in ("vanilla", "selective-lwe"):
        out = tmp_path / f"{method}.json"
        done = subprocess.run(
            [sys.executable, "-m", "judge_mcp", "bench", str(PAIRS), "--method", method, "--db", str(db), "--out", str(out), "--report", str(tmp_path / "r.html")],
            env=env, cwd=root, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "6/6" in done.stderr  # the progress bar
        assert "pairs" in done.stdout and "position bias" in done.stdout
        data = json.loads(out.read_text())
        for key in metrics.FIELDS:
            assert key in data["overall"] and key in data["categories"]["alpha"]
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") >= 4 and "LWE: cumulative accuracy" in page and "<polyline" in page
    assert "selective-lwe" in page and "vanilla" in page
    assert "; judge " in page  # the judge model named beside each dataset's heading

    combined = tmp_path / "combined.html"
    done = subprocess.run(
        [sys.executable, "-m", "judge_mcp", "bench-report", str(tmp_path / "vanilla.json"), "--db", str(db), "--out", str(combined),
         "--markdown", str(tmp_path / "t.md")],
        env=env, cwd=root, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "2 runs" in done.stdout  # the JSON file and the same run in the database count once
    table = (tmp_path / "t.md").read_text()
    # the always-first judge is right exactly on the items whose seeded single placement shows the chosen answer first
    single = sum(metrics.placement_for(f"p{i}") == 0 for i in range(1, 7)) / 6
    # pair acc., single-order acc., JudgeBench score, accuracy (both orders), first-order acc., consistency, position bias
    row = rf"^\| vanilla \| 6 \| 0\.000 \| {single:.3f} \| 0\.000 \| 0\.500 \| 1\.000 \| 0\.000 \| 1\.000 \|"
    assert re.search(row, table, re.M), table
    # by category the strict figure is shown: the always-first judge is right in neither category
    assert "Pair accuracy by category" in table
    assert "Judge: " in table and "Legend:" in table and "- **pair acc.**: right in both A/B orders" in table
    assert re.search(r"^\| vanilla \| 0\.000 \(3\) \| 0\.000 \(3\) \|", table, re.M), table

    wrong = subprocess.run(
        [sys.executable, "-m", "judge_mcp", "bench", str(LISTS), "--method", "grp", "--db", str(db)],
        env=env, cwd=root, capture_output=True, text=True, timeout=60,
    )
    assert wrong.returncode == 2 and "listwise" in wrong.stderr


def test_report_is_self_contained_with_the_charts():
    def run_summary(method: str, acc: float, lwe: bool = False) -> dict:
        o = {"n": 10, "accuracy": acc, "pair_accuracy": acc / 2, "single_order_accuracy": acc, "consistency": 0.4, "position_bias": 0.7, "parse_failures": 1,
             "ties": 0, "calls_per_item": 2.0, "cached_calls_per_item": 0.5, "tokens_per_item": 900.0, "prompt_tokens_per_item": 800.0,
             "completion_tokens_per_item": 100.0, "seconds_per_item": 3.5}
        s = {"dataset": "set<x>", "kind": "pairwise", "method": method, "method_key": method, "model": "m", "overall": o,
             "categories": {"a": dict(o, accuracy=0.25), "b": dict(o, accuracy=0.75)}}
        if lwe:
            s["lwe"] = {"cumulative_accuracy": [1.0, 0.5, 0.6667], "cumulative_pair_accuracy": [0.0, 0.0, 0.3333], "meta_path_share": 1.0}
        return s

    page = report.render([run_summary("vanilla", 0.6), run_summary("lwe", 0.8, lwe=True)])
    assert page.startswith("<!DOCTYPE html>")
    for title in ("Pair accuracy and single-order accuracy", "Consistency and position bias", "Pair accuracy by category",
                  "Model calls per item", "Seconds per item", "LWE: cumulative accuracy over the sequence"):
        assert title in page
    assert page.count('class="bar"') >= 2 * 2 + 2 * 2 + 2 * 2  # accuracy, consistency, categories
    assert "<polyline" in page and "set&lt;x&gt;" in page and "<script" not in page
    assert re.search(r"\b(src|href)=", page) is None  # nothing loaded from anywhere
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        ET.fromstring(svg)  # every chart is well-formed SVG
    # bar widths follow the values on one scale, whatever the chart's size (runs sorted by name: lwe's pair accuracy
    # and single-order accuracy 0.4 / 0.8, then vanilla's 0.3 / 0.6)
    widths = [float(w) for w in re.findall(r'class="bar" x="\d+" y="\d+" width="([\d.]+)"', page)[:4]]
    values = [0.4, 0.8, 0.3, 0.6]
    scale = widths[0] / values[0]
    assert scale > 0 and widths == [pytest.approx(scale * v, abs=0.1) for v in values]


@pytest.mark.parametrize(
    ("method", "extra", "message"),
    [
        ("flip", ["--adaptive-swap"], "--adaptive-swap applies to vanilla, grp and grp-better"),
        ("grp", ["--swap-margin", "0.3"], "--swap-margin is a number from 0 to 1, used with --adaptive-swap"),
        ("grp", ["--adaptive-swap", "--swap-margin", "1.5"], "--swap-margin is a number from 0 to 1"),
    ],
)
def test_cli_refuses_adaptive_options_it_cannot_apply(tmp_path, capsys, method: str, extra: list[str], message: str) -> None:
    parser = argparse.ArgumentParser()
    bench_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["bench", str(PAIRS), "--method", method, "--db", str(tmp_path / "b.db"), *extra])
    assert args.fn(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b.db").exists()  # refused before anything ran


def test_output_paths_that_cannot_be_written(scripted, tmp_path, monkeypatch, capsys):
    """--out or --report naming a folder is refused before the run (it was a traceback after it); a path that cannot
    be written is named after the run, whose judgments stay stored: the same command with a good path sends nothing."""
    from judge_mcp.cli.main import main

    server = scripted(first_shown_judge)
    for key, value in app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0").items():
        monkeypatch.setenv(key, value)
    folder, db = tmp_path / "out", tmp_path / "bench.db"
    folder.mkdir()
    base = ["bench", str(PAIRS), "--method", "grp", "--limit", "2", "--db", str(db), "--quiet"]
    for option in ("--out", "--report"):
        assert main([*base, option, str(folder)]) == 2
        assert f"{option} {folder} is a folder" in capsys.readouterr().err
    assert not server.requests and not db.exists()

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main([*base, "--out", str(blocker / "summary.json")]) == 2
    captured = capsys.readouterr()
    assert f"cannot write {blocker}" in captured.err and f"judgments are stored in {db}" in captured.err
    assert "pair acc." in captured.out  # the summary was printed
    sent = len(server.requests)
    assert sent == 4
    assert main([*base, "--out", str(folder / "summary.json")]) == 0
    assert len(server.requests) == sent and json.loads((folder / "summary.json").read_text())["overall"]["n"] == 2


@pytest.mark.parametrize(("content", "problem"), [
    ("{}", "no 'dataset'"),
    ("[1, 2]", "a run is a JSON object, got int"),
    ("[]", "an empty list"),
    ('{"dataset": "d", "method_key": "grp", "overall": 5}', "'overall' is not an object"),
])
def test_bench_report_names_a_json_file_that_is_not_a_summary(tmp_path, capsys, content, problem):
    from judge_mcp.cli.main import main

    path = tmp_path / "s.json"
    path.write_text(content)
    assert main(["bench-report", str(path), "--out", str(tmp_path / "r.html")]) == 2
    assert f"{path} is not a summary written by `judge-mcp bench --out` ({problem})" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_bench_report_on_a_database_without_runs_says_so(tmp_path, capsys):
    """It said "no runs given (pass JSON summaries and/or --db)" to a user who had given --db."""
    from judge_mcp.cli.main import main
    from judge_mcp.storage import open_store
    from judge_mcp.storage.migrations import MIGRATIONS

    db = tmp_path / "judge.db"  # the server's database: no bench run in it
    open_store(db, MIGRATIONS).close()
    assert main(["bench-report", "--db", str(db), "--out", str(tmp_path / "r.html")]) == 2
    assert f"{db} holds no bench run" in capsys.readouterr().err
    assert main(["bench-report", "--out", str(tmp_path / "r.html")]) == 2
    assert "no runs given" in capsys.readouterr().err


def test_fail_under_and_accuracy_of_both_orders(scripted, tmp_path, monkeypatch, capsys):
    """A judge that always names the first-shown answer: accuracy (the mean of the two orders) 0.5, its first order
    alone 1.0, pair accuracy 0.0. --fail-under exits 1 naming the figure below its threshold; an unknown figure is
    refused (2) naming the known ones, before anything is sent."""
    from judge_mcp.cli.main import main

    server = scripted(first_shown_judge)
    for key, value in app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0").items():
        monkeypatch.setenv(key, value)
    db, out = tmp_path / "bench.db", tmp_path / "s.json"
    base = ["bench", str(PAIRS), "--method", "grp", "--limit", "2", "--db", str(db), "--quiet", "--out", str(out)]
    assert main([*base, "--fail-under", "acuracy=0.5"]) == 2
    err = capsys.readouterr().err
    assert "acuracy" in err and "pair_accuracy" in err and "consistency" in err
    assert not server.requests
    assert main([*base, "--fail-under", "accuracy=0.5"]) == 0
    printed = capsys.readouterr().out
    # the judge named, the headline figures with their intervals (here: too few), the small n said, the legend
    assert "· judge " in printed and "pair acc. 0.000 (too few to say (n=2))" in printed
    assert "n=2 is too few to say anything" in printed
    assert "legend:" in printed and "both-orders acc." in printed and "mean of the two orders" in printed
    overall = json.loads(out.read_text())["overall"]
    assert overall["accuracy"] == 0.5 and overall["first_order_accuracy"] == 1.0 and overall["pair_accuracy"] == 0.0
    capsys.readouterr()
    assert main([*base, "--fail-under", "accuracy=0.5", "--fail-under", "pair_accuracy=0.6"]) == 1
    err = capsys.readouterr().err
    assert "pair_accuracy 0.000 is below --fail-under 0.6" in err and "accuracy 0.500" not in err


def test_bench_report_items_writes_per_item_rows(scripted, tmp_path, monkeypatch, capsys):
    """--items FILE: one row per judged item, each order's verdict, gold, right/wrong and parse failures; JSONL, or CSV
    when the name ends in .csv; without --db it is refused naming the problem."""
    import csv

    from judge_mcp.cli.main import main

    server = scripted(first_shown_judge)
    for key, value in app_env(server, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0").items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "bench.db"
    assert main(["bench", str(PAIRS), "--method", "grp", "--limit", "2", "--db", str(db), "--quiet"]) == 0
    assert main(["bench-report", "--items", str(tmp_path / "i.jsonl")]) == 2
    assert "--items needs --db" in capsys.readouterr().err
    assert main(["bench-report", "--db", str(db), "--items", str(tmp_path / "i.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "i.jsonl").read_text().splitlines()]
    assert [r["item_id"] for r in rows] == ["p1", "p2"]
    # the always-first judge: right when the chosen answer is shown first, wrong in the swapped order
    assert rows[0]["verdicts"] == ["chosen", "rejected"] and rows[0]["right"] == [True, False]
    assert rows[0]["gold"] == "chosen" and rows[0]["all_right"] is False and rows[0]["parse_failures"] == 0
    assert main(["bench-report", "--db", str(db), "--items", str(tmp_path / "i.csv")]) == 0
    table = list(csv.DictReader((tmp_path / "i.csv").open()))
    assert len(table) == 2 and table[0]["verdicts"] == "chosen|rejected" and table[0]["right"] == "True|False"
