"""Resumable bench runs: a re-run skips finished items (also after the process was killed mid-run), a resume after the
prompts changed warns, the fingerprint follows the prompt files, and a failing backend's errors are stored, stop the
run, and are retried next time."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from judge_mcp.bench.runner import MAX_CONSECUTIVE_ERRORS
from testkit.scripted_servers import Reply
from testkit.scripted_judges import first_user
from testkit.server_process import server_env
from tests.bench.datasets import PAIRS, bench, item_of, right_judge


async def test_rerun_skips_finished_items(scripted, tmp_path):
    seen: list[str] = []

    def counting(payload):
        seen.append(item_of(first_user(payload)))
        return right_judge(payload)

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
    from judge_mcp.bench.stored_runs import methods_fingerprint

    server = scripted(right_judge)
    first, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=2)
    assert first["run"]["fingerprint"] == methods_fingerprint() and "warnings" not in first
    monkeypatch.setattr(runner, "methods_fingerprint", lambda: "edited000000")
    again, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=3)
    assert again["overall"]["n"] == 3  # the stored judgments are reused, and the summary says so
    assert again["run"]["started_with_fingerprint"] == methods_fingerprint()
    assert len(again["warnings"]) == 1 and "4 stored judgment(s)" in again["warnings"][0] and "edited000000" in again["warnings"][0]


def test_fingerprint_follows_the_prompt_files(tmp_path, monkeypatch):
    from judge_mcp.bench import stored_runs as results

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
        return Reply(status=400) if broken["on"] else right_judge(payload)

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
        item = item_of(first_user(payload))
        seen.append(item)
        if item not in list(dict.fromkeys(seen))[:2]:
            release.wait(60)  # every item after the first two waits until the re-run: the kill surely lands mid-run
        return right_judge(payload)

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


async def test_an_item_whose_line_changed_is_judged_again(scripted, tmp_path):
    """A re-run after an item's gold label was corrected in the file (chosen and rejected swapped) judged nothing and
    scored the item from its stale judgment (pair accuracy 1.0 for a judge now wrong on it); the same happened for
    another file of the same name. Unchanged items are still skipped."""
    rows = [r for r in map(json.loads, PAIRS.read_text().splitlines()) if r["id"] in ("p1", "p2", "p3")]
    data = tmp_path / "data" / "pairs.jsonl"
    data.parent.mkdir()
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen: list[str] = []

    def counting(payload):
        seen.append(item_of(first_user(payload)))
        return right_judge(payload)  # names the GOOD-<id> answer, whichever is the file's chosen one

    server = scripted(counting)
    first, _ = await bench(scripted, None, data, "grp", tmp_path, server=server)
    assert first["overall"]["pair_accuracy"] == 1.0 and len(server.requests) == 6
    rows[1]["chosen"], rows[1]["rejected"] = rows[1]["rejected"], rows[1]["chosen"]  # p2's label corrected
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = len(server.requests)
    again, _ = await bench(scripted, None, data, "grp", tmp_path, server=server, app_concurrency=1)
    assert again["overall"]["n"] == 3 and again["overall"]["pair_accuracy"] == 2 / 3
    assert again["categories"]["alpha"]["accuracy"] == 2 / 3
    assert [w for w in again["warnings"] if "changed since this run judged them (p2)" in w]
    assert set(seen[before:]) <= {"p2"}  # only p2 is judged again (its prompts may come from the call cache)

    again2, _ = await bench(scripted, None, data, "grp", tmp_path, server=server)
    assert again2["overall"]["pair_accuracy"] == 2 / 3 and "warnings" not in again2  # stored, now current


async def test_items_a_stopped_run_never_reached_count_as_not_finished(scripted, tmp_path, capsys):
    """A run stopped by failures in a row counted only the items that errored: the ones it never reached were in no
    figure (`incomplete` 0) and the exit message told of the errors alone."""
    from judge_mcp.bench.command import failed_items_status

    data = tmp_path / "many.jsonl"
    data.write_text("".join(json.dumps({"id": f"m{i}", "category": "c", "prompt": f"Task m{i}", "chosen": f"GOOD-m{i} yes",
                                        "rejected": f"BAD-m{i} no"}) + "\n" for i in range(12)))
    server = scripted(lambda payload: Reply(status=500))
    summary, _ = await bench(scripted, None, data, "grp", tmp_path, server=server, app_concurrency=1, concurrency=1)
    assert len(server.requests) == MAX_CONSECUTIVE_ERRORS  # one item in flight: it stopped after 12 failed placements
    assert (summary["items"], summary["overall"]["n"], summary["errors"], summary["incomplete"]) == (12, 0, 6, 6)
    assert failed_items_status(summary) == 1
    assert "6 item(s) errored and 6 item(s) not finished" in capsys.readouterr().err


async def test_items_that_timed_out_are_told_to_raise_the_timeout_not_to_run_the_same_command(scripted, tmp_path, capsys):
    """Issue 49 item 5: after a timeout the bench said "run the same command again", which times out the same way; it
    names the setting to raise and the value to pass instead."""
    from judge_mcp.bench.command import failed_items_status

    server = scripted(lambda payload: Reply(content="late", delay_s=3))
    summary, _ = await bench(scripted, None, PAIRS, "vanilla", tmp_path, server=server, limit=1, env={"JUDGE_MCP_TIMEOUT_S": "0.3"})
    assert summary["errors"] == 1 and "raise JUDGE_MCP_TIMEOUT_S above 0.3" in summary["error_examples"][0]
    assert failed_items_status(summary) == 1
    said = capsys.readouterr().err
    assert "raise JUDGE_MCP_TIMEOUT_S above 0.3, then run it again" in said and "run the same command again to retry" not in said
