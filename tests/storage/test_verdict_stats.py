"""The bias telemetry's counters (storage/verdict_stats.py), kept as verdicts are written: judge_stats' figures from
them equal the figures of a scan of every row of the log (stats.scan_store, what judge_stats computed before the
counters) on the same log, after writes through the tool path, retention, the backfill of an old database, and two
writers at once."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from judge_mcp.stats import report as stats
from judge_mcp.contract.args import ComparePairArgs, GradeScoreOptionsArgs, InferInstructionRewardArgs, LweJudgeArgs
from testkit.synthetic_verdicts import fill, synthetic
from judge_mcp.storage import retention, verdict_facts
from judge_mcp.storage.engine import dumps
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines

PRE_COUNTERS = MIGRATIONS[: MIGRATIONS.index(next(m for m in MIGRATIONS if m.__name__ == "m012_verdict_stats"))]


def _same(store, lasts=(1, 7, 50)) -> None:
    total = stats.scan_store(store, 1).all_time.verdicts
    for last in (*lasts, max(total - 1, 1), max(total, 1), total + 5):
        assert stats.from_store(store, last) == stats.scan_store(store, last), last


def test_the_storage_names_are_the_tools_names() -> None:
    assert (verdict_facts.COMPARE_PAIR, verdict_facts.LWE_JUDGE) == (ComparePairArgs.tool, LweJudgeArgs.tool)
    assert (verdict_facts.GRADE_SCORE, verdict_facts.FLIP) == (GradeScoreOptionsArgs.tool, InferInstructionRewardArgs.tool)
    assert verdict_facts.ANSWERS == ComparePairArgs.ANSWERS


@on_both_engines
def test_counters_equal_a_scan_of_the_log(store) -> None:
    rng = random.Random(7)
    log = VerdictLog(store)
    for _ in range(120):
        log.log(*synthetic(rng).args())
    report = stats.from_store(store, 30)
    tools = {g.tool for g in report.all_time.groups}
    assert tools == {"compare_pair", "lwe_judge", "grade_score_options", "infer_instruction_reward", "pointwise_score"}
    assert {g.inputs for g in report.all_time.groups} >= {"text", "criteria", "reference", "images"}
    assert any(g.backend == "panel" for g in report.all_time.groups) and report.all_time.verdicts == 120
    assert any(g.reasks.count for g in report.all_time.groups if g.tool == "lwe_judge")  # from the call records
    _same(store)


@on_both_engines
def test_the_bulk_fill_writes_what_the_tool_path_writes(store, tmp_path: Path) -> None:
    fill(store, 300, seed=3, page=64)
    _same(store)
    other = SqliteEngine(tmp_path / "one-by-one.db")
    try:
        rng = random.Random(3)
        for _ in range(300):
            VerdictLog(other).log(*synthetic(rng).args())
        mine, theirs = stats.from_store(store, 40), stats.from_store(other, 40)
        assert mine.all_time.groups == theirs.all_time.groups and mine.last.groups == theirs.last.groups
    finally:
        other.close()


@on_both_engines
def test_retention_takes_deleted_verdicts_off_the_counters(store) -> None:
    """'All time' is every verdict the log still holds: a trim leaves the figures of what is left."""
    fill(store, 200, seed=5, start_at=1000.0)  # one verdict a second from t = 1000
    before = stats.from_store(store, 10)
    assert retention.gc(store, verdicts_older_than_s=time.time() - 1079.5)["verdicts"] == 80  # t < 1079.5 (+ microseconds)
    after = stats.from_store(store, 10)
    assert (after.all_time.verdicts, after.all_time.oldest_at) == (120, 1080.0)
    assert after.last == before.last  # the newest ten are untouched
    assert after.all_time != before.all_time
    _same(store)
    log = VerdictLog(store)
    rng = random.Random(1)
    for _ in range(5):
        log.log(*synthetic(rng).args())
    _same(store)
    assert retention.gc(store, verdicts_older_than_s=-10)["verdicts"] == 125  # everything
    empty = stats.from_store(store, 10)
    assert (empty.all_time.verdicts, empty.all_time.groups, empty.all_time.oldest_at, empty.last.verdicts) == (0, [], None, 0)


def _old_log(store) -> None:
    """Rows as the log held them before the counters (no facts, no counters), one of them unreadable."""
    rng = random.Random(11)
    with store.transaction() as tx:
        for k in range(2500):
            v = synthetic(rng)
            tx.execute(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [v.tool, v.backend, v.model, *(dumps(x) for x in (v.inputs, v.output, v.usage, v.calls)), 1000.0 + k],
            )
        tx.execute("INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES ('compare_pair', 'default', 'm', '{', '{not json', '{', '[', 5000)")


def test_an_old_database_is_backfilled_and_keeps_its_figures(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = SqliteEngine(db, PRE_COUNTERS)
    _old_log(old)
    expected = stats.scan_store(old, 100)
    old.close()
    assert "verdict_facts" not in {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    store = SqliteEngine(db)  # every migration: m010 backfills 2,501 rows in pages of 1,000
    try:
        report = stats.from_store(store, 100)
        assert report == expected and (report.all_time.verdicts, report.all_time.skipped, report.last.skipped) == (2501, 1, 1)
        VerdictLog(store).log(*synthetic(random.Random(2)).args())  # and the counters go on from there
        _same(store)
        assert retention.gc(store, verdicts_older_than_s=time.time() - 5000.5)["verdicts"] == 2501  # the unreadable one too
        assert (stats.from_store(store, 5).all_time.skipped, stats.from_store(store, 5).all_time.verdicts) == (0, 1)
        _same(store)
    finally:
        store.close()


def test_an_old_postgresql_database_is_backfilled(postgres_server) -> None:
    from judge_mcp.storage.postgres import PostgresEngine

    postgres_url = postgres_server.create_database(f"t_old_log_{os.getpid()}")
    old = PostgresEngine(postgres_url, PRE_COUNTERS)
    _old_log(old)
    expected = stats.scan_store(old, 100)
    old.close()
    migrated = PostgresEngine(postgres_url)
    try:
        assert stats.from_store(migrated, 100) == expected and expected.all_time.skipped == 1
    finally:
        migrated.close()


WRITER = """
import random, sys
from testkit.synthetic_verdicts import synthetic
from judge_mcp.storage.sqlite import SqliteEngine
from judge_mcp.storage.verdict_log import VerdictLog
store = SqliteEngine(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
log = VerdictLog(store)
for _ in range(150):
    log.log(*synthetic(rng).args())
store.close()
"""


def test_two_processes_on_one_sqlite_file_lose_no_counts(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    SqliteEngine(db).close()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(seed)]) for seed in (1, 2)]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    store = SqliteEngine(db)
    try:
        assert stats.from_store(store, 10).all_time.verdicts == 300
        _same(store)
    finally:
        store.close()


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_two_postgresql_replicas_lose_no_counts(store, postgres_url) -> None:
    from judge_mcp.storage.postgres import PostgresEngine

    replicas = [PostgresEngine(postgres_url), PostgresEngine(postgres_url)]
    errors: list[BaseException] = []

    def write(replica, seed: int) -> None:
        try:
            rng = random.Random(seed)
            for _ in range(150):
                VerdictLog(replica).log(*synthetic(rng).args())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(r, seed)) for r, seed in zip(replicas, (1, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in replicas:
        r.close()
    assert errors == []
    assert stats.from_store(store, 10).all_time.verdicts == 300
    _same(store)
