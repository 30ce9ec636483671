"""judge-mcp bench: the metrics as pure functions, every method end to end over a scripted OpenAI-compatible judge
(real HTTP on 127.0.0.1) on small fixtures, resumability (also across a killed process), the CLI, and the report."""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from judge_mcp.bench import cli as bench_cli
from judge_mcp.bench import calibration, metrics
from judge_mcp.bench.data import DatasetError, load_items
from judge_mcp.bench.methods import METHODS, Options, method_key, placement_record, single_record
from judge_mcp.bench.results import run_rows
from judge_mcp.bench.runner import MAX_CONSECUTIVE_ERRORS, BenchError, RunSpec, run, session_name
from judge_mcp.bench import arena_hard
from judge_mcp.bench.pointwise import parse_rating
from judge_mcp import prompts
from judge_mcp.bench import report
from judge_mcp.storage.sqlite import Store
from judge_mcp.storage.lwe_sessions import LweRepository
from tests.helpers import app_env, make_app, server_env
from tests.judge_script import logprob_content
from tests.scripted import Reply, prompt_text

FIXTURES = Path(__file__).resolve().parent.parent / "bench_fixtures"
PAIRS = FIXTURES / "pairs.jsonl"  # 6 pairs (alpha: p1-p3, beta: p4-p6) and one degenerate (p0)
LISTS = FIXTURES / "lists.jsonl"  # 4 listwise items, best at 0, 2, 1, 3
PAIR_ITEMS = {it.id: it for it in load_items(PAIRS)}
LIST_ITEMS = {it.id: it for it in load_items(LISTS)}
PROMPTS = {**{k: v.prompt for k, v in PAIR_ITEMS.items()}, **{k: v.prompt for k, v in LIST_ITEMS.items()}}
TOKEN = re.compile(r"\b(GOOD|BAD)-([a-z]\d+)")
FEEDBACK = json.dumps({"score": 4, "label": "Not sure", "learned tips": "compare carefully", "reasoning": "fine"})


# ---- scripted judges ------------------------------------------------------------------------------------------------
def schema_name(payload: dict[str, Any]) -> str | None:
    return ((payload.get("response_format") or {}).get("json_schema") or {}).get("name")


def item_of(text: str) -> str:
    m = TOKEN.search(text)
    assert m, f"no item token in {text[:200]!r}"
    return m.group(2)


def last_user(payload: dict[str, Any]) -> str:
    return [m["content"] for m in payload["messages"] if m["role"] == "user"][0]


def good_first(text: str) -> bool:
    item = item_of(text)
    return text.index(f"GOOD-{item}") < text.index(f"BAD-{item}")


def option_blocks(text: str) -> list[str]:
    return re.findall(r"\[Option (\d+)\]\n(.*?)\n\[\\Option \1\]", text, re.S)


def is_arena_hard(payload: dict[str, Any]) -> bool:
    return any(m["role"] == "system" and "[[A>>B]]" in m["content"] for m in payload["messages"])


def correct_judge(payload: dict[str, Any]) -> str:
    """Always right: it finds the item's GOOD answer wherever it is shown."""
    name, text = schema_name(payload), last_user(payload)
    if is_arena_hard(payload):  # ">>" labels: JudgeBench reads them as ">"
        return "My own answer first. ... My final verdict is: " + ("[[A>>B]]" if good_first(text) else "[[B>>A]]")
    if name == "pairwise_verdict":
        return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]" if good_first(text) else "[[B>A]]"})
    if name in ("lwe_vanilla_verdict", "lwe_case_verdict"):
        return json.dumps({"explanation": "e", "verdict": "A" if good_first(text) else "B"})
    if name == "lwe_feedback":
        return FEEDBACK
    if name == "flip_inferred_instruction":
        m = TOKEN.search(text)
        inferred = PROMPTS[m.group(2)] if m.group(1) == "GOOD" else "Write a poem about the sea."
        return json.dumps({"INFERRED INSTRUCTION": inferred, "REASONING": "r"})
    if name == "pointwise_rating":
        return json.dumps({"REASONING": "r", "SCORE": "9" if "GOOD-" in text.split("[AI Answer]")[1] else "3"})
    if name == "grade_selection":
        item = item_of(text.split("[User Instruction]")[1]) if TOKEN.search(text.split("[User Instruction]")[1]) else None
        blocks = option_blocks(text)
        pick = next(int(n) for n, body in blocks if "GOOD-" in body and (item is None or f"GOOD-{item}" in body))
        return json.dumps({"evaluation": "e", "selection": f"Option {pick}", "explanation": "x"})
    return "Judge which answer follows the instruction better."  # LWE's free-text prompts (build, refine)


def first_shown_judge(payload: dict[str, Any]) -> str:
    """Position-biased: always picks whatever is shown first."""
    name = schema_name(payload)
    if is_arena_hard(payload):
        return "Assistant A is slightly better: [[A>B]]"
    if name == "pairwise_verdict":
        return json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})
    if name in ("lwe_vanilla_verdict", "lwe_case_verdict"):
        return json.dumps({"explanation": "e", "verdict": "A"})
    if name == "lwe_feedback":
        return FEEDBACK
    if name == "grade_selection":
        return json.dumps({"evaluation": "e", "selection": "Option 1", "explanation": "x"})
    return "Judge which answer is better."


async def bench(scripted, responder, dataset: Path, method: str, tmp_path: Path, db_name: str = "bench.db", **kw) -> tuple[dict, Any]:
    server = kw.pop("server", None) or scripted(responder)
    env = app_env(server, tmp_path / db_name, JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_CONCURRENCY=str(kw.pop("app_concurrency", 4)))
    app = make_app(env)
    try:
        summary = await run(app, RunSpec(dataset=dataset, method=method, **kw), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    return summary, server


# ---- pure pieces ---------------------------------------------------------------------------------------------------
def test_placement_record_maps_shown_order_back_to_chosen():
    assert placement_record("chosen_first", "A") | {} == {
        "shown_first": "chosen", "named": "first", "names": "chosen", "correct": True,
        "parse_failures": 0, "verdicts": 1, "parsed_verdicts": 1, "first_shown_picks": 1, "tie": False,
    }
    second = placement_record("chosen_second", "A")  # the rejected answer was shown first and picked
    assert (second["names"], second["correct"], second["first_shown_picks"]) == ("rejected", False, 1)
    assert placement_record("chosen_second", "B")["correct"] is True
    unparsed = placement_record("chosen_first", None)
    assert (unparsed["correct"], unparsed["parse_failures"], unparsed["parsed_verdicts"], unparsed["names"]) == (False, 1, 0, None)


def test_single_record_counts_ties_and_parse_failures_as_wrong():
    assert single_record(0, 0, [], 0, 2)["correct"] is True
    tie = single_record(0, None, [0, 1], 0, 2)
    assert tie["tie"] and not tie["correct"]
    assert single_record(0, 0, [], 1, 2)["correct"] is False  # gold ranked first only because the other was unparsed
    assert single_record(2, 1, [], 0, 4)["correct"] is False


def _row(item: str, placement: str, record: dict, seq: int = 0, category: str = "c") -> dict:
    return {"item_id": item, "placement": placement, "seq": seq, "category": category, "status": "done", "record": record}


def _cost(**extra: Any) -> dict:
    return {"calls": 1, "cached_calls": 0, "prompt_tokens": 10, "completion_tokens": 5, "started_at": 100.0, "ended_at": 102.0, **extra}


def test_summarise_pairwise_by_hand():
    rows = [
        # item 1: right in both placements
        _row("i1", "chosen_first", placement_record("chosen_first", "A") | _cost(), 0, "x"),
        _row("i1", "chosen_second", placement_record("chosen_second", "B") | _cost(), 0, "x"),
        # item 2: always the first-shown answer (right once, inconsistent)
        _row("i2", "chosen_first", placement_record("chosen_first", "A") | _cost(), 1, "y"),
        _row("i2", "chosen_second", placement_record("chosen_second", "A") | _cost(), 1, "y"),
        # item 3: first placement unparsed, second wrong
        _row("i3", "chosen_first", placement_record("chosen_first", None) | _cost(), 2, "y"),
        _row("i3", "chosen_second", placement_record("chosen_second", "A") | _cost(), 2, "y"),
        # item 4: only one placement stored so far (incomplete), item 5 degenerate, item 6 failed
        _row("i4", "chosen_first", placement_record("chosen_first", "A") | _cost(), 3, "y"),
        {"item_id": "i5", "placement": "single", "seq": 4, "category": "y", "status": "skipped", "record": None},
        {"item_id": "i6", "placement": "chosen_first", "seq": 5, "category": "y", "status": "error", "record": None, "error": "boom"},
    ]
    s = metrics.summarise(rows, ("chosen_first", "chosen_second"), "grp")
    o = s["overall"]
    assert o["n"] == 3
    assert o["accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert o["pair_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert o["consistency"] == pytest.approx(1 / 3, abs=1e-4)
    # parsed verdicts: 5; naming the first shown: i1 first, i2 both, i3 second -> 4/5
    assert o["position_bias"] == pytest.approx(0.8)
    assert o["parse_failures"] == 1 and o["calls_per_item"] == 2.0 and o["tokens_per_item"] == 30.0
    assert o["seconds_per_item"] == 2.0  # placements overlap: wall time of the item, not the sum
    assert (s["skipped_degenerate"], s["errors"], s["incomplete"]) == (1, 1, 1)
    assert s["categories"]["x"]["n"] == 1 and s["categories"]["y"]["accuracy"] == 0.5


# item 10: the accuracy definitions beside the papers'
def _placed(placement: str, winner: str | None, tie: bool = False) -> dict:
    return placement_record(placement, winner, tie)


@pytest.mark.parametrize(
    "first, second, right",
    [
        (("A", False), ("B", False), True),  # both placements name the chosen answer
        (("A", False), (None, True), True),  # right and a tie: the non-tie decides
        ((None, False), ("B", False), True),  # unparsed and right: the parsed one decides
        (("A", False), ("A", False), False),  # inconsistent (right, then wrong): +1 - 1 = 0
        ((None, True), (None, True), False),  # tie and tie
        (("B", False), (None, True), False),  # wrong and a tie
        (("B", False), ("A", False), False),  # both wrong
    ],
)
def test_judgebench_score_follows_its_rule(first, second, right):
    records = [_placed("chosen_first", *first), _placed("chosen_second", *second)]
    assert metrics.judgebench_right(records) is right


def test_single_order_placement_is_seeded_per_item():
    ids = [f"item-{k}" for k in range(400)]
    draws = [metrics.placement_for(i) for i in ids]
    assert draws == [metrics.placement_for(i) for i in ids]  # the same item always gets the same placement
    assert 150 < sum(draws) < 250  # about half the items use the swapped placement
    assert [metrics.placement_for(i, seed=1) for i in ids] != draws  # a different seed draws differently


def test_summary_reports_single_order_judgebench_and_reasked_beside_pair_accuracy():
    rows = []
    for k in range(8):  # a judge that always names the first-shown answer; the first item's verdict was re-asked
        rows.append(_row(f"i{k}", "chosen_first", placement_record("chosen_first", "A") | _cost(reasked=k == 0), k))
        rows.append(_row(f"i{k}", "chosen_second", placement_record("chosen_second", "A") | _cost(), k))
    o = metrics.summarise(rows, ("chosen_first", "chosen_second"), "grp")["overall"]
    expected = sum(metrics.placement_for(f"i{k}") == 0 for k in range(8)) / 8
    assert o["accuracy"] == 1.0 and o["pair_accuracy"] == 0.0 and o["judgebench_score"] == 0.0
    assert o["single_order_accuracy"] == pytest.approx(expected, abs=1e-4)
    assert o["reasked_verdicts"] == 1


def test_grade_score_mean_counts_items_without_a_parsed_trial_as_zero():
    """Item 9: the Grade Score authors' code averages 0.0 for an item whose trials all failed to parse."""
    def grade_row(k: int, score: float | None, parsed: int) -> dict:
        record = {"predicted": 0 if parsed else None, "tie": False, "correct": bool(parsed), "parse_failures": 3 - parsed,
                  "verdicts": 3, "parsed_verdicts": parsed, "first_shown_picks": 0, "consistent": None,
                  "detail": {"grade_score": score, "llm_score": score, "choice_score": score}} | _cost()
        return _row(f"g{k}", "single", record, k)

    s = metrics.summarise([grade_row(0, 0.9, 3), grade_row(1, 0.5, 3), grade_row(2, None, 0)], ("single",), "grade")
    assert s["grade"]["mean_grade_score"] == pytest.approx((0.9 + 0.5 + 0.0) / 3, abs=1e-4)
    assert s["grade"]["mean_llm_score"] == pytest.approx(1.4 / 3, abs=1e-4)
    assert s["grade"]["items_without_parsed_trial"] == 1


def test_cumulative_accuracy():
    assert metrics.cumulative([True, False, True, True]) == [1.0, 0.5, 0.6667, 0.75]
    assert metrics.cumulative([]) == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{ "REASONING": "fine", "SCORE": "7" }', (7.0, "fine")),
        ('{"reasoning": "ok", "score": 9}', (9.0, "ok")),
        ('```json\n{"SCORE": "8/10", "REASONING": "x"}\n```', (8.0, "x")),
        ('{"REASONING": "cut off", "SCORE": "6"', (6.0, "cut off")),
        ('{"REASONING": "x", "SCORE": "10"}', (10.0, "x")),
    ],
)
def test_parse_rating_accepts_the_papers_format(text, expected):
    assert parse_rating(text) == expected


@pytest.mark.parametrize("text", ["", "I think it is good.", '{"REASONING": "x", "SCORE": "11"}', '{"SCORE": "0"}', '{"SCORE": "<your-score>"}', '{"SCORE": true}'])
def test_parse_rating_rejects_out_of_range_and_missing_scores(text):
    assert parse_rating(text) is None


def test_method_names_in_cli_match_the_registry():
    assert set(bench_cli.METHOD_NAMES) == set(METHODS)


def test_session_names_are_valid_and_distinct():
    a = session_name("llmbar_natural", "selective-lwe", "local/SmolLM2-135M-Instruct.Q4_1.gguf@abcd1234")
    b = session_name("llmbar_natural", "lwe", "local/SmolLM2-135M-Instruct.Q4_1.gguf@abcd1234")
    assert a != b
    for name in (a, b, session_name("x" * 80, "lwe", "k")):
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name)


def test_dataset_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "p"}\n')
    with pytest.raises(DatasetError, match="bad.jsonl line 1"):
        load_items(bad)
    items = load_items(PAIRS)
    assert [it.id for it in items if it.degenerate] == ["p0"]
    assert [it.id for it in load_items(PAIRS, limit=2)] == ["p1", "p2"]


def test_sample_spreads_over_the_file_in_order(tmp_path):
    path = tmp_path / "sorted.jsonl"
    rows = [{"id": f"{cat}{i}", "category": cat, "prompt": "p", "chosen": f"good {cat}{i}", "rejected": f"bad {cat}{i}"}
            for cat in "abcd" for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    picked = load_items(path, sample=8)
    assert [it.id for it in picked] == ["a0", "a2", "b0", "b2", "c0", "c2", "d0", "d2"]
    assert [it.category for it in picked] == ["a", "a", "b", "b", "c", "c", "d", "d"]
    assert [it.seq for it in picked] == sorted(it.seq for it in picked)  # file order kept (LWE learns in order)
    assert len(load_items(path, sample=50)) == 20  # more than the file holds: the whole file
    with pytest.raises(DatasetError, match="either a limit"):
        load_items(path, limit=2, sample=2)


# ---- end to end over a scripted judge ------------------------------------------------------------------------------
PAIR_METHODS = ["vanilla", "grp", "grp-better", "arena-hard", "lwe", "selective-lwe"]


@pytest.mark.parametrize("method", PAIR_METHODS)
async def test_first_shown_judge_scores_pair_accuracy_zero(scripted, tmp_path, method):
    summary, _ = await bench(scripted, first_shown_judge, PAIRS, method, tmp_path)
    o = summary["overall"]
    assert o["n"] == 6 and summary["skipped_degenerate"] == 1
    assert o["accuracy"] == 1.0  # the chosen answer was shown first in the first placement
    assert o["pair_accuracy"] == 0.0
    assert o["consistency"] == 0.0
    assert o["position_bias"] == 1.0
    assert o["length_preference"] == 0.5  # the chosen (longer) response first, then the rejected one: half each
    assert o["parse_failures"] == 0


@pytest.mark.parametrize("method", PAIR_METHODS + ["flip", "pointwise", "grade"])
async def test_correct_judge_scores_one_on_pairs(scripted, tmp_path, method):
    summary, server = await bench(scripted, correct_judge, PAIRS, method, tmp_path)
    o = summary["overall"]
    assert (o["n"], o["accuracy"], o["pair_accuracy"]) == (6, 1.0, 1.0)
    assert summary["categories"]["alpha"]["n"] == 3 and summary["categories"]["beta"]["n"] == 3
    assert o["parse_failures"] == 0 and o["ties"] == 0
    assert o["calls_per_item"] > 0 and o["tokens_per_item"] > 0
    assert not any("same text" in prompt_text(p) for p in server.requests)  # the degenerate item was never sent
    # the fixture's chosen responses are the longer ones: a correct pairwise judge always names the longer
    assert o["length_preference"] == (1.0 if method in PAIR_METHODS else None)
    if method in PAIR_METHODS or method == "grade":
        assert o["consistency"] == 1.0 and o["position_bias"] == 0.5
    else:
        assert o["consistency"] is None and o["position_bias"] is None
    if method in ("lwe", "selective-lwe"):
        assert summary["lwe"]["cumulative_accuracy"] == [1.0] * 6
        expected_share = 1.0 if method == "lwe" else 0.0  # a consistent vanilla pair never takes the meta path
        assert summary["lwe"]["meta_path_share"] == expected_share
    if method == "selective-lwe":
        assert summary["lwe"]["vanilla_fig9"]["pair_accuracy"] == 1.0


@pytest.mark.parametrize("method, options", [("flip", Options()), ("pointwise", Options()), ("grade", Options()), ("grade", Options(unrelated=True))])
async def test_correct_judge_scores_one_on_lists(scripted, tmp_path, method, options):
    summary, _ = await bench(scripted, correct_judge, LISTS, method, tmp_path, options=options)
    assert summary["overall"]["n"] == 4 and summary["overall"]["accuracy"] == 1.0
    if options.unrelated:
        assert summary["method_key"] == "grade+unrelated"
        assert summary["grade"]["unrelated_pick_rate"] == 0.0


async def test_biased_grade_on_lists_is_caught_by_rotation(scripted, tmp_path):
    summary, _ = await bench(scripted, first_shown_judge, LISTS, "grade", tmp_path)
    o = summary["overall"]
    # every option is picked once: a tied mode on every item, so none is right
    assert o["accuracy"] == 0.0 and o["ties"] == 4 and o["position_bias"] == 1.0
    assert summary["grade"]["mean_llm_score"] == 0.0


async def test_ties_and_parse_failures_count_as_wrong(scripted, tmp_path):
    def constant(payload):  # every response gets the same rating: every pair is a tie
        return json.dumps({"REASONING": "meh", "SCORE": "5"})

    summary, _ = await bench(scripted, constant, PAIRS, "pointwise", tmp_path, db_name="a.db")
    assert summary["overall"]["ties"] == 6 and summary["overall"]["accuracy"] == 0.0

    def garbage(payload):
        return "I would rather not say."

    summary, server = await bench(scripted, garbage, PAIRS, "grp", tmp_path, db_name="b.db")
    o = summary["overall"]
    assert o["accuracy"] == 0.0 and o["pair_accuracy"] == 0.0 and o["consistency"] == 0.0
    assert o["parse_failures"] == 12 and o["position_bias"] is None
    assert len(server.requests) == 24  # each single-order judgment asked once and re-asked once

    summary, _ = await bench(scripted, garbage, LISTS, "flip", tmp_path, db_name="c.db")
    assert summary["overall"]["accuracy"] == 0.0 and summary["overall"]["parse_failures"] == 14


async def test_pairwise_method_refuses_a_listwise_set(scripted, tmp_path):
    with pytest.raises(BenchError, match="listwise"):
        await bench(scripted, correct_judge, LISTS, "grp", tmp_path)


async def test_rerun_skips_finished_items(scripted, tmp_path):
    seen: list[str] = []

    def counting(payload):
        seen.append(item_of(last_user(payload)))
        return correct_judge(payload)

    server = scripted(counting)
    first, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=3)
    assert first["overall"]["n"] == 3 and len(server.requests) == 6  # 3 items x 2 placements
    before = len(server.requests)
    again, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=3)
    assert len(server.requests) == before and again["overall"]["n"] == 3  # nothing left to do
    full, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server)
    assert full["overall"]["n"] == 6 and full["overall"]["accuracy"] == 1.0
    assert len(server.requests) - before == 6  # p4..p6 only (p0 is degenerate)
    assert set(seen[before:]) == {"p4", "p5", "p6"}
    assert "warnings" not in full and full["run"]["fingerprint"] == full["run"]["started_with_fingerprint"]


async def test_resuming_after_the_prompts_changed_warns(scripted, tmp_path, monkeypatch):
    from judge_mcp.bench import runner
    from judge_mcp.bench.results import methods_fingerprint

    server = scripted(correct_judge)
    first, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=2)
    assert first["run"]["fingerprint"] == methods_fingerprint() and "warnings" not in first
    monkeypatch.setattr(runner, "methods_fingerprint", lambda: "edited000000")
    again, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=3)
    assert again["overall"]["n"] == 3  # the stored judgments are reused, and the summary says so
    assert again["run"]["started_with_fingerprint"] == methods_fingerprint()
    assert len(again["warnings"]) == 1 and "4 stored judgment(s)" in again["warnings"][0] and "edited000000" in again["warnings"][0]


def test_fingerprint_follows_the_prompt_files(tmp_path, monkeypatch):
    from judge_mcp.bench import results

    fake = tmp_path / "pkg" / "judge_mcp" / "bench" / "results.py"
    (tmp_path / "pkg" / "judge_mcp" / "prompts").mkdir(parents=True)
    (tmp_path / "pkg" / "judge_mcp" / "methods").mkdir(parents=True)
    fake.parent.mkdir(parents=True)
    (tmp_path / "pkg" / "judge_mcp" / "prompts" / "a.txt").write_text("Which answer is worse?")
    monkeypatch.setattr(results, "__file__", str(fake))
    before = results.methods_fingerprint()
    (tmp_path / "pkg" / "judge_mcp" / "prompts" / "a.txt").write_text("Which answer is better?")
    assert results.methods_fingerprint() != before


async def test_failing_backend_stores_errors_stops_and_is_retried(scripted, tmp_path):
    broken = {"on": True}

    def flaky(payload):
        return Reply(status=400) if broken["on"] else correct_judge(payload)

    server = scripted(flaky)
    summary, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, app_concurrency=1)
    assert summary["overall"]["n"] == 0 and summary["errors"] >= 1
    assert "400" in summary["error_examples"][0]
    assert len(server.requests) <= MAX_CONSECUTIVE_ERRORS + 1  # it stopped instead of failing through the set
    broken["on"] = False
    summary, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server)
    assert summary["overall"]["n"] == 6 and summary["errors"] == 0


def _done_items(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT item_id FROM bench_results WHERE status = 'done' GROUP BY item_id HAVING COUNT(*) = 2"
        ).fetchall()
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()
    return {r[0] for r in rows}


def test_killed_run_resumes_without_redoing_finished_items(scripted, tmp_path):
    """A real `judge-mcp bench` process is killed mid-run; the re-run asks only about items not finished."""
    seen: list[str] = []
    release = threading.Event()

    def two_items_then_held(payload):
        item = item_of(last_user(payload))
        seen.append(item)
        if item not in list(dict.fromkeys(seen))[:2]:
            release.wait(60)  # every item after the first two waits until the re-run: the kill surely lands mid-run
        return correct_judge(payload)

    server = scripted(two_items_then_held)
    db = tmp_path / "bench.db"
    env = server_env(server.base_url, tmp_path / "judge.db", JUDGE_MCP_MAX_RETRIES="0", JUDGE_MCP_CONCURRENCY="1")
    cmd = [sys.executable, "-m", "judge_mcp", "bench", str(PAIRS), "--method", "grp", "--db", str(db), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_done_items(db)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    finished = _done_items(db)
    assert finished == set(list(dict.fromkeys(seen))[:2]), finished  # the two items answered, nothing else
    release.set()
    before = len(seen)

    out = tmp_path / "summary.json"
    rerun = subprocess.run(cmd + ["--out", str(out)], env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    asked_again = set(seen[before:])
    assert asked_again and not (asked_again & finished)  # finished items were never sent again
    assert asked_again | finished == {"p1", "p2", "p3", "p4", "p5", "p6"}
    summary = json.loads(out.read_text())
    assert summary["overall"]["n"] == 6 and summary["overall"]["pair_accuracy"] == 1.0
    assert summary["run"]["judged_total"] >= 6


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
    # pair acc., single-order acc., JudgeBench score, chosen-first acc., consistency, position bias
    row = rf"^\| vanilla \| 6 \| 0\.000 \| {single:.3f} \| 0\.000 \| 1\.000 \| 0\.000 \| 1\.000 \|"
    assert re.search(row, table, re.M), table
    # by category the strict figure is shown: the always-first judge is right in neither category
    assert "Pair accuracy by category" in table
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


@pytest.mark.model
async def test_bench_on_the_embedded_model(tmp_path):
    """One fixture pair, pointwise, on the bundled SmolLM2: the harness runs end to end on the local backend."""
    app = make_app({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_DB": str(tmp_path / "judge.db")}, store=Store(tmp_path / "bench.db"))
    try:
        summary = await run(app, RunSpec(dataset=PAIRS, method="pointwise", limit=1), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    assert summary["model"].startswith("local/") and summary["errors"] == 0
    assert summary["overall"]["n"] == 1 and summary["overall"]["calls_per_item"] >= 2
    assert summary["overall"]["completion_tokens_per_item"] > 0


# ---- item 3: the Arena-Hard judge as JudgeBench runs it --------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("My final verdict is: [[A>>B]]", ("A>B", False)),
        ("[[B>A]] ... so, again, [[B>A]]", ("B>A", False)),
        ("My final verdict is tie: [[A=B]]", ("A=B", False)),
        ("first [[A>>B]], then [[A>B]]", (None, False)),  # labels that differ as printed: unparsed
        ("[[A>B]] or maybe [[B>A]]", (None, False)),
        ("no label yet", (None, True)),  # no label: JudgeBench continues the conversation once
    ],
)
def test_arena_hard_parse_follows_judgebench(text, expected):
    assert arena_hard.parse_decision(text) == expected


def test_arena_hard_prompts_are_the_judgebench_texts():
    system = prompts.load("arena_hard_system.txt")
    assert system.startswith("Please act as an impartial judge") and "Begin your evaluation by generating your own answer" in system
    for label in ("[[A>>B]]", "[[A>B]]", "[[A=B]]", "[[B>A]]", "[[B>>A]]"):
        assert label in system
    user = prompts.render("arena_hard_user.txt", prompt="P?", answer_a="one", answer_b="two")
    assert user == (
        "<|User Prompt|>\nP?\n\n<|The Start of Assistant A's Answer|>\none\n<|The End of Assistant A's Answer|>\n\n"
        "<|The Start of Assistant B's Answer|>\ntwo\n<|The End of Assistant B's Answer|>"
    )


async def test_arena_hard_sends_judgebench_s_request(scripted, tmp_path):
    summary, server = await bench(scripted, correct_judge, PAIRS, "arena-hard", tmp_path)
    # the fixture's degenerate pair counts wrong in the JudgeBench score, as JudgeBench scores it: 6 of 7
    assert summary["overall"]["judgebench_score"] == round(6 / 7, 4) and summary["overall"]["reasked_verdicts"] == 0
    first = server.requests[0]
    assert first["messages"][0] == {"role": "system", "content": prompts.load("arena_hard_system.txt")}
    assert first["messages"][1]["content"].startswith("<|User Prompt|>\nTask p")
    assert first["max_tokens"] == 4096 and first["temperature"] == 0 and "response_format" not in first
    assert len(server.requests) == 12  # one call per placement, no continuation needed


async def test_arena_hard_tie_is_no_winner_and_counts_wrong(scripted, tmp_path):
    summary, _ = await bench(scripted, lambda p: "Both are fine. My final verdict is tie: [[A=B]]", PAIRS, "arena-hard", tmp_path)
    o = summary["overall"]
    assert o["accuracy"] == 0.0 and o["pair_accuracy"] == 0.0 and o["judgebench_score"] == 0.0
    assert o["ties"] == 6 and o["parse_failures"] == 0 and o["position_bias"] is None


def late_labeller(payload: dict[str, Any]) -> str:
    """Writes no label in its first answer; labels correctly when asked again (a continuation or a re-ask)."""
    if not any(m["role"] == "assistant" for m in payload["messages"]):
        return "Let me first write my own answer to the prompt."
    if is_arena_hard(payload):
        return "Having compared them: " + ("[[A>B]]" if good_first(last_user(payload)) else "[[B>A]]")
    return correct_judge(payload)


async def test_arena_hard_continuation_counted_and_strict_mode_refuses_it(scripted, tmp_path):
    """Item 7: a verdict that came only from JudgeBench's continuation is counted; --no-reask does not send it."""
    server = scripted(late_labeller)
    summary, _ = await bench(scripted, None, PAIRS, "arena-hard", tmp_path, server=server)
    o = summary["overall"]
    assert o["pair_accuracy"] == 1.0 and o["reasked_verdicts"] == 12 and len(server.requests) == 24
    continued = [p for p in server.requests if len(p["messages"]) == 4]
    assert continued and all(p["messages"][3]["content"] == prompts.load("arena_hard_continue.txt") for p in continued)
    # the first answer and the continuation are read together (JudgeBench appends them)

    # a fresh database (so no call cache): the strict run sends the 12 first answers and no continuation
    strict, _ = await bench(scripted, None, PAIRS, "arena-hard", tmp_path, db_name="strict.db", server=server, options=Options(no_reask=True))
    s = strict["overall"]
    assert strict["method_key"] == "arena-hard+strict"
    assert s["pair_accuracy"] == 0.0 and s["parse_failures"] == 12 and s["reasked_verdicts"] == 0
    assert len(server.requests) == 24 + 12 and all(len(p["messages"]) == 2 for p in server.requests[24:])


@pytest.mark.parametrize("method", ["grp", "selective-lwe"])
async def test_no_reask_counts_unparsed_first_answers_wrong(scripted, tmp_path, method):
    """Item 7: by default a verdict that only parsed after the re-ask counts (and is reported); --no-reask is the
    papers' rule, stored under its own method key in the same database."""
    def garbled_first(payload):
        if not any(m["role"] == "assistant" for m in payload["messages"]):
            return "I would rather not say."
        return correct_judge(payload)

    server = scripted(garbled_first)
    lenient, _ = await bench(scripted, None, PAIRS, method, tmp_path, server=server)
    assert lenient["overall"]["pair_accuracy"] == 1.0 and lenient["overall"]["reasked_verdicts"] == 12
    strict, _ = await bench(scripted, None, PAIRS, method, tmp_path, server=server, options=Options(no_reask=True))
    assert strict["method_key"] == f"{method}+strict"
    assert strict["overall"]["pair_accuracy"] == 0.0 and strict["overall"]["reasked_verdicts"] == 0
    if method == "grp":
        assert strict["overall"]["parse_failures"] == 12
    store = Store(tmp_path / "bench.db")
    try:
        methods = {r["method"] for r in store.query("SELECT DISTINCT method FROM bench_results")}
    finally:
        store.close()
    assert methods == {method, f"{method}+strict"}  # stored apart: neither run reuses the other's verdicts


# ---- item 8: LWE as in the paper ------------------------------------------------------------------------------------
async def test_lwe_bench_follows_the_papers_protocol(scripted, tmp_path):
    """Items one at a time in file order; only the chosen-first judgment feeds the buffer; the swapped placement
    is judged with the meta-prompt current at that point; the last partial batch is refined at the end."""
    summary, server = await bench(scripted, first_shown_judge, PAIRS, "selective-lwe", tmp_path, app_concurrency=4)
    # the order requests were sent in follows the file: p1's calls all come before p2's, and so on
    judged = [p for p in server.requests if not last_user(p).startswith("Optimize your current meta prompt")]  # refines quote old items
    order = [m.group(2) for p in judged if (m := TOKEN.search(last_user(p)))]
    firsts = [order.index(k) for k in ("p1", "p2", "p3", "p4", "p5", "p6")]
    lasts = [len(order) - 1 - order[::-1].index(k) for k in ("p1", "p2", "p3", "p4", "p5", "p6")]
    assert all(lasts[k] < firsts[k + 1] for k in range(5))

    store = Store(tmp_path / "bench.db")
    try:
        rows = run_rows(store, summary["dataset"], summary["method_key"], summary["backend_key"])
        versions = {(r["item_id"], r["placement"]): r["record"]["detail"]["meta_prompt_version"] for r in rows if r["status"] == "done"}
        session = f"{next(iter(LweRepository(store).sessions()))['name']}"
        feedback = LweRepository(store).feedback(session)
        history = LweRepository(store).versions(session)
    finally:
        store.close()
    # the 4th learning judgment filled the batch (b=4) and refined v1 -> v2: p4's swapped placement already uses v2
    assert versions == {
        **{(f"p{k}", "chosen_first"): 1 for k in (1, 2, 3, 4)},
        **{(f"p{k}", "chosen_second"): 1 for k in (1, 2, 3)},
        ("p4", "chosen_second"): 2,
        **{(f"p{k}", p): 2 for k in (5, 6) for p in ("chosen_first", "chosen_second")},
    }
    assert len(feedback) == 6 and all(f["status"] == "used" for f in feedback)  # 6 learning judgments, not 12
    assert [h["reason"] for h in history] == ["initial", "refine", "refine"]  # the last 2 items refined at the end
    assert summary["lwe"]["final_refinement"]["items"] == 2 and summary["lwe"]["final_refinement"]["versions"] == [3]
    assert summary["lwe"]["last_meta_prompt_version"] == 3
    assert len(summary["lwe"]["cumulative_accuracy"]) == 6


async def test_lwe_cost_is_relative_to_one_vanilla_judgment(scripted, tmp_path):
    """Item 10: characters of prompts and completions relative to one vanilla (Figure 9) judgment of the item. A
    judge that is consistent on every vanilla pair costs exactly the pair, 2x."""
    consistent, _ = await bench(scripted, correct_judge, PAIRS, "selective-lwe", tmp_path, db_name="c.db")
    assert consistent["lwe"]["relative_cost"] == 2.0 and consistent["lwe"]["relative_cost_with_scoring"] == 2.0
    biased, _ = await bench(scripted, first_shown_judge, PAIRS, "selective-lwe", tmp_path, db_name="b.db")
    assert biased["lwe"]["relative_cost"] > 2.0
    assert biased["lwe"]["relative_cost_with_scoring"] > biased["lwe"]["relative_cost"]
    assert biased["overall"]["chars_per_item"] > consistent["overall"]["chars_per_item"]


# ---- verdict probabilities (ECE, Brier) and adaptive swap ------------------------------------------------------------
def biased_prob_judge(payload: dict[str, Any]) -> Reply:
    """Always names the first-shown answer better: P(first) = 0.9 when it is the good one, 0.6 when it is the bad one."""
    assert schema_name(payload) == "pairwise_verdict"
    p = 0.9 if good_first(last_user(payload)) else 0.6
    content = json.dumps({"own_answer": "x", "evaluation": "y", "verdict": "[[A>B]]"})
    return Reply(content=content, logprobs=logprob_content(content, p))


# ---- by hand --------------------------------------------------------------------------------------------------------
def test_ece_and_brier_by_hand() -> None:
    # p_chosen 0.9 (right, confidence 0.9) x 2, 0.4 (wrong, confidence 0.6) x 2, one missing
    figures = calibration.probability_figures([0.9, 0.9, 0.4, 0.4, None])
    assert figures["n"] == 4 and figures["coverage"] == 0.8 and figures["accuracy"] == 0.5
    assert figures["ece"] == pytest.approx((2 * 0.1 + 2 * 0.6) / 4)
    assert figures["brier"] == pytest.approx((2 * 0.01 + 2 * 0.36) / 4)
    # one bin holding 0.71 and 0.79 (right, wrong): |0.5 - 0.75|
    assert calibration.ece([0.71, 0.79], [True, False]) == pytest.approx(0.25)
    assert calibration.ece([1.0], [True]) == 0.0  # confidence 1.0 falls in the last bin
    assert calibration.probability_figures([None, None]) == {"n": 0, "coverage": 0.0, "accuracy": None, "ece": None, "brier": None}


def test_method_key_names_the_adaptive_variant() -> None:
    assert method_key("grp", Options(adaptive_swap=True)) == "grp+auto"
    assert method_key("vanilla", Options(template="cot", adaptive_swap=True, swap_margin=0.3)) == "vanilla[cot]+auto0.3"
    assert method_key("flip", Options(adaptive_swap=True)) == "flip"


# ---- end to end -----------------------------------------------------------------------------------------------------
async def test_bench_reports_calibration_of_one_order_and_of_both(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path)
    c = summary["calibration"]
    assert c["bins"] == calibration.ECE_BINS
    # per placement: 0.9 (chosen first, right) and 0.4 (chosen second, wrong) on each of the 6 items
    one = c["single_order"]
    assert (one["n"], one["coverage"], one["accuracy"]) == (12, 1.0, 0.5)
    assert one["ece"] == pytest.approx(0.35) and one["brier"] == pytest.approx(0.185)
    # the mean of both orders: 0.65 for the chosen answer on every item, right with confidence 0.65
    both = c["both_orders"]
    assert (both["n"], both["accuracy"]) == (6, 1.0)
    assert both["ece"] == pytest.approx(0.35) and both["brier"] == pytest.approx(0.1225)
    assert one["p_first_shown"] == pytest.approx((0.9 + 0.6) / 2)  # the probability-level position bias
    assert summary["overall"]["pair_accuracy"] == 0.0  # the labels alone: always the first shown
    assert "adaptive" not in summary


async def test_without_log_probabilities_the_columns_are_null(scripted, tmp_path) -> None:
    summary, _ = await bench(scripted, correct_judge, PAIRS, "grp", tmp_path)
    c = summary["calibration"]
    assert c["single_order"]["coverage"] == 0.0 and c["single_order"]["ece"] is None and c["both_orders"]["brier"] is None


async def test_adaptive_swap_beside_swap_true_on_the_same_items(scripted, tmp_path) -> None:
    summary, server = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path, options=Options(adaptive_swap=True))
    assert summary["method_key"] == "grp+auto"
    a = summary["adaptive"]
    assert a["judgments"] == 12 and a["second_order_share"] == 0.5
    # chosen first: P = 0.9, margin 0.8 >= 0.5, one order, right; chosen second: P = 0.6, margin 0.2, both orders
    # judged, they disagree (each names the first shown): no winner, wrong
    assert a["auto"] == {"calls_per_judgment": 1.5, "accuracy": 0.5, "pair_accuracy": 0.0}
    assert a["swap_true"] == {"calls_per_judgment": 2.0, "accuracy": 0.0, "pair_accuracy": 0.0}
    assert (a["one_order_judgments"], a["one_order_accuracy"]) == (6, 1.0)
    assert a["single_order"] == {"position_bias": 1.0, "pair_accuracy": 0.0}  # the plain verdicts: always the first
    o = summary["overall"]
    assert o["accuracy"] == 1.0 and o["pair_accuracy"] == 0.0 and o["ties"] == 6  # the record's verdict is auto's
    # every request but the two distinct orders per item came from the call cache
    assert o["calls_per_item"] == 2.0 and len(server.requests) == 12

    tight, _ = await bench(scripted, biased_prob_judge, PAIRS, "grp", tmp_path, db_name="b2.db", options=Options(adaptive_swap=True, swap_margin=0.9))
    assert tight["method_key"] == "grp+auto0.9" and tight["adaptive"]["second_order_share"] == 1.0
    assert tight["adaptive"]["auto"]["calls_per_judgment"] == 2.0

    page = report.render([summary])
    assert "swap auto vs swap true on the same 12 judgments" in page and "10-bin ECE" in page
    assert "calls/judgment 1.500 vs 2.000" in report.markdown([summary])
    assert "swap auto: second order in 0.500 of 12 judgments" in bench_cli.format_summary(summary)


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


def test_the_longer_response_of_a_pair_and_equal_lengths():
    from judge_mcp.bench.data import Item

    pair = dict(seq=0, id="x", category="c", kind="pairwise", prompt="q")
    assert Item(**pair, chosen="a long answer", rejected="short").longer == "chosen"
    assert Item(**pair, chosen="short", rejected="a long answer").longer == "rejected"
    assert Item(**pair, chosen="same!", rejected="other").longer is None  # equal lengths: left out
    assert Item(seq=0, id="y", category="c", kind="listwise", prompt="q", responses=("a", "bb")).longer is None
