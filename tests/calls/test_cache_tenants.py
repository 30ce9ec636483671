"""The call cache tells no tenant what another judged (issue 46, break 3): by default each tenant has its own cached
answers and its own calls in flight, on SQLite and on PostgreSQL across two replicas (their leases too);
`JUDGE_MCP_SHARED_CACHE=1` shares the configured backends' answers across tenants. Real `judge-mcp serve --transport
http` processes with a tokens file, a scripted OpenAI-compatible backend counting the requests it receives."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from judge_mcp import tenants
from judge_mcp.backends.base import user
from judge_mcp.calls.cache import CallCache, scoped_key
from judge_mcp.storage import open_store
from judge_mcp.storage.call_cache import CacheRow, CacheTable
from judge_mcp.storage.migrations import MIGRATIONS, m020_cache_keys_by_tenant
from testkit.scripted_judges import PAIR, UniversalJudge
from testkit.server_process import HttpServer, server_env
from tests.engines import on_both_engines
from tests.helpers import delayed, http_backend, token_client

pytestmark = pytest.mark.anyio

TOKEN_A = "team-a-token-0123456789abcdef"
TOKEN_B = "team-b-token-fedcba9876543210"


def _tokens(tmp_path: Path) -> str:
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN_A} team-a\n{TOKEN_B} team-b\n")
    os.chmod(path, 0o600)
    return str(path)


def _database(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if engine == "postgresql":
        return request.getfixturevalue("postgres_server").create_database(f"t_cache_tenants_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}")
    return str(tmp_path / "judge.db")


async def _judge(url: str, token: str, args: dict[str, Any]) -> dict[str, Any]:
    http, client = token_client(url, token, mode="legacy")
    async with http, client:
        result = await client.call_tool("compare_pair", args)
    assert not result.is_error, result.content
    return result.structured_content


def _pair(tag: str) -> dict[str, str]:
    return {key: f"{value} [{tag}]" for key, value in PAIR.items()}


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
@pytest.mark.parametrize("shared", [False, True])
async def test_a_tenant_is_never_answered_from_another_tenants_cache_unless_shared(scripted, tmp_path: Path, request, engine: str, shared: bool) -> None:
    """Tenant B sends tenant A's exact compare_pair arguments: by default B's calls reach the backend (cached_calls 0),
    on two servers sharing the database (PostgreSQL: two replicas, with leases); B's own repeat is answered from B's
    cache. With JUDGE_MCP_SHARED_CACHE=1, B is answered from A's answers."""
    backend = scripted(UniversalJudge())
    db = _database(engine, tmp_path, request)
    extra = {"JUDGE_MCP_HTTP_TOKENS": _tokens(tmp_path), **({"JUDGE_MCP_SHARED_CACHE": "1"} if shared else {})}
    first = HttpServer(server_env(backend.base_url, db, **extra), log=tmp_path / "first.log")
    second = HttpServer(server_env(backend.base_url, db, **extra), log=tmp_path / "second.log") if engine == "postgresql" else first
    try:
        a = await _judge(first.url, TOKEN_A, PAIR)
        sent_by_a = len(backend.requests)
        b = await _judge(second.url, TOKEN_B, PAIR)
        sent_by_b = len(backend.requests) - sent_by_a
        b_again = await _judge(second.url, TOKEN_B, PAIR)
        a_again = await _judge(first.url, TOKEN_A, PAIR)
    finally:
        first.kill()
        second.kill()
    assert a["usage"]["cached_calls"] == 0 and sent_by_a == 2
    if shared:
        assert b["usage"]["cached_calls"] == 2 and b["usage"]["calls"] == 0 and sent_by_b == 0
    else:
        assert b["usage"]["cached_calls"] == 0 and b["usage"]["calls"] == 2 and sent_by_b == 2
    assert b["winner"] == a["winner"] == "B"
    assert b_again["usage"]["cached_calls"] == 2 and a_again["usage"]["cached_calls"] == 2  # each tenant's own cache works
    assert len(backend.requests) == (2 if shared else 4)


async def test_two_tenants_in_flight_at_once_on_two_replicas_each_send_their_own_request(scripted, tmp_path: Path, request) -> None:
    """Single-flight is per tenant too, across replicas (PostgreSQL's leases): A and B sending the same arguments at the
    same time on two replicas each get their answers from the backend; neither waits for nor joins the other's call."""
    backend = scripted(delayed(UniversalJudge(), 0.5))
    db = _database("postgresql", tmp_path, request)
    extra = {"JUDGE_MCP_HTTP_TOKENS": _tokens(tmp_path)}
    first = HttpServer(server_env(backend.base_url, db, **extra), log=tmp_path / "first.log")
    second = HttpServer(server_env(backend.base_url, db, **extra), log=tmp_path / "second.log")
    results: dict[str, dict[str, Any]] = {}
    args = _pair("together")

    async def one(name: str, url: str, token: str) -> None:
        results[name] = await _judge(url, token, args)

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "a", first.url, TOKEN_A)
                tg.start_soon(one, "b", second.url, TOKEN_B)
    finally:
        first.kill()
        second.kill()
    assert results["a"]["usage"]["cached_calls"] == 0 and results["b"]["usage"]["cached_calls"] == 0
    assert len(backend.requests) == 4  # both orders, once per tenant


@on_both_engines
async def test_in_process_keys_name_the_tenant_and_sampling_answers_are_never_shared(store, scripted) -> None:
    """CallCache.scope: the tenant by default; with shared=True one scope for configured backends, but a backend whose
    answers are private (sampling, the client's own model) stays per tenant."""
    server = scripted(UniversalJudge())
    backend = http_backend(server, max_retries=1)
    try:
        shared, own = CallCache(store, shared=True), CallCache(store)
        with tenants.acting("team-a"):
            assert own.scope(backend) == "tenant:team-a" and shared.scope(backend) == "shared"
            await own.complete(backend, user("the same text"))
        with tenants.acting("team-b"):
            _, cached = await own.complete(backend, user("the same text"))
            assert not cached and len(server.requests) == 2
            backend.private_answers = True  # as SamplingBackend
            assert shared.scope(backend) == "tenant:team-b"
    finally:
        await backend.aclose()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_rows_cached_before_keys_had_a_scope_are_the_local_tenants_only(engine: str, tmp_path: Path, request) -> None:
    """m020: an old row (key without a scope) may be any tenant's answer; it is kept for tenant `local` (stdio, the
    bench, the operator who has the database) and never found under an HTTP tenant's key."""
    location = request.getfixturevalue("postgres_url") if engine == "postgresql" else tmp_path / "old.db"
    old = open_store(location, MIGRATIONS[: MIGRATIONS.index(m020_cache_keys_by_tenant)])
    key = user("an old question").cache_key("openai|m")
    CacheTable(old).put_many([CacheRow(key, "openai|m", "m", {}, {"text": "old answer", "model": "m", "usage": {}})])
    old.close()
    store = open_store(location, MIGRATIONS)
    try:
        assert scoped_key(key, "tenant:local") == hashlib.sha256(f"tenant:local\n{key}".encode()).hexdigest()
        table = CacheTable(store)
        assert table.get_many([key, scoped_key(key, "tenant:default"), scoped_key(key, "shared")]) == {}
        assert table.get_many([scoped_key(key, "tenant:local")])[scoped_key(key, "tenant:local")]["text"] == "old answer"
    finally:
        store.close()
