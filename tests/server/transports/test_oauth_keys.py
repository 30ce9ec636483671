"""Issue 46, break 1: anonymous JWT-shaped tokens must not stall authenticated calls nor make the server hammer the
identity provider. The issuer is a real JWKS server on 127.0.0.1 (testkit/jwks_issuer.py) whose fetches are counted;
the server is the real HTTP app under uvicorn in a thread. How long the static-token client waits during a flood is
measured by perf/oauth_flood.py (a ratio, not a timed test); here: fetch counts, the shared worker-thread limiter left
alone, and a static-token call served while the issuer hangs."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from judge_mcp.server.transports.admission import Limits
from judge_mcp.server.transports.issuer_keys import FETCH_EVERY_S, MIN_FETCH_GAP_S, IssuerKeys
from judge_mcp.server.transports.oauth import JwtVerifier, OAuthSettings
from testkit.jwks_issuer import JwksIssuer, nested_header_token
from tests.helpers import ACCEPT, INIT
from tests.server.transports.test_tenants import TOKEN_A, _open_session, _Served

pytestmark = pytest.mark.anyio


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _verifier(issuer: JwksIssuer, clock: _Clock | None = None, **settings: object) -> JwtVerifier:
    keys = IssuerKeys(issuer.jwks_url, clock=clock or _Clock(), timeout_s=120)  # a held issuer holds until released
    return JwtVerifier(OAuthSettings(issuer.url, "judge-test", issuer.jwks_url, **settings), keys)  # type: ignore[arg-type]


_CLIENT = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=64))  # thread-safe: shared by a flood's threads


@pytest.fixture(autouse=True, scope="module")
def _close_client():
    yield
    _CLIENT.close()


def _status(url: str, token: str) -> int:
    return _CLIENT.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}"}).status_code


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_made_up_kids_against_a_failing_issuer_cost_one_fetch_per_gap(tmp_path: Path) -> None:
    """On 254e9ed every request after a failed fetch fetched again (100 tokens: 138 fetches of an issuer answering
    500). Now a failed fetch and an unknown kid are remembered until MIN_FETCH_GAP_S has passed."""
    clock = _Clock()
    with JwksIssuer(mode="error") as issuer:
        verifier = _verifier(issuer, clock)
        with _Served(tmp_path, Limits(), {TOKEN_A: "team-a"}, oauth=verifier) as served:
            url = f"http://127.0.0.1:{served.port}/mcp"
            statuses = [_status(url, issuer.bogus()) for _ in range(100)]
            good = issuer.token()
            refused_good = _status(url, good)  # no keys yet: the issuer has never answered
            fetches_while_failing = issuer.fetches
            issuer.mode = "ok"
            assert _status(url, good) == 401  # the failure is remembered until the gap has passed
            clock.now += MIN_FETCH_GAP_S
            accepted = _status(url, good)  # the next fetch may start: it finds the key
            after_recovery = issuer.fetches
            more = [_status(url, issuer.bogus()) for _ in range(50)]
            static = _status(url, TOKEN_A)
        fetches = issuer.fetches
    assert set(statuses) == {401} and refused_good == 401 and set(more) == {401} and static == 200
    assert fetches_while_failing == 1 and verifier.keys.failures == 1
    assert accepted == 200 and after_recovery == 2 and fetches == 2


def test_a_key_rotated_in_is_found_and_keys_are_refreshed_in_the_background(tmp_path: Path) -> None:
    clock = _Clock()
    with JwksIssuer() as issuer:
        verifier = _verifier(issuer, clock)
        with _Served(tmp_path, Limits(), oauth=verifier) as served:
            url = f"http://127.0.0.1:{served.port}/mcp"
            assert _status(url, issuer.token()) == 200
            issuer.kids.append("k2")  # the issuer rotates a key in
            rotated = issuer.token(kid="k2")
            early = _status(url, rotated)  # within the gap: refused at once, no fetch
            fetches_early = issuer.fetches
            clock.now += MIN_FETCH_GAP_S
            found = _status(url, rotated)
            assert issuer.fetches == 2
            clock.now += FETCH_EVERY_S  # due a refresh: the next request starts it and does not wait for it
            assert _status(url, issuer.token()) == 200
            _wait_for(lambda: issuer.fetches == 3, "no background refresh")
    assert early == 401 and fetches_early == 1 and found == 200


def test_an_anonymous_flood_while_the_issuer_hangs_holds_no_static_token_call(tmp_path: Path) -> None:
    """On 254e9ed each made-up kid took a worker thread of anyio's shared limiter and waited for the issuer under
    PyJWT's lock: a static-token client's call waited until the issuer answered. Here the issuer does not answer
    until the static-token call is done; at most WAITERS_PER_PEER flood requests of one address wait for its keys
    (the rest: 503)."""
    with JwksIssuer(mode="hold") as issuer:
        verifier = _verifier(issuer)
        with _Served(tmp_path, Limits(), {TOKEN_A: "team-a"}, oauth=verifier) as served:
            url = f"http://127.0.0.1:{served.port}/mcp"
            with ThreadPoolExecutor(max_workers=64) as pool:
                flood = [pool.submit(_status, url, issuer.bogus()) for _ in range(200)]
                _wait_for(lambda: issuer.waiting == 1, "the flood never reached the issuer")
                stats = _static_judge_stats(url)
                in_flight = issuer.waiting == 1 and verifier.keys.failures == 0  # the server's one fetch still waits
                issuer.release()
                statuses = [f.result() for f in flood]
        fetches = issuer.fetches
    assert in_flight and fetches == 1
    assert stats["all_time"]["verdicts"] == 0
    # past WAITERS_PER_PEER waiting, the flood's requests were told to retry (503), the rest refused (401)
    assert 503 in statuses and set(statuses) <= {401, 503}


def _static_judge_stats(url: str) -> dict:
    opened = _open_session(url, TOKEN_A)
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "authorization": f"Bearer {TOKEN_A}", "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
    httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=15)
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "judge_stats", "arguments": {}}},
                        headers=headers, timeout=15)
    body = answer.text
    return json.loads(body[body.index("{"):body.rindex("}") + 1])["result"]["structuredContent"]


async def test_verification_takes_no_worker_thread_of_the_shared_limiter() -> None:
    """With the shared limiter at one thread, a worker-thread call still runs while 50 token checks wait for a hung
    issuer (on 254e9ed each check held a thread of it)."""
    with JwksIssuer(mode="hold") as issuer:
        verifier = _verifier(issuer)
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 1
        try:
            async with anyio.create_task_group() as group:
                for _ in range(50):
                    group.start_soon(verifier.verify_token, issuer.token())
                with anyio.fail_after(30):  # a deadlock guard, not a timing
                    while issuer.waiting != 1:
                        await anyio.sleep(0.02)
                    borrowed = limiter.borrowed_tokens
                    ran = await anyio.to_thread.run_sync(lambda: "ran")
                issuer.release()
        finally:
            limiter.total_tokens = 40
    assert borrowed == 0 and ran == "ran" and issuer.fetches == 1


async def test_a_deeply_nested_token_header_is_refused_not_a_crash() -> None:
    with JwksIssuer() as issuer:
        verifier = _verifier(issuer)
        assert await verifier.verify_token(nested_header_token()) is None
        assert issuer.fetches == 0


async def test_an_oauth_claim_may_name_default_or_local_only_when_the_operator_allows_it() -> None:
    """On 254e9ed a claim `default` read the single token's tenant (and, on PostgreSQL, the rows from before tenants)."""
    with JwksIssuer() as issuer:
        strict, allowing = _verifier(issuer), _verifier(issuer, reserved_allowed=frozenset({"default"}))
        answers = {name: await strict.check(issuer.token(tenant=name)) for name in ("default", "local", "team-x")}
        allowed = {name: await allowing.check(issuer.token(tenant=name)) for name in ("default", "local")}
    assert answers == {"default": None, "local": None, "team-x": "team-x"}
    assert allowed == {"default": "default", "local": None}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the verifier's fetch task is an asyncio task (uvicorn's loop)
