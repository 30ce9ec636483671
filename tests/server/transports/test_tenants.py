"""Who is calling (issue 34): tenants named by the HTTP tokens of `JUDGE_MCP_HTTP_TOKENS`, each seeing and changing only
its own (labels, LWE sessions, judge_stats), sampling answers never served to another MCP session, health probes
counted by admission, and MCP sessions capped per tenant and per peer. Real servers on 127.0.0.1: `judge-mcp serve`
as a subprocess on SQLite and PostgreSQL, or the HTTP app (transports/http.http_app) under uvicorn in a thread."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.scripted_judges import PAIR, UniversalJudge
from judge_mcp.config.settings import ConfigError
from testkit.server_process import HttpServer, clean_env, server_env
from judge_mcp.server.build import build_server
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.tenants import RECHECK_S, TokenFile, TokenFileError, http_tokens, read_tokens_file
from judge_mcp.server.transports.admission import Admission, Limits, admitted_protocol
from judge_mcp.server.transports.http import http_app
from judge_mcp.server.transports.oauth import OAuthSettings, from_env
from tests.connect import ClientModel
from tests.helpers import ACCEPT, INIT, ROOT, ThreadedUvicorn, closed_by_server, make_app, token_client

pytestmark = pytest.mark.anyio

TOKEN_A = "team-a-token-0123456789abcdef"
TOKEN_B = "team-b-token-fedcba9876543210"


def tokens_file(tmp_path: Path, text: str | None = None) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text if text is not None else f"# who may call\n{TOKEN_A} team-a\n\n{TOKEN_B}   team-b  # the other team\n")
    return path


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


# ---- the tokens file -----------------------------------------------------------------------------------------------
def test_a_tokens_file_names_each_tokens_tenant_and_the_single_token_is_default(tmp_path: Path) -> None:
    assert read_tokens_file(tokens_file(tmp_path)) == {TOKEN_A: "team-a", TOKEN_B: "team-b"}
    assert http_tokens("single-token-0123456789", str(tokens_file(tmp_path))) == {TOKEN_A: "team-a", TOKEN_B: "team-b", "single-token-0123456789": "default"}
    assert http_tokens("single-token-0123456789", None) == {"single-token-0123456789": "default"}
    assert http_tokens(None, None) is None


def test_a_tokens_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Notepad's "UTF-8 with BOM": the invisible mark is not part of the first token."""
    path = tmp_path / "tokens"
    path.write_bytes(f"\ufeff{TOKEN_A} team-a\n".encode("utf-8"))
    assert read_tokens_file(path) == {TOKEN_A: "team-a"}


@pytest.mark.parametrize(("text", "problem"), [
    (f"{TOKEN_A}\n", "line 1: expected `TOKEN TENANT`"),
    (f"# ok\n{TOKEN_A} team-a extra\n", "line 2: expected `TOKEN TENANT`"),
    (f"{TOKEN_A} team/a\n", "line 1: tenant name must match"),
    (f"{TOKEN_A} team-a\n{TOKEN_A} team-b\n", "line 2: this token is already given"),
    ("# nothing but comments\n\n", "holds no `TOKEN TENANT` line"),
    (f"tök{TOKEN_A} team-a\n", "line 1: a token must be printable ASCII"),
])
def test_a_malformed_tokens_file_is_refused_naming_the_line_and_never_the_token(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(TokenFileError) as caught:
        read_tokens_file(tokens_file(tmp_path, text))
    assert problem in str(caught.value) and str(tmp_path / "tokens") in str(caught.value)
    assert TOKEN_A not in str(caught.value)


@pytest.mark.parametrize("case", ["malformed", "missing"])
def test_serve_refuses_to_start_with_a_bad_tokens_file_exit_2(tmp_path: Path, case: str) -> None:
    path = tokens_file(tmp_path, f"{TOKEN_A}\n") if case == "malformed" else tmp_path / "no-such-file"
    env = clean_env(JUDGE_MCP_HTTP_TOKENS=str(path), JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", "0"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "JUDGE_MCP_HTTP_TOKENS" in done.stderr and str(path) in done.stderr and "Traceback" not in done.stderr
    assert TOKEN_A not in done.stderr


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_running_server_rereads_its_tokens_file_when_it_changes_and_keeps_its_tokens_when_it_cannot(tmp_path: Path, caplog) -> None:
    """A token removed from the file is refused once the file has been looked at again (at most every RECHECK_S), one
    added is accepted; a changed file that cannot be used (a malformed line, gone, a token the bind refuses) is logged
    naming the file and line, never a token, and the tokens in use stay."""
    path, clock = tokens_file(tmp_path), _Clock()
    source = TokenFile(str(path), "single-token-0123456789", clock=clock)
    token_c = "team-c-token-0123456789abcdef"

    def tenant_of(token: str) -> str | None:
        return source.tenants().tenant(token.encode())

    def settle() -> None:  # a look sees the change, the next (the file still) takes it
        for _ in range(2):
            clock.now += RECHECK_S
            source.tenants()

    assert [tenant_of(t) for t in (TOKEN_A, TOKEN_B, token_c, "single-token-0123456789")] == ["team-a", "team-b", None, "default"]
    path.write_text(f"{TOKEN_A} team-a\n{token_c} team-c\n")
    assert tenant_of(TOKEN_B) == "team-b"  # not looked at again yet
    settle()
    assert [tenant_of(t) for t in (TOKEN_A, TOKEN_B, token_c, "single-token-0123456789")] == ["team-a", None, "team-c", "default"]
    for broken in (f"{TOKEN_A} team-a\n{TOKEN_B}\n", None):
        path.write_text(broken) if broken is not None else path.unlink()
        settle()
        assert [tenant_of(t) for t in (TOKEN_A, TOKEN_B, token_c)] == ["team-a", None, "team-c"]
    assert "line 2: expected `TOKEN TENANT`" in caplog.text and "cannot read" in caplog.text
    app = make_app({"JUDGE_MCP_DB": str(tmp_path / "judge.db")})
    try:
        http_app(build_server(app), host="0.0.0.0", token=source)  # from now on a reread file meets the bind's rules too
    finally:
        app.store.close()
    path.write_text(f"{TOKEN_B} team-b\nshort team-s\n")
    settle()
    assert [tenant_of(t) for t in (TOKEN_A, TOKEN_B, "short")] == ["team-a", None, None]
    assert "a token of tenant 'team-s' (JUDGE_MCP_HTTP_TOKENS) of 5 characters" in caplog.text
    assert TOKEN_A not in caplog.text and TOKEN_B not in caplog.text and token_c not in caplog.text


def test_serve_refuses_a_token_removed_from_its_tokens_file_without_a_restart(scripted, tmp_path: Path) -> None:
    path = tokens_file(tmp_path)
    backend = scripted(UniversalJudge())
    with HttpServer(server_env(backend.base_url, tmp_path / "judge.db", JUDGE_MCP_HTTP_TOKENS=str(path)), log=tmp_path / "http.log") as server:
        assert _open_session(server.url, TOKEN_B).status_code == 200
        path.write_text(f"{TOKEN_A} team-a\n")  # team-b's token revoked
        deadline = time.monotonic() + 30
        while _open_session(server.url, TOKEN_B).status_code != 401:  # the file is looked at again within RECHECK_S
            assert time.monotonic() < deadline, (tmp_path / "http.log").read_text()
            time.sleep(0.1)
        assert _open_session(server.url, TOKEN_A).status_code == 200
    assert "changed: reread, 1 token(s) of 1 tenant(s) in use" in (tmp_path / "http.log").read_text()


# ---- break 2: a tenant sees and changes only its own -----------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def tenants_server(request, scripted, tmp_path: Path):
    """`judge-mcp serve --transport http` with two tenants (TOKEN_A: team-a, TOKEN_B: team-b), on each engine."""
    if request.param == "postgresql":
        db = request.getfixturevalue("postgres_server").create_database(f"t_tenants_{abs(hash(str(tmp_path))) % 10**8}")
    else:
        db = str(tmp_path / "judge.db")
    backend = scripted(UniversalJudge())
    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_HTTP_TOKENS=str(tokens_file(tmp_path))), log=tmp_path / "http.log")
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.parametrize("mode", ["legacy", "2026"])
async def test_another_tenant_cannot_relabel_verdicts_nor_reset_sessions_it_does_not_own(tenants_server, mode: str) -> None:
    options = {"mode": "legacy"} if mode == "legacy" else {}
    http_a, a = token_client(tenants_server.url, TOKEN_A, **options)
    http_b, b = token_client(tenants_server.url, TOKEN_B, **options)
    async with http_a, a, http_b, b:
        judged = await a.call_tool("compare_pair", PAIR)
        assert not judged.is_error, text_of(judged)
        verdict_id = judged.structured_content["verdict_id"]
        learned = await a.call_tool("lwe_judge", {**PAIR, "session": "team-a"})
        assert not learned.is_error, text_of(learned)
        assert not (await a.call_tool("record_label", {"verdict_id": verdict_id, "label": "B"})).is_error

        # team-b: the verdict is unknown to it, as if it did not exist; team-a's session too
        relabel = await b.call_tool("record_label", {"verdict_id": verdict_id, "label": "A"})
        assert relabel.is_error and f"unknown verdict_id {verdict_id!r}" in text_of(relabel)
        reset = await b.call_tool("lwe_session", {"session": "team-a", "action": "reset"})
        assert reset.is_error and "unknown session 'team-a'" in text_of(reset)
        b_stats = (await b.call_tool("judge_stats", {})).structured_content
        assert b_stats["all_time"]["verdicts"] == 0 and b_stats["all_time"]["groups"] == []
        listed = await b.read_resource("lwe://sessions")  # the resources too: team-b has no session yet
        assert json.loads(listed.contents[0].text) == []
        b_resource_stats = json.loads((await b.read_resource("judge://stats")).contents[0].text)
        assert b_resource_stats["all_time"]["verdicts"] == 0
        # team-b's own session of the same name is another session
        own = await b.call_tool("lwe_judge", {**PAIR, "session": "team-a"})
        assert not own.is_error and own.structured_content["meta_prompt_version"] == 1

        # team-a's state is untouched: its label agrees, its session never reset, its stats its own
        a_stats = (await a.call_tool("judge_stats", {})).structured_content
        shown = (await a.call_tool("lwe_session_show", {"session": "team-a"})).structured_content
        a_listed = json.loads((await a.read_resource("lwe://sessions")).contents[0].text)
    assert [row["name"] for row in a_listed] == ["team-a"]
    assert a_stats["all_time"]["verdicts"] == 2  # compare_pair and lwe_judge
    pair = next(g for g in a_stats["all_time"]["groups"] if g["tool"] == "compare_pair")
    assert pair["agreement"]["accuracy"] == {"rate": 1.0, "count": 1, "of": 1, "ci": "too few to say (n=1)"}
    assert [v["reason"] for v in shown["versions"]] == ["initial"]


async def test_a_verdict_row_written_late_is_its_tenants_alone(scripted, tmp_path: Path) -> None:
    """A verdict row still being written in the background (another process holds the database's write lock) is
    its tenant's like any other: another tenant's judge_stats does not count it in `verdict_log`, and its
    record_label finds the verdict_id unknown, as it does once the row is written, instead of waiting for the row
    and answering that it is still being written (which told that the verdict exists)."""
    db = tmp_path / "judge.db"
    backend = scripted(UniversalJudge())
    server = HttpServer(server_env(backend.base_url, db, JUDGE_MCP_HTTP_TOKENS=str(tokens_file(tmp_path))), log=tmp_path / "http.log")
    other_process = sqlite3.connect(str(db), isolation_level=None)
    try:
        http_a, a = token_client(server.url, TOKEN_A, mode="legacy")
        http_b, b = token_client(server.url, TOKEN_B, mode="legacy")
        async with http_a, a, http_b, b:
            other_process.execute("BEGIN IMMEDIATE")  # held until team-b has looked
            judged = await a.call_tool("compare_pair", PAIR)
            assert not judged.is_error and any("not written yet" in w for w in judged.structured_content["warnings"])
            verdict_id = judged.structured_content["verdict_id"]
            b_health = (await b.call_tool("judge_stats", {})).structured_content["verdict_log"]
            a_health = (await a.call_tool("judge_stats", {})).structured_content["verdict_log"]
            relabel = await b.call_tool("record_label", {"verdict_id": verdict_id, "label": "A"})
            other_process.execute("ROLLBACK")
            labelled = await a.call_tool("record_label", {"verdict_id": verdict_id, "label": "B"})  # waits for its row
            a_after = (await a.call_tool("judge_stats", {})).structured_content["verdict_log"]
            b_after = (await b.call_tool("judge_stats", {})).structured_content["verdict_log"]
    finally:
        other_process.close()
        server.kill()
    assert a_health["pending"] == 1 and b_health == {"pending": 0, "written_late": 0, "lost": 0, "last_error": None}
    assert relabel.is_error and f"unknown verdict_id {verdict_id!r}" in text_of(relabel), text_of(relabel)
    assert not labelled.is_error and labelled.structured_content["agrees"], text_of(labelled)
    assert a_after == {"pending": 0, "written_late": 1, "lost": 0, "last_error": None}
    assert b_after == {"pending": 0, "written_late": 0, "lost": 0, "last_error": None}


# ---- break 1: a sampling answer is never served to another MCP session -----------------------------------------------
def lying_judge(payload: dict[str, Any]) -> str:
    """A client model that says the answer naming Sydney is the better one, wherever it is shown."""
    first = str(payload["messages"][-1]["content"])
    return "My final verdict is: " + ("[[A>B]]" if first.index("Sydney") < first.index("Canberra") else "[[B>A]]")


def honest_judge(payload: dict[str, Any]) -> str:
    first = str(payload["messages"][-1]["content"])
    return "My final verdict is: " + ("[[B>A]]" if first.index("Sydney") < first.index("Canberra") else "[[A>B]]")


@pytest.mark.parametrize("mode", ["legacy", "2026"])
async def test_a_sampling_answer_is_never_served_to_another_client(tmp_path: Path, mode: str) -> None:
    token = "one-token-for-both-0123456789"  # the same tenant, the same client name and model: still not shared
    env = clean_env(JUDGE_MCP_BACKEND="sampling", JUDGE_MCP_DB=str(tmp_path / "judge.db"), JUDGE_MCP_HTTP_TOKEN=token, JUDGE_MCP_MAX_RETRIES="1")
    attacker, victim = ClientModel(lying_judge, model="claude-sonnet-4-5"), ClientModel(honest_judge, model="claude-sonnet-4-5")
    options = {"mode": "legacy"} if mode == "legacy" else {}
    with HttpServer(env, log=tmp_path / "http.log") as server:
        http, client = token_client(server.url, token, sampling_callback=attacker, **options)
        async with http, client:
            poisoned = await client.call_tool("compare_pair", PAIR)
        http, client = token_client(server.url, token, sampling_callback=victim, **options)
        async with http, client:
            honest = await client.call_tool("compare_pair", PAIR)
            again = await client.call_tool("compare_pair", PAIR)
    assert poisoned.structured_content["winner"] == "A"  # the attacker's model picked the wrong answer
    assert honest.structured_content["winner"] == "B", honest.structured_content
    assert honest.structured_content["usage"]["cached_calls"] == 0 and len(victim.requests) >= 2
    if mode == "legacy":  # a session's own repeat is still answered from the cache
        assert again.structured_content["usage"]["cached_calls"] == 2 and again.structured_content["winner"] == "B"


# ---- breaks 3 and 4: admission counts probes; sessions capped per tenant and per peer --------------------------------
class _Served(ThreadedUvicorn):
    """The real HTTP app (MCP server, probes, gate) of a judge-mcp App under uvicorn in a thread, with `limits`."""

    def __init__(self, tmp_path: Path, limits: Limits, tokens: dict[str, str] | None = None, oauth: OAuthSettings | None = None):
        # uvicorn's keep-alive timeout is long here: a connection the server closes was closed by admission
        self.app = make_app({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:9/v1", "JUDGE_MCP_MODEL": "m",
                             "JUDGE_MCP_DB": str(tmp_path / "judge.db")})
        self.admission = Admission(limits)

        async def ready() -> str | None:
            return None

        app = http_app(build_server(self.app), host="127.0.0.1", token=tokens, admission=self.admission, ready=ready, oauth=oauth)
        super().__init__(app, http=admitted_protocol(self.admission), limit_concurrency=None, lifespan="on", timeout_keep_alive=120)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.app.store.close()

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=15, source_address=(source, 0))


def test_health_probe_connections_count_as_idle_connections_of_their_peer(tmp_path: Path) -> None:
    with _Served(tmp_path, Limits(idle_per_peer=4, idle_total=64)) as served:
        socks = []
        for _ in range(12):  # keep-alive connections that only ask /healthz, as the red team's 1,100 sockets did
            sock = served.connect()
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            data = b""
            while b'"ok"' not in data:
                data += sock.recv(4096)
            assert data.startswith(b"HTTP/1.1 200")
            socks.append(sock)
        closed = sum(closed_by_server(sock, 2.0) for sock in socks[:8])
        still_open = [sock for sock in socks[8:] if not closed_by_server(sock, 0.2)]
        counts = served.admission.counts()
        for sock in socks:
            sock.close()
    assert closed == 8 and len(still_open) == 4  # the peer's 4 newest idle connections stay, the older ones are closed
    assert served.admission.evicted["idle"] >= 8 and counts["idle"] <= 4


def _open_session(url: str, token: str, source: str = "127.0.0.1") -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=15) as http:
        return http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}"})


def test_sessions_are_capped_per_tenant_and_per_peer_and_a_flood_locks_out_no_one_else(tmp_path: Path) -> None:
    tokens = {TOKEN_A: "team-a", TOKEN_B: "team-b"}
    with _Served(tmp_path, Limits(sessions_per_tenant=5, sessions_per_peer=3), tokens) as served:
        url = f"http://127.0.0.1:{served.port}/mcp"
        opened = [_open_session(url, TOKEN_A) for _ in range(3)]
        assert [r.status_code for r in opened] == [200] * 3 and all(r.headers.get("mcp-session-id") for r in opened)
        flooded = _open_session(url, TOKEN_A)  # past its peer's bound
        assert flooded.status_code == 503 and flooded.headers["retry-after"] == "1"
        assert "too many open MCP sessions of this tenant from this address (3)" in flooded.json()["error"]
        # another peer of the same tenant gets in, up to the tenant's bound
        assert [_open_session(url, TOKEN_A, "127.0.0.2").status_code for _ in range(3)] == [200, 200, 503]
        past = _open_session(url, TOKEN_A, "127.0.0.3")
        assert past.status_code == 503 and "too many open MCP sessions for this tenant (5)" in past.json()["error"]
        # another tenant's new handshake clients are never locked out by team-a's flood, from any address
        others = [_open_session(url, TOKEN_B, source) for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3")]
        assert [r.status_code for r in others] == [200] * 3 and all(r.headers.get("mcp-session-id") for r in others)
        # a session team-a closes frees its place
        sid = opened[0].headers["mcp-session-id"]
        closed = httpx.delete(url, headers={**ACCEPT, "authorization": f"Bearer {TOKEN_A}", "mcp-session-id": sid,
                                            "mcp-protocol-version": "2025-06-18"}, timeout=15)
        assert closed.status_code == 200
        assert _open_session(url, TOKEN_A).status_code == 200
        # and a session is served only to the tenant that opened it
        foreign = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             headers={**ACCEPT, "authorization": f"Bearer {TOKEN_B}", "mcp-session-id": opened[1].headers["mcp-session-id"],
                                      "mcp-protocol-version": "2025-06-18"}, timeout=15)
        assert foreign.status_code == 404
    assert served.admission.refused["sessions"] == 3


def test_the_tenant_of_an_http_call_reaches_the_store(tmp_path: Path) -> None:
    """A stdio or API caller is `local`; an HTTP caller is its token's tenant (checked on the store: the LWE session a
    team-a call made is team-a's, under its key)."""
    tokens = {TOKEN_A: "team-a"}
    with _Served(tmp_path, Limits(), tokens) as served:
        url = f"http://127.0.0.1:{served.port}/mcp"
        opened = _open_session(url, TOKEN_A)
        sid = opened.headers["mcp-session-id"]
        headers = {**ACCEPT, "authorization": f"Bearer {TOKEN_A}", "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=15)
        reset = httpx.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                      "params": {"name": "lwe_session", "arguments": {"session": "s", "action": "show"}}},
                           headers=headers, timeout=15)
        assert "unknown session 's'" in reset.text
        LweRepository(served.app.store, "team-a").ensure_session("s", 4, "M")  # made directly, as team-a
        shown = httpx.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                      "params": {"name": "lwe_session", "arguments": {"session": "s", "action": "show"}}},
                           headers=headers, timeout=15)
        assert LweRepository(served.app.store).session_row("s") is None  # tenant `local` (this test) has no session `s`
    body = shown.text
    payload = json.loads(body[body.index("{"):body.rindex("}") + 1])
    assert payload["result"]["structuredContent"]["meta_prompt"] == "M" and not payload["result"]["isError"]


# ---- OAuth: JWT access tokens of an issuer, the tenant from a claim (a local issuer on 127.0.0.1) ----------------------
class _Issuer(ThreadedUvicorn):
    """An OAuth issuer's key set (JWKS) on 127.0.0.1, and tokens signed with its key (or, `forged`, another one)."""

    def __init__(self) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()
        self.fetches = 0

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            self.fetches += 1
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})

        super().__init__(app)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def token(self, *, forged: bool = False, **claims: Any) -> str:
        import jwt

        now = int(time.time())
        payload = {"iss": self.url, "aud": "judge-test", "exp": now + 300, "iat": now, "sub": "u1", "tenant": "team-x", **claims}
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.other if forged else self.key, algorithm="RS256", headers={"kid": "k1"})


def test_oauth_settings_come_from_the_environment_or_a_clear_error() -> None:
    assert from_env({}) is None
    settings = from_env({"JUDGE_MCP_OAUTH_ISSUER": "https://id.example", "JUDGE_MCP_OAUTH_AUDIENCE": "https://judge.example/mcp"})
    assert settings == OAuthSettings("https://id.example", "https://judge.example/mcp", "https://id.example/.well-known/jwks.json", "tenant")
    with pytest.raises(ConfigError, match="needs JUDGE_MCP_OAUTH_AUDIENCE"):
        from_env({"JUDGE_MCP_OAUTH_ISSUER": "https://id.example"})
    with pytest.raises(ConfigError, match="JUDGE_MCP_OAUTH_JWKS_URL must be an https:// URL"):
        from_env({"JUDGE_MCP_OAUTH_ISSUER": "http://id.example", "JUDGE_MCP_OAUTH_AUDIENCE": "a"})


def test_an_oauth_token_of_the_issuer_names_the_tenant_and_anything_else_is_401(tmp_path: Path) -> None:
    with _Issuer() as issuer:
        settings = OAuthSettings(issuer.url, "judge-test", f"{issuer.url}/.well-known/jwks.json")
        with _Served(tmp_path, Limits(), {TOKEN_A: "team-a"}, oauth=settings) as served:
            url = f"http://127.0.0.1:{served.port}/mcp"
            LweRepository(served.app.store, "team-x").ensure_session("s", 4, "M of team-x")
            good = issuer.token()
            opened = _open_session(url, good)
            assert opened.status_code == 200, opened.text
            headers = {**ACCEPT, "authorization": f"Bearer {good}", "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-06-18"}
            httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=15)
            shown = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                          "params": {"name": "lwe_session_show", "arguments": {"session": "s"}}}, headers=headers, timeout=15)
            assert "M of team-x" in shown.text  # the claim's tenant reached the store
            assert _open_session(url, TOKEN_A).status_code == 200  # the static tokens still work beside it
            refused = {
                "expired": issuer.token(exp=int(time.time()) - 3600),
                "another audience": issuer.token(aud="another-server"),
                "another issuer": issuer.token(iss="http://127.0.0.1:1"),
                "another key": issuer.token(forged=True),
                "no tenant claim": issuer.token(tenant=None),
                "a malformed tenant": issuer.token(tenant="../team-x"),
                "tenant local": issuer.token(tenant="local"),
                "unsigned": ".".join(good.split(".")[:2]) + ".",
            }
            answers = {what: _open_session(url, token) for what, token in refused.items()}
            metadata = httpx.get(f"http://127.0.0.1:{served.port}/.well-known/oauth-protected-resource", timeout=15)
        fetches = issuer.fetches
    assert {what: r.status_code for what, r in answers.items()} == {what: 401 for what in refused}
    assert all(r.headers["www-authenticate"].startswith("Bearer ") for r in answers.values())
    # a JSON-RPC error an MCP client shows, naming where a token comes from (issue 49 item 4)
    errors = [r.json()["error"] for r in answers.values()]
    assert all(e["code"] == -32001 and e["message"].startswith("wrong bearer token") for e in errors)
    assert all(f"OAuth issuer {issuer.url} for judge-test" in e["message"] for e in errors)
    assert metadata.status_code == 200 and metadata.json()["authorization_servers"] == [issuer.url]
    assert 1 <= fetches <= 3  # the issuer's keys are cached, not fetched per request


def test_serve_refuses_to_start_with_oauth_half_configured_exit_2(tmp_path: Path) -> None:
    env = clean_env(JUDGE_MCP_OAUTH_ISSUER="https://id.example", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", "0"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "needs JUDGE_MCP_OAUTH_AUDIENCE" in done.stderr and "Traceback" not in done.stderr
