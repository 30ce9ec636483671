"""Retention: each judged text is stored once (inputs), call records and cache rows keep the request's shape
and cache key, and old call-cache and verdict-log rows can be deleted (`judge-mcp gc`, or ages applied at start)
without touching LWE sessions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from mcp import Client

from judge_mcp.cli import main as cli
from judge_mcp.server.build import build_server
from judge_mcp.storage import texts
from tests.helpers import app_env, make_app
from testkit.scripted_judges import CAPITAL_Q, UniversalJudge

MARK_A, MARK_B = "QZXMARKA" * 3, "QZXMARKB" * 3
LONG_PAIR = {"prompt": CAPITAL_Q, "response_a": f"Sydney. {MARK_A} " + "x" * 3000, "response_b": f"Canberra. {MARK_B} " + "y" * 3000}


def _occurrences(db: Path, needle: str) -> int:
    """How many times `needle` is stored: in the verdicts' and the cache's JSON, and in the long texts stored once."""
    conn = sqlite3.connect(str(db))
    try:
        total = 0
        for table, columns in (("verdicts", ("inputs", "output", "calls")), ("call_cache", ("request", "response"))):
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table}"):
                total += sum(str(value).count(needle) for value in row)
        return total + sum(texts.unpack(body).count(needle) for (body,) in conn.execute("SELECT body FROM text_bodies"))
    finally:
        conn.close()


async def test_each_judged_text_is_stored_once(mcp_app, tmp_path: Path) -> None:
    server, backend = mcp_app(UniversalJudge())
    async with Client(server) as client:
        result = await client.call_tool("compare_pair", LONG_PAIR)
    assert not result.is_error
    db = tmp_path / "judge.db"
    assert _occurrences(db, MARK_A) == 1 and _occurrences(db, MARK_B) == 1  # the verdict's inputs' texts only
    conn = sqlite3.connect(str(db))
    try:
        calls = json.loads(conn.execute("SELECT calls FROM verdicts").fetchone()[0])
        keys = {row[0] for row in conn.execute("SELECT key FROM call_cache")}
    finally:
        conn.close()
    assert len(calls) == 2 and {c["cache_key"] for c in calls} == keys  # each record points at its cache row
    assert all(c["request"]["messages"][0]["chars"] > 6000 and c["text"] for c in calls)


async def _judge_some(settings_env: dict[str, str]) -> None:
    app = make_app(settings_env)
    try:
        async with Client(build_server(app)) as client:
            assert not (await client.call_tool("compare_pair", LONG_PAIR)).is_error
            assert not (await client.call_tool("lwe_judge", {**LONG_PAIR, "session": "kept"})).is_error
    finally:
        await app.aclose()


def _age_everything(db: Path, days: float) -> None:
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:
        for table in ("verdicts", "call_cache"):
            conn.execute(f"UPDATE {table} SET created_at = created_at - ?", [days * 86400])
    finally:
        conn.close()


def _counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(str(db))
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("verdicts", "call_cache", "lwe_sessions", "lwe_versions")}
    finally:
        conn.close()


async def test_gc_deletes_old_cache_and_verdict_rows_and_keeps_sessions(scripted, tmp_path: Path, monkeypatch, capsys) -> None:
    backend = scripted(UniversalJudge())
    db = tmp_path / "judge.db"
    env = app_env(backend, db)
    await _judge_some(env)
    before = _counts(db)
    assert before["verdicts"] == 2 and before["call_cache"] >= 2 and before["lwe_sessions"] == 1
    _age_everything(db, days=10)
    await _judge_some(env)  # fresh rows (new cache rows only where not cached)
    fresh = _counts(db)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["gc", "--cache-days", "5", "--verdict-days", "5", "--vacuum"]) == 0
    after = _counts(db)
    assert after["verdicts"] == fresh["verdicts"] - 2  # the two old verdicts went, the two new stayed
    assert after["call_cache"] == 0  # every cache row was written in the first round (the second hit the cache)
    assert after["lwe_sessions"] == 1 and after["lwe_versions"] == before["lwe_versions"]
    assert "deleted" in capsys.readouterr().out


async def test_ages_in_the_environment_apply_at_start(scripted, tmp_path: Path) -> None:
    backend = scripted(UniversalJudge())
    db = tmp_path / "judge.db"
    env = app_env(backend, db)
    await _judge_some(env)
    _age_everything(db, days=3)
    app = make_app({**env, "JUDGE_MCP_VERDICTS_MAX_AGE_DAYS": "2"})  # the cache age is not set: kept
    await app.aclose()
    counts = _counts(db)
    assert counts["verdicts"] == 0 and counts["call_cache"] > 0 and counts["lwe_sessions"] == 1


def test_gc_with_nothing_to_do_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("JUDGE_MCP_DB", str(tmp_path / "j.db"))
    assert cli.main(["gc"]) == 2
    assert "nothing to do" in capsys.readouterr().err
