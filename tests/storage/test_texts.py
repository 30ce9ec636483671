"""Long model replies are stored once (judge_mcp/storage/texts.py): a reply of at least texts.LONG characters is kept
compressed in `text_bodies`, and the call cache's row, the verdict's call record and output, and LWE's feedback
buffer refer to it by hash; every read (a cache hit, the verdict log's rows, the session's feedback) gets it back, retention deletes a text only when no row left refers to it,
a row whose text is gone is never served as a cache hit, databases written before keep their inline texts readable,
and a failed write leaves nothing of itself."""

from __future__ import annotations

import json

import anyio
import pytest

from judge_mcp import tenants
from testkit.scripted_judges import CAPITAL_Q, UniversalJudge
from judge_mcp.runtime.run import run_method
from judge_mcp.calls.cache import scoped_key
from judge_mcp.storage import open_store, retention, texts
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.engine import StoreError, dumps
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.storage.migrations import MIGRATIONS, m010_texts
from judge_mcp.storage.verdict_log import VerdictLog
from tests.engines import on_both_engines
from tests.helpers import app_env, make_app

MARK = "QZXREPLYMARK"
PAIR = {"prompt": CAPITAL_Q, "response_a": "Sydney.", "response_b": "Canberra."}


class LongJudge:
    """UniversalJudge whose compare_pair replies carry a long evaluation, a different one per request."""

    def __init__(self, chars: int = 5000):
        self.judge = UniversalJudge()
        self.chars = chars
        self.replies: list[str] = []

    def __call__(self, payload):
        answer = json.loads(self.judge(payload))
        words = " ".join(f"w{len(self.replies)}x{k}" for k in range(self.chars // 6))
        answer["evaluation"] = f"{MARK} {words}"
        self.replies.append(json.dumps(answer))
        return self.replies[-1]


def _raw(store, table: str, column: str) -> list[str]:
    return [str(row[column]) for row in store.query(f"SELECT {column} FROM {table}")]


def _count(store, sql: str) -> int:
    return int(store.query(sql)[0]["n"])


async def _compare(store, server) -> dict:
    app = make_app(app_env(server, "unused.db"), store=store)
    try:
        result, _ = await run_method(app, "compare_pair", PAIR)
        return result.model_dump(mode="json")
    finally:
        await app.verdict_writes.drain()
        for backend in app._backends.values():
            await backend.aclose()


@on_both_engines
async def test_a_long_reply_is_stored_once_and_every_read_gets_it_back(store, scripted) -> None:
    judge = LongJudge()
    server = scripted(judge)
    first = await _compare(store, server)
    assert len(judge.replies) == 2
    # once each: compressed in text_bodies; the cache rows and the call records hold its hash, not the text
    assert _count(store, "SELECT COUNT(*) AS n FROM texts") == 2 == _count(store, "SELECT COUNT(*) AS n FROM text_bodies")
    stored = [texts.unpack(row["body"]) for row in store.query("SELECT body FROM text_bodies")]
    assert sorted(stored) == sorted(judge.replies)
    for table, column in (("call_cache", "response"), ("verdicts", "calls"), ("verdicts", "inputs")):
        assert all(MARK not in value for value in _raw(store, table, column))
    calls = json.loads(_raw(store, "verdicts", "calls")[0])
    assert all("text" not in c for c in calls) and {c["text_refs"]["text"] for c in calls} == {texts.sha256(r) for r in judge.replies}
    # the verdict log's rows read with their texts (an audit of the verdict sees the whole reply)
    row = VerdictLog(store).recent()[0]
    assert sorted(c["text"] for c in row["calls"]) == sorted(judge.replies) and all("text_refs" not in c for c in row["calls"])
    # a re-run (a new App: nothing in memory) is answered from the cache with the same verdict, no backend call
    again = await _compare(store, server)
    assert len(server.requests) == 2 and again["usage"]["cached_calls"] == 2
    assert {k: v for k, v in again.items() if k not in ("usage", "verdict_id")} == {k: v for k, v in first.items() if k not in ("usage", "verdict_id")}
    # the cache hit's verdict refers to the same texts: still one copy each
    assert _count(store, "SELECT COUNT(*) AS n FROM text_bodies") == 2
    assert sorted(c["text"] for c in VerdictLog(store).recent()[0]["calls"]) == sorted(judge.replies)


@on_both_engines
async def test_a_short_reply_stays_inline(store, scripted) -> None:
    server = scripted(UniversalJudge())
    await _compare(store, server)
    assert _count(store, "SELECT COUNT(*) AS n FROM texts") == 0
    calls = json.loads(_raw(store, "verdicts", "calls")[0])
    assert all(c["text"] and len(c["text"]) < texts.LONG for c in calls)


@on_both_engines
async def test_retention_deletes_a_text_only_when_no_row_refers_to_it(store, scripted) -> None:
    judge = LongJudge()
    await _compare(store, scripted(judge))
    cache_keys = [row["key"] for row in store.query("SELECT key FROM call_cache")]
    # the cache rows go; the verdict still refers to the texts: they stay and read back
    counts = retention.gc(store, cache_older_than_s=-1)
    assert counts == {"call_cache": 2, "verdicts": 0, "labels": 0, "texts": 0}
    assert sorted(c["text"] for c in VerdictLog(store).recent()[0]["calls"]) == sorted(judge.replies)
    # the verdicts go too, with the cache still under its age: no row refers to the texts any more
    counts = retention.gc(store, cache_older_than_s=-1, verdicts_older_than_s=-1)
    assert counts == {"call_cache": 0, "verdicts": 1, "labels": 0, "texts": 2}
    assert _count(store, "SELECT COUNT(*) AS n FROM text_bodies") == 0
    assert CacheTable(store).get_many(cache_keys) == {}


@on_both_engines
async def test_verdict_retention_alone_keeps_the_texts_cache_rows_refer_to(store, scripted) -> None:
    judge = LongJudge()
    server = scripted(judge)
    first = await _compare(store, server)
    assert retention.gc(store, verdicts_older_than_s=-1) == {"call_cache": 0, "verdicts": 1, "labels": 0, "texts": 0}
    again = await _compare(store, server)  # the cache rows still answer, texts and all
    assert len(server.requests) == 2 and again["winner"] == first["winner"] and again["trials"] == first["trials"]


@on_both_engines
def test_a_cache_row_whose_text_is_gone_is_a_miss_not_an_answer(store) -> None:
    long_text = MARK + " x" * texts.LONG
    rows = [CacheRow("k-long", "b", "m", {}, {"text": long_text, "model": "m"}), CacheRow("k-short", "b", "m", {}, {"text": "short", "model": "m"})]
    table = CacheTable(store)
    table.put_many(rows)
    assert table.get_many(["k-long", "k-short"])["k-long"]["text"] == long_text
    with store.transaction() as tx:
        tx.execute("DELETE FROM text_bodies")
    found = table.get_many(["k-long", "k-short"])
    assert set(found) == {"k-short"}  # the long one is sent again, never answered without its text


@on_both_engines
def test_a_failed_verdict_write_leaves_no_text_behind(store) -> None:
    long_text = MARK + " y" * texts.LONG
    rows = [CacheRow("k1", "b", "m", {}, {"text": long_text, "model": "m"})]
    calls = [{"purpose": "p", "text": long_text + " other"}]
    with pytest.raises(StoreError):
        VerdictLog(store).log(None, "b", "m", {}, {}, {}, calls, rows)  # type: ignore[arg-type]  # tool NOT NULL fails last
    for table in ("texts", "text_bodies", "call_cache", "verdicts"):
        assert _count(store, f"SELECT COUNT(*) AS n FROM {table}") == 0


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_rows_written_before_the_texts_table_read_as_they_did(engine, tmp_path, request) -> None:
    """A database made by the schema before m008 (its rows with inline texts) is migrated and reads unchanged."""
    location = request.getfixturevalue("postgres_url") if engine == "postgresql" else tmp_path / "old.db"
    old = open_store(location, MIGRATIONS[: MIGRATIONS.index(m010_texts)])
    long_text = MARK + " z" * texts.LONG
    with old.transaction() as tx:
        tx.execute(
            "INSERT INTO call_cache (key, backend, model, request, response, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            ["old-key", "b", "m", "{}", dumps({"text": long_text, "model": "m"}), 1.0],
        )
        tx.execute(
            "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ["lwe_judge", "b", "m", dumps({"response_a": long_text}), dumps({"judgment": long_text}), "{}",
             dumps([{"purpose": "p", "text": long_text}]), 1.0],
        )
        tx.execute("INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at) VALUES ('s', 1, 4, 1.0, 1.0)")
        tx.execute(
            "INSERT INTO lwe_feedback (session, meta_version, prompt, response_a, response_b, eval_prompt, judgment, winner,"
            " feedback, feedback_parse_ok, created_at) VALUES ('s', 1, 'q', ?, 'b', 'e', ?, 'A', 'f', 1, 1.0)",
            [long_text, long_text],
        )
    assert "m010_texts" not in {row["name"] for row in old.query("SELECT name FROM _migrations")}
    old.close()
    store = open_store(location, MIGRATIONS)
    try:
        with tenants.acting(tenants.legacy(store.dialect.name)):  # whose the rows from before tenants are (m013_tenants)
            old_key = scoped_key("old-key", "tenant:local")  # m020: an unscoped row is the local tenant's
            assert CacheTable(store).get_many([old_key])[old_key]["text"] == long_text
            row = VerdictLog(store).recent()[0]
            assert (row["inputs"], row["output"], row["calls"]) == ({"response_a": long_text}, {"judgment": long_text}, [{"purpose": "p", "text": long_text}])
            item = LweRepository(store).pending("s")[0]
            assert (item["response_a"], item["judgment"], item["feedback"]) == (long_text, long_text, "f") and "text_refs" not in item
            VerdictLog(store).log("compare_pair", "b", "m", {}, {}, {}, [{"purpose": "p", "text": long_text}])  # new rows: the new way
            assert _count(store, "SELECT COUNT(*) AS n FROM texts") == 1
            assert [row["calls"][0]["text"] for row in VerdictLog(store).recent()] == [long_text, long_text]
            assert retention.gc(store, cache_older_than_s=0, verdicts_older_than_s=0)["verdicts"] == 2
    finally:
        store.close()


async def test_replicas_share_a_long_answer_through_the_leases(scripted, postgres_url) -> None:
    """PostgreSQL's leases write a new answer at once (one statement: its text, its row, the lease released); the
    other replica, waiting for it, reads it with its text."""
    from judge_mcp.backends.base import user
    from testkit.scripted_servers import Reply
    from judge_mcp.calls.cache import CallCache
    from judge_mcp.storage.postgres import PostgresEngine
    from tests.helpers import http_backend

    long_text = MARK + " v" * texts.LONG
    server = scripted(lambda p: Reply(content=long_text, delay_s=0.4))
    stores = [PostgresEngine(postgres_url), PostgresEngine(postgres_url)]
    backends = [http_backend(server, max_retries=0) for _ in stores]
    caches = [CallCache(store) for store in stores]
    request = user("judge this once, at length", system="be fair")
    results: list = []
    try:
        async def one(k: int) -> None:
            results.append(await caches[k % 2].complete(backends[k % 2], request))

        async with anyio.create_task_group() as tg:
            for k in range(4):
                tg.start_soon(one, k)
        assert len(server.requests) == 1 and [c.text for c, _ in results] == [long_text] * 4
        assert all(MARK not in value for value in _raw(stores[1], "call_cache", "response"))
        assert _count(stores[1], "SELECT COUNT(*) AS n FROM texts WHERE cache_used_at IS NOT NULL") == 1
        fresh = CallCache(stores[1])  # nothing in memory: read from the table, text and all
        completion, cached = await fresh.complete(backends[1], request)
        assert cached and completion.text == long_text and len(server.requests) == 1
    finally:
        for backend in backends:
            await backend.aclose()
        for store in stores:
            store.close()


@on_both_engines
async def test_lwe_keeps_its_long_texts_once_and_reads_them_back_after_retention(store, scripted) -> None:
    from testkit.scripted_judges import LweScript

    reasoning = MARK + " the answers differ in " + "detail " * 80
    feedback = json.dumps({"score": 4, "label": "Not sure", "learned tips": "compare carefully", "reasoning": reasoning})
    server = scripted(LweScript("first", feedback_reply=lambda n: feedback))  # position-biased: the meta-prompt path
    pair = {"prompt": CAPITAL_Q, "response_a": "Canberra. " + "a" * 400, "response_b": "Sydney. " + "b" * 400, "session": "s"}
    app = make_app(app_env(server, "unused.db"), store=store)
    try:
        result, _ = await run_method(app, "lwe_judge", pair)
    finally:
        await app.verdict_writes.drain()
        for backend in app._backends.values():
            await backend.aclose()
    output = result.model_dump(mode="json")
    assert output["path"] == "meta_prompt" and len(output["feedback"]) >= texts.LONG
    raw = store.query("SELECT response_a, feedback, text_refs FROM lwe_feedback")[0]
    assert raw["response_a"] == "" and raw["feedback"] == "" and set(json.loads(raw["text_refs"])) >= {"response_a", "response_b", "feedback"}
    assert all(MARK not in value for value in _raw(store, "verdicts", "output"))
    logged = VerdictLog(store).recent()[0]["output"]
    assert logged["feedback"] == output["feedback"] and "text_refs" not in logged
    # retention of everything else leaves the session's texts: LWE state is never deleted
    retention.gc(store, cache_older_than_s=-1, verdicts_older_than_s=-1)
    item = LweRepository(store).pending("s")[0]
    assert (item["response_a"], item["response_b"]) == (pair["response_a"], pair["response_b"])
    assert item["feedback"] == output["feedback"] and "text_refs" not in item
    assert LweRepository(store).feedback("s")[0]["feedback"] == output["feedback"]


@on_both_engines
def test_judge_stats_reads_the_lengths_and_inputs_of_judged_texts_stored_once(store) -> None:
    from judge_mcp.stats import report as stats

    long_a, long_b = "é" * (texts.LONG + 10), "b" * (texts.LONG + 20)  # A: fewer characters, more bytes
    inputs = {"prompt": "q", "response_a": long_a, "response_b": long_b, "criteria": "c" * texts.LONG}
    VerdictLog(store).log("compare_pair", "default", "m", inputs,
                          {"winner": "A", "trials": [{"order": "AB", "better": "A", "parse_ok": True}]}, {"calls": 1}, [])
    raw = json.loads(_raw(store, "verdicts", "inputs")[0])  # the long texts are stored apart, the short prompt inline
    assert raw["prompt"] == "q" and set(raw["text_refs"]) == {"response_a", "response_b", "criteria"} and "response_a" not in raw
    assert VerdictLog(store).recent()[0]["inputs"] == inputs
    g = stats.from_store(store).all_time.groups[0]
    assert g.inputs == "criteria" and (g.length_preference.count, g.length_preference.of) == (0, 1)  # the shorter won


@on_both_engines
def test_the_long_contents_of_a_conversation_are_stored_once(store) -> None:
    page = "Canberra " * texts.LONG  # a long tool result, seen by both runs
    run_a = [{"role": "assistant", "tool_calls": [{"id": "c", "name": "read", "arguments": {"url": "x"}}]},
             {"role": "tool", "tool_call_id": "c", "content": page}, {"role": "assistant", "content": "Canberra."}]
    run_b = [run_a[0], {"role": "tool", "tool_call_id": "c", "content": page}, {"role": "assistant", "content": "Sydney."}]
    inputs = {"prompt": [{"role": "user", "content": "q"}], "response_a": run_a, "response_b": run_b}
    grade = {"instruction": "q", "options": [run_a, run_b]}
    log = VerdictLog(store)
    log.log("compare_pair", "default", "m", inputs, {"winner": "A", "trials": []}, {"calls": 1}, [])
    log.log("grade_score_options", "default", "m", grade, {"winner_index": 0}, {"calls": 1}, [])
    raw = [json.loads(r) for r in _raw(store, "verdicts", "inputs")]
    assert all(page not in json.dumps(r) for r in raw)  # kept apart, by hash
    assert raw[0]["response_a"][1]["text_refs"]["content"] == raw[0]["response_b"][1]["text_refs"]["content"] == texts.sha256(page)
    assert raw[0]["response_a"][2] == {"role": "assistant", "content": "Canberra."}  # a short content stays inline
    assert len(_raw(store, "texts", "sha256")) == 1  # one text for four uses
    assert [row["inputs"] for row in log.recent()] == [grade, inputs]  # every read gets them back
    assert inputs["response_a"][1]["content"] == page  # the caller's inputs were not changed
