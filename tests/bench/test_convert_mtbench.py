"""`judge-mcp bench-convert mt-bench-human`: MT-Bench's human judgments (the HF split's row shape) -> pairwise items
with a conversation and trajectories, one per turn-1 (question, model pair) with a majority, and a manifest; then
`judge-mcp bench` over the result. The source here is synthetic (tests/bench_fixtures/mt_bench_human_synthetic.jsonl,
10 votes in the split's shape): the real split lives on Hugging Face only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.scripted_judges import UniversalJudge
from testkit.server_process import server_env
from tests.bench.datasets import FIXTURES

SOURCE = FIXTURES / "mt_bench_human_synthetic.jsonl"
ROOT = Path(__file__).resolve().parents[2]


def _convert(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judge_mcp", "bench-convert", "mt-bench-human", str(source), "--out", str(out), "--commit", "abc123"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_majority_votes_become_conversation_pairs_with_a_manifest(tmp_path):
    out = tmp_path / "mt.jsonl"
    done = _convert(SOURCE, out)
    assert done.returncode == 0, done.stderr
    items = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(items) == {"mt-bench-q81-alpaca-13b-vs-vicuna-13b", "mt-bench-q111-gpt-4-vs-llama-13b"}
    q81 = items["mt-bench-q81-alpaca-13b-vs-vicuna-13b"]  # 2 votes to 1, one of them with the models in the other order
    assert q81["chosen_model"] == "vicuna-13b" and q81["votes"] == {"alpaca-13b": 1, "vicuna-13b": 2} and q81["category"] == "writing"
    assert q81["conversation"] == [{"role": "user", "content": "Compose an engaging travel blog post about a recent trip to Hawaii."}]
    assert q81["chosen"][0]["role"] == "assistant" and "GOOD-m1" in q81["chosen"][0]["content"] and "BAD-m1" in q81["rejected"][0]["content"]
    assert items["mt-bench-q111-gpt-4-vs-llama-13b"]["category"] == "math"
    manifest = json.loads((tmp_path / "mt.jsonl.manifest.json").read_text())
    assert manifest["license"].startswith("CC BY 4.0") and manifest["commit"] == "abc123" and manifest["n"] == 2
    assert manifest["skipped"] == {"tie or no majority": 2, "turn 2 (each model's second answer follows its own first)": 1}
    assert len(manifest["sha256"]["mt_bench_human_synthetic.jsonl"]) == 64


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(winner="model_c"), "line 1: 'winner' must be model_a, model_b or tie"),
    (lambda r: r["conversation_b"].__setitem__(0, {"role": "user", "content": "other"}), "line 1: the two conversations start with different user turns"),
    (lambda r: r["conversation_a"].__setitem__(1, {"role": "user", "content": "x"}), "line 1: conversation_a[1] must be a assistant message"),
    (lambda r: r.pop("turn"), "line 1: missing turn"),
])
def test_bad_rows_are_named(tmp_path, change, message):
    row = json.loads(SOURCE.read_text().splitlines()[0])
    change(row)
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps(row) + "\n")
    done = _convert(source, tmp_path / "out.jsonl")
    assert done.returncode != 0 and f"bad.jsonl {message}" in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_bench_runs_the_converted_pairs(scripted, tmp_path):
    out = tmp_path / "mt.jsonl"
    assert _convert(SOURCE, out).returncode == 0
    server = scripted(UniversalJudge(good="GOOD-"))
    env = server_env(server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0")
    for method in ("grp", "lwe"):
        summary = tmp_path / f"{method}.json"
        done = subprocess.run([sys.executable, "-m", "judge_mcp", "bench", str(out), "--method", method, "--db", str(tmp_path / "b.db"), "--out", str(summary)],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(summary.read_text())["overall"]["accuracy"] == 1.0
