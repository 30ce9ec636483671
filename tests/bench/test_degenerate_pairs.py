"""Degenerate pairs (identical or empty responses) in the JudgeBench score: JudgeBench's own scoring
(utils/metrics.py compute_final_metrics) divides by every pair of its file, so a degenerate pair counts, and it
counts wrong: with identical responses both placements show the judge the same prompt, a deterministic judge names
the same position twice (+1 - 1 = 0). The bench still leaves them out of its other figures, and reports how many
there were."""

from __future__ import annotations

import io
import json
from pathlib import Path

from judge_mcp.bench import metrics
from judge_mcp.bench.methods import placement_record
from judge_mcp.bench.runner import RunSpec, run
from judge_mcp.runtime.run import run_method
from tests.helpers import app_env, make_app

FIXTURES = Path(__file__).resolve().parent.parent / "bench_fixtures"
PAIRS = FIXTURES / "pairs.jsonl"  # 6 pairs (alpha: p1-p3, beta: p4-p6) and one degenerate (p0, alpha)


async def test_the_judgebench_score_counts_degenerate_pairs_wrong_and_the_summary_says_how_many(scripted, tmp_path) -> None:
    server = scripted(lambda p: json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"}))
    app = make_app(app_env(server, tmp_path / "bench.db", JUDGE_MCP_MAX_RETRIES="0"))
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="grp"), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    assert summary["degenerate"] == 1
    o = summary["overall"]
    assert o["n"] == 6 and o["judgebench_n"] == 7  # the other figures leave the degenerate pair out; this one does not
    # a position-biased judge: right in one placement, wrong in the other, JudgeBench's 0 for every pair
    assert o["judgebench_score"] == 0.0
    assert summary["categories"]["alpha"]["judgebench_n"] == 4 and summary["categories"]["beta"]["judgebench_n"] == 3


def test_the_score_over_judged_and_degenerate_pairs() -> None:
    outcomes = [{"judgebench_right": True}, {"judgebench_right": True}, {"judgebench_right": False}]
    figures = metrics.with_degenerate({"judgebench_score": round(2 / 3, 4)}, outcomes, degenerate=1)
    assert figures["judgebench_score"] == 0.5 and figures["judgebench_n"] == 4
    assert metrics.with_degenerate({"judgebench_score": None}, outcomes, 1) == {"judgebench_score": None}


async def test_a_degenerate_pair_judged_would_score_zero_as_counted(scripted, tmp_path) -> None:
    """What counting it wrong stands for: the pair judged in both placements gets the same answer twice (the
    second from the call cache), naming the chosen response once and the rejected one once."""
    server = scripted(lambda p: json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"}))
    app = make_app(app_env(server, tmp_path / "deg.db", JUDGE_MCP_MAX_RETRIES="0"))
    same = "The capital of Australia is Canberra."
    try:
        records = []
        for placement in ("chosen_first", "chosen_second"):
            result, _ = await run_method(app, "compare_pair", dict(prompt="Capital?", response_a=same, response_b=same, swap=False))
            records.append(placement_record(placement, result.trials[0].better))
    finally:
        await app.aclose()
    assert len(server.requests) == 1  # the second placement is the same request, answered from the cache
    assert [r["names"] for r in records] == ["chosen", "rejected"]
    assert metrics.judgebench_right(records) is False
