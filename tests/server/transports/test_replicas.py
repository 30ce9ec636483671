"""End to end: two `judge-mcp serve --transport http` replicas (stateless) on one PostgreSQL database behind a real
nginx (round-robin), driven by the official MCP client (testkit/replica_set.py, testkit/postgres_server.py).

- calls spread over both replicas all succeed, each verdict logged once;
- identical concurrent requests from several clients reach the scripted backend once each;
- concurrent lwe_judge calls on one session from several clients keep its versions contiguous, every feedback item
  used at most once;
- kill -9 of one replica mid-load loses no acknowledged verdict and the other replica goes on;
- a PostgreSQL restart mid-load gives clear errors, then recovery, with nothing half-written.
The kill and the restart come last: they change the cluster the earlier tests share.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from testkit.replica_set import Replicas, nginx_binary
from testkit.scripted_servers import ScriptedServer, prompt_text
from testkit.scripted_judges import BAD, GOOD, UniversalJudge
from tests.helpers import delayed


def pair(tag: str) -> dict[str, str]:
    return {"prompt": f"What is the capital of Australia? [{tag}]", "response_a": f"{GOOD} [{tag}]", "response_b": f"{BAD} [{tag}]"}


def _psycopg(url: str):
    import psycopg
    from psycopg.rows import dict_row

    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


@pytest.fixture(scope="module")
def cluster(postgres_server, tmp_path_factory) -> Any:
    if nginx_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is missing under CI (.ci/run installs it)")
        pytest.skip("no nginx on this machine: apt-get install nginx")
    backend = ScriptedServer(delayed(UniversalJudge(), lambda: random.uniform(0.15, 0.25))).start()
    url = postgres_server.create_database(f"replicas_{os.getpid()}")
    replicas = Replicas(2, url, backend.base_url, tmp_path_factory.mktemp("replicas"))
    replicas.db_url, replicas.backend = url, backend  # type: ignore[attr-defined]
    yield replicas
    replicas.stop()
    backend.stop()


async def call(url: str, tool: str, args: dict[str, Any]) -> Any:
    """One tool call through a client of its own (initialize, the call), the structured result; raises on an error."""
    async with Client(url) as client:
        result = await client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(result.content[0].text)
        return result.structured_content


async def each(n: int, fn) -> list[Any]:
    """fn(k) for k < n concurrently; each result or raised exception, by k."""
    out: list[Any] = [None] * n

    async def one(k: int) -> None:
        try:
            out[k] = await fn(k)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            out[k] = exc

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for k in range(n):
                tg.start_soon(one, k)
    return out


def leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def verdicts(db_url: str) -> dict[str, list[dict[str, Any]]]:
    """The verdict log's compare_pair rows by tag; every row's JSON columns parse and are whole."""
    with _psycopg(db_url) as conn:
        rows = conn.execute("SELECT * FROM verdicts WHERE tool = 'compare_pair' ORDER BY id").fetchall()
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        inputs, output, usage, calls = (json.loads(row[c]) for c in ("inputs", "output", "usage", "calls"))
        assert {"winner", "trials", "usage"} <= set(output) and len(calls) == usage["calls"] + usage["cached_calls"]
        out.setdefault(inputs["prompt"].rsplit("[", 1)[1].rstrip("]"), []).append(output)
    return out


def test_calls_spread_over_both_replicas_all_succeed(cluster) -> None:
    results = anyio.run(each, 12, lambda k: call(cluster.url, "compare_pair", pair(f"spread-{k}")))
    assert [r["winner"] if isinstance(r, dict) else r for r in results] == ["A"] * 12
    served = cluster.nginx.served_by()
    assert set(served) == {f"127.0.0.1:{s.port}" for s in cluster.servers}, served  # both replicas answered
    logged = verdicts(cluster.db_url)
    assert all(len(logged[f"spread-{k}"]) == 1 for k in range(12))


def test_identical_concurrent_requests_reach_the_backend_once(cluster) -> None:
    backend = cluster.backend
    before = len(backend.requests)
    results = anyio.run(each, 8, lambda k: call(cluster.url, "compare_pair", pair("same")))
    assert [r["winner"] if isinstance(r, dict) else r for r in results] == ["A"] * 8
    sent = [json.dumps(p, sort_keys=True) for p in backend.requests[before:] if "[same]" in prompt_text(p)]
    assert sent and max(Counter(sent).values()) == 1  # each distinct request once, whichever replica asked
    assert len(cluster.nginx.served_by()) == 2


def test_concurrent_lwe_calls_on_one_session_keep_versions_contiguous(cluster) -> None:
    def case(k: int) -> dict[str, Any]:
        a, b = (f"GOOD {GOOD} #{k}", f"{BAD} #{k}") if k % 2 else (f"{BAD} #{k}", f"GOOD {GOOD} #{k}")
        return {"prompt": f"Which is right? #{k}", "response_a": a, "response_b": b, "session": "team", "batch_size": 2, "selective": False}

    async def client(c: int) -> list[Any]:
        return [await call(cluster.url, "lwe_judge", case(3 * c + i)) for i in range(3)]

    results = anyio.run(each, 4, client)
    assert all(isinstance(r, list) for r in results), results
    with _psycopg(cluster.db_url) as conn:
        versions = conn.execute("SELECT version, parent, reason, feedback_ids FROM lwe_versions WHERE session = 'team' ORDER BY version").fetchall()
        feedback = conn.execute("SELECT id, status, used_in_version FROM lwe_feedback WHERE session = 'team'").fetchall()
        current = conn.execute("SELECT current_version FROM lwe_sessions WHERE name = 'team'").fetchone()["current_version"]
    assert [v["version"] for v in versions] == list(range(1, len(versions) + 1)) and current == len(versions) > 1
    assert [v["parent"] for v in versions] == [None] + [v["version"] for v in versions[:-1]]  # one chain
    used = [i for v in versions for i in json.loads(v["feedback_ids"])]
    assert len(used) == len(set(used))  # no item used twice
    assert len(feedback) == 12  # no item lost
    for item in feedback:
        assert (item["status"] == "used") == (item["id"] in used)
        if item["status"] == "used":
            assert json.loads(next(v["feedback_ids"] for v in versions if v["version"] == item["used_in_version"])).count(item["id"]) == 1


def test_kill_9_of_one_replica_mid_load_loses_no_acknowledged_verdict(cluster) -> None:
    acked: dict[str, str] = {}

    async def load() -> None:
        done = anyio.Event()

        async def client(c: int) -> None:
            for k in range(6):
                tag = f"kill-{c}-{k}"
                try:
                    acked[tag] = (await call(cluster.url, "compare_pair", pair(tag)))["winner"]
                except Exception:  # noqa: BLE001 - calls in flight on the killed replica fail
                    pass
                if len(acked) >= 6 and not done.is_set():
                    done.set()
                    cluster.servers[0].kill()  # mid-load: the other clients' calls are in flight

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for c in range(4):
                    tg.start_soon(client, c)

    anyio.run(load)
    assert cluster.servers[0].proc.poll() is not None  # it was killed
    logged = verdicts(cluster.db_url)
    assert all(len(logged.get(tag, [])) == 1 and logged[tag][0]["winner"] == w for tag, w in acked.items())
    after = anyio.run(each, 4, lambda k: call(cluster.url, "compare_pair", pair(f"after-kill-{k}")))
    assert [r["winner"] if isinstance(r, dict) else r for r in after] == ["A"] * 4  # the other replica goes on


def test_a_postgres_restart_mid_load_gives_clear_errors_then_recovery(cluster, postgres_server) -> None:
    outcomes: dict[str, str] = {}
    unwritten: set[str] = set()

    async def load() -> None:
        restarted = anyio.Event()

        async def restart() -> None:
            await anyio.sleep(0.5)
            await anyio.to_thread.run_sync(postgres_server.stop, "immediate")  # mid-load: calls are in flight
            with anyio.move_on_after(20):  # down until clients have seen what an outage looks like
                while not any(o.startswith("error") for o in outcomes.values()):
                    await anyio.sleep(0.1)
            await anyio.to_thread.run_sync(postgres_server.restart)
            restarted.set()

        async def client(c: int) -> None:
            k = 0
            while not restarted.is_set() or k < 3:
                tag = f"restart-{c}-{k}"
                try:
                    result = await call(cluster.url, "compare_pair", pair(tag))
                    outcomes[tag] = result["winner"]
                    if any("row of this call is not written yet" in w for w in result.get("warnings", [])):
                        unwritten.add(tag)  # answered before its row was in: the row follows, or is counted lost
                except Exception as exc:  # noqa: BLE001 - collected: what a client sees while the database is down
                    outcomes[tag] = f"error: {leaf(exc)!r}"
                k += 1

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(restart)
                for c in range(3):
                    tg.start_soon(client, c)

    anyio.run(load)
    errors = [o for o in outcomes.values() if o.startswith("error")]
    assert errors, "the restart cut no call"
    assert all("database" in e and "postgresql://judge@127.0.0.1" in e for e in errors), errors  # named, not an internal error
    # recovery: calls after the restart succeed (a replica's stale pooled connection may fail one more call)
    later = anyio.run(each, 6, lambda k: call(cluster.url, "compare_pair", pair(f"after-restart-{k}")))
    assert sum(isinstance(r, dict) and r["winner"] == "A" for r in later) >= 5, later
    final = anyio.run(each, 4, lambda k: call(cluster.url, "compare_pair", pair(f"recovered-{k}")))
    assert [r["winner"] if isinstance(r, dict) else r for r in final] == ["A"] * 4
    logged = verdicts(cluster.db_url)  # nothing half-written: every row whole (checked there), acknowledged ones once
    counts = {tag: len(logged.get(tag, [])) for tag, o in outcomes.items() if o == "A"}
    assert all(n == 1 for tag, n in counts.items() if tag not in unwritten), (counts, unwritten)
    # an answer that said its row was not written yet: the row came later (once) or was given up on, never twice
    assert all(n <= 1 for n in counts.values()), (counts, unwritten)


def test_health_and_readiness_need_no_token_and_say_nothing_else(cluster) -> None:
    with httpx.Client(timeout=10) as http:
        port = cluster.servers[1].port
        assert http.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
        ready = http.get(f"http://127.0.0.1:{port}/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        assert http.post(f"http://127.0.0.1:{port}/readyz").status_code == 405
