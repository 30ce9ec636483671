"""The PostgreSQL engine on a real server (testkit/postgres_server.py): bad configuration is a clear error at start with
the password redacted, replicas starting at once migrate a new database once, a server restart fails what it cut
and then recovers, LWE versions stay contiguous across processes, and the call cache's leases make identical
requests in flight in two stores (two replicas) reach the backend once, a dead holder's lease being taken over."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import anyio
import pytest

from judge_mcp.backends.base import user
from testkit.scripted_servers import Reply
from testkit.server_process import free_port
from judge_mcp.calls.cache import CallCache, scoped_key
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.redaction import RedactingFilter
from judge_mcp.storage import open_store
from judge_mcp.storage.engine import StoreError
from judge_mcp.storage.lwe_sessions import LweConflict, LweRepository
from judge_mcp.storage.migrations import MIGRATIONS
from judge_mcp.storage.pg_leases import MINE, PgLeases
from judge_mcp.storage.postgres import PostgresEngine
from judge_mcp.storage.sqlite import SqliteEngine
from tests.engines import on_both_engines
from tests.helpers import http_backend, until

PASSWORD = "s3cret-Pg-pass-31337"


def test_an_unreachable_server_is_named(postgres_server) -> None:
    url = f"postgresql://judge:{PASSWORD}@127.0.0.1:{free_port()}/judge"
    with pytest.raises(StoreError) as caught:
        open_store(url, MIGRATIONS)
    message = str(caught.value)
    assert "cannot open the database" in message and "JUDGE_MCP_DB" in message and "refused" in message.lower()
    assert PASSWORD not in message and "judge:[redacted]@127.0.0.1" in message


def test_a_wrong_password_is_named_and_never_shown(postgres_server, caplog) -> None:
    base = postgres_server.require_password("pw_user", "the-right-one-4242")
    wrong = base.replace("pw_user@", f"pw_user:{PASSWORD}@")
    with pytest.raises(StoreError, match="password authentication failed") as caught:
        PostgresEngine(wrong)
    assert PASSWORD not in str(caught.value) and "[redacted]" in str(caught.value)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "opening %s failed", (wrong,), None)
    RedactingFilter().filter(record)  # what every handler of the server's logging does (cli._setup_logging)
    assert PASSWORD not in record.getMessage()
    import psycopg

    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE pw_db OWNER pw_user")
    right = PostgresEngine(base.replace("pw_user@", "pw_user:the-right-one-4242@").replace("/postgres", "/pw_db"))
    right.close()


def test_serve_with_an_unreachable_database_stops_at_start_naming_it(postgres_server, monkeypatch, capsys) -> None:
    from judge_mcp.cli.main import main

    monkeypatch.setenv("JUDGE_MCP_DB", f"postgresql://judge:{PASSWORD}@127.0.0.1:{free_port()}/judge")
    monkeypatch.setenv("JUDGE_MCP_BACKEND", "openai")
    monkeypatch.setenv("JUDGE_MCP_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["serve", "--transport", "http", "--stateless"]) == 2
    err = capsys.readouterr().err
    # (after the start's note on the local model server, when there is one)
    assert any(line.startswith("judge-mcp: cannot open the database 'postgresql://judge:[redacted]@127.0.0.1:") for line in err.splitlines())
    assert "Traceback" not in err
    assert PASSWORD not in err


def test_a_missing_database_is_named(postgres_server) -> None:
    with pytest.raises(StoreError, match='database "no_such_db" does not exist'):
        PostgresEngine(postgres_server.url("no_such_db"))


def test_a_url_of_another_scheme_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"SQLite file path, a postgresql:// URL or a libpq keyword DSN .*; got a mysql:// URL") as caught:
        load_settings({"JUDGE_MCP_DB": f"mysql://root:{PASSWORD}@db/judge"})
    assert PASSWORD not in str(caught.value)
    settings = load_settings({"JUDGE_MCP_DB": f"postgresql://judge:{PASSWORD}@db/judge"})
    assert settings.database == f"postgresql://judge:{PASSWORD}@db/judge" and PASSWORD not in repr(settings)
    assert load_settings({"JUDGE_MCP_DB": "/tmp/x/judge.db"}).database.name == "judge.db"


def test_another_applications_database_is_left_untouched(postgres_url) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:  # another application's table, made with psycopg itself
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(StoreError, match=r"another application's tables \(invoices\)"):
        PostgresEngine(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").fetchone()[0] == 1


@on_both_engines
def test_a_database_migrated_by_a_newer_version_is_refused(store) -> None:
    with store.transaction() as tx:
        tx.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_from_the_future', 0)")
    location = store.url if isinstance(store, PostgresEngine) else store.path
    with pytest.raises(StoreError, match=r"migrated by a newer judge-mcp .*m999_from_the_future"):
        open_store(location, MIGRATIONS)


def test_replicas_starting_at_once_migrate_a_new_database_once(postgres_url) -> None:
    barrier, stores, errors = threading.Barrier(4), [], []

    def start() -> None:
        barrier.wait()
        try:
            stores.append(PostgresEngine(postgres_url))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert errors == [] and len(stores) == 4
        names = [row["name"] for row in stores[0].query("SELECT name FROM _migrations ORDER BY name")]
        assert names == sorted(fn.__name__ for fn in MIGRATIONS)  # each once
    finally:
        for store in stores:
            store.close()


def test_a_server_restart_fails_what_it_cut_then_the_store_recovers(postgres_server, postgres_url) -> None:
    store = PostgresEngine(postgres_url, connect_timeout_s=2)  # how long a statement waits for a connection while it is down
    try:
        LweRepository(store).ensure_session("s", 4, "initial")
        assert store.query("SELECT 1 AS one") == [{"one": 1}]
        postgres_server.stop("immediate")
        with pytest.raises(StoreError, match=r"could not (read|write) the database 'postgresql://judge@127\.0\.0\.1:\d+/t_"):
            store.query("SELECT 1 AS one")
        postgres_server._start()
        deadline, done = time.monotonic() + 30, None
        while done is None and time.monotonic() < deadline:
            try:
                done = LweRepository(store).commit_version("s", expected_version=1, text="v2", reason="refine")
            except StoreError:  # a pooled connection from before the restart fails once, then is replaced
                time.sleep(0.2)
        assert done == 2 and [v["version"] for v in LweRepository(store).versions("s")] == [1, 2]
    finally:
        store.close()


def test_lwe_versions_stay_contiguous_when_processes_commit_from_one_version(postgres_url) -> None:
    stores = [PostgresEngine(postgres_url) for _ in range(4)]
    try:
        repo = LweRepository(stores[0])
        repo.ensure_session("shared", 2, "initial")
        ids = [repo.add_feedback("shared", _item(k))[0] for k in range(2)]
        barrier, outcomes = threading.Barrier(4), []

        def refine(store: PostgresEngine) -> None:
            barrier.wait()
            try:
                outcomes.append(LweRepository(store).commit_version("shared", expected_version=1, text="v2", reason="refine", use_feedback=ids))
            except LweConflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=refine, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(outcomes, key=str) == [2, "conflict", "conflict", "conflict"]
        assert [(v["version"], v["parent"]) for v in repo.versions("shared")] == [(1, None), (2, 1)]
        assert [(f["status"], f["used_in_version"]) for f in repo.feedback("shared")] == [("used", 2), ("used", 2)]
    finally:
        for store in stores:
            store.close()


def _item(k: int) -> dict:
    return {"meta_version": 1, "prompt": f"q{k}", "response_a": "a", "response_b": "b", "eval_prompt": "e", "judgment": "j",
            "winner": "A", "feedback": "f", "feedback_parse_ok": True}


async def test_identical_requests_in_flight_in_two_replicas_reach_the_backend_once(scripted, postgres_url) -> None:
    server = scripted(lambda p: Reply(content="the one answer", delay_s=0.4))
    stores = [PostgresEngine(postgres_url), PostgresEngine(postgres_url)]  # two replicas' stores: each its own pool and leases
    backends = [http_backend(server, max_retries=0) for _ in stores]
    caches = [CallCache(store) for store in stores]
    request = user("judge this once", system="be fair")
    results: list = []
    try:
        async def one(k: int) -> None:
            results.append(await caches[k % 2].complete(backends[k % 2], request))

        async with anyio.create_task_group() as tg:
            for k in range(10):
                tg.start_soon(one, k)
        assert len(server.requests) == 1
        assert [c.text for c, _ in results] == ["the one answer"] * 10
        assert sorted(cached for _, cached in results) == [False] + [True] * 9
        assert stores[1].query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 1
        assert stores[1].query("SELECT COUNT(*) AS n FROM call_leases")[0]["n"] == 0
    finally:
        for backend in backends:
            await backend.aclose()
        for store in stores:
            store.close()


async def test_a_dead_holders_lease_runs_out_and_another_replica_sends_the_request(scripted, postgres_url) -> None:
    server = scripted(lambda p: "answered by the survivor")
    dead_store, live_store = PostgresEngine(postgres_url), PostgresEngine(postgres_url)
    backend = http_backend(server, max_retries=0)
    request = user("who answers?")
    key = scoped_key(request.cache_key(backend.identity()), "tenant:local")  # the key as this process's calls claim it
    dead = PgLeases(dead_store, ttl_s=1.0)
    dead.close()  # a holder that never renews: as a replica killed right after its claim
    try:
        assert dead.claim(key, dead.token())[0] == MINE
        started = time.monotonic()
        completion, cached = await CallCache(live_store).complete(backend, request)
        waited = time.monotonic() - started
        assert (completion.text, cached, len(server.requests)) == ("answered by the survivor", False, 1)
        assert waited >= 0.5  # it waited for the lease to run out rather than sending at once
        assert live_store.query("SELECT COUNT(*) AS n FROM call_leases")[0]["n"] == 0
    finally:
        await backend.aclose()
        dead_store.close()
        live_store.close()


async def test_a_failed_holder_gives_its_lease_up_and_a_waiter_sends_the_request(scripted, postgres_url) -> None:
    calls = []

    def respond(payload: dict) -> Reply:
        calls.append(time.monotonic())
        # the first call is held, then fails; the second replica waits on its lease meanwhile
        return Reply(status=400, content="bad", delay_s=0.5) if len(calls) == 1 else Reply(content="second try")

    server = scripted(lambda p: respond(p))
    first, second = PostgresEngine(postgres_url), PostgresEngine(postgres_url)
    backends = [http_backend(server, max_retries=0) for _ in range(2)]
    request = user("fails once")
    try:
        async def ask(store: PostgresEngine, backend) -> object:
            try:
                return (await CallCache(store).complete(backend, request))[0].text
            except Exception as exc:  # noqa: BLE001 - collected
                return type(exc).__name__

        holder = asyncio.ensure_future(ask(first, backends[0]))
        await until(lambda: calls)  # the holder has its lease and is at the backend (a fixed head start raced under load)
        waiter = asyncio.ensure_future(ask(second, backends[1]))
        outcomes = [await holder, await waiter]
        assert len(server.requests) == 2 and outcomes[1] == "second try" and outcomes[0] != "second try"
        assert first.query("SELECT COUNT(*) AS n FROM call_leases")[0]["n"] == 0
    finally:
        for backend in backends:
            await backend.aclose()
        first.close()
        second.close()


def test_the_sqlite_engine_offers_no_leases(store: SqliteEngine) -> None:
    assert getattr(store, "leases", None) is None and CallCache(store).leases is None


def test_a_url_is_shown_without_its_password_in_any_form() -> None:
    from judge_mcp.redaction import known
    from judge_mcp.storage.pg_url import is_postgres_url, register_secrets, shown

    url = "postgresql://judge:p%40ss-w0rd-9@db.internal:5432/judge?sslmode=require"
    assert shown(url) == "postgresql://judge:[redacted]@db.internal:5432/judge?sslmode=require"
    in_query = "postgres://judge@db/judge?password=query-secret-77&sslmode=require"
    assert "query-secret-77" not in shown(in_query) and "sslmode=require" in shown(in_query)
    register_secrets(url)
    register_secrets(in_query)
    assert {"p%40ss-w0rd-9", "p@ss-w0rd-9", "query-secret-77"} <= set(known())  # blanked out of every log record
    assert is_postgres_url(url) and is_postgres_url(in_query) and not is_postgres_url("/var/lib/judge.db")
