"""The command line and the HTTP start as a user meets them (version, help, -v anywhere,
the start line, bench's exit status, a database that cannot be opened, tokens at start, the 401 challenge)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from judge_mcp.cli import main as cli
from testkit.scripted_servers import Reply
from testkit.scripted_judges import UniversalJudge
from testkit.server_process import HttpServer, server_env
from tests.helpers import ACCEPT, INIT

FIXTURES = Path(__file__).resolve().parent.parent / "bench_fixtures"
CONTRACT_VARIABLES = ["JUDGE_MCP_BACKEND", "JUDGE_MCP_MODEL", "JUDGE_MCP_BASE_URL", "JUDGE_MCP_API_KEY", "JUDGE_MCP_DB", "JUDGE_MCP_CONFIG", "JUDGE_MCP_HTTP_TOKEN"]


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert re.fullmatch(r"judge-mcp \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


@pytest.mark.parametrize("argv, verbose", [(["-v", "serve"], True), (["serve", "-v"], True), (["serve", "--verbose"], True), (["serve"], False), (["-v", "sessions", "list"], True), (["sessions", "list", "-v"], True)])
def test_verbose_before_or_after_the_subcommand(argv: list[str], verbose: bool) -> None:
    assert cli.build_parser().parse_args(argv).verbose is verbose


@pytest.mark.parametrize("argv, serving", [(["serve"], True), (["-v", "serve", "--port", "1"], True), (["--help", "serve"], False),
                                           (["--version"], False), (["bench", "--help"], False), ([], False)])
def test_a_serve_command_line_is_parsed_without_the_bench_and_reads_the_same(argv: list[str], serving: bool, capsys) -> None:
    """`serve` starts without importing the bench's command line (~7 ms); its arguments read as with the whole parser."""
    assert cli._serving(argv) is serving
    if serving:
        assert vars(cli.build_parser(bench=False).parse_args(argv)) == vars(cli.build_parser().parse_args(argv))
    with pytest.raises(SystemExit):
        cli.build_parser(bench=False).parse_args(["bench", "--help"])
    assert "invalid choice: 'bench'" in capsys.readouterr().err  # (the parser without the bench is one)


def test_serve_help_documents_every_option_and_variable_with_its_default(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = capsys.readouterr().out
    for option, default in (("--transport", "stdio"), ("--host", "127.0.0.1"), ("--port", "8765")):
        assert re.search(rf"{option}.*?\(default: {re.escape(default)}", text, re.S), option
    for name in CONTRACT_VARIABLES:
        line = next(line for line in text.splitlines() if line.strip().startswith(name))
        assert "[default:" in line, line
    assert "judge-mcp/judge.db" in text  # the per-user database path, spelled out


@pytest.mark.parametrize("token, needs", [(None, "no token required"), ("  0123456789abcdef0123  \n", "a bearer token is required")])
async def test_http_start_line_and_the_401_challenge(tmp_path: Path, token: str | None, needs: str) -> None:
    env = server_env("http://127.0.0.1:9/v1", tmp_path / "j.db", **({"JUDGE_MCP_HTTP_TOKEN": token} if token else {}))
    with HttpServer(env) as server:
        line = server.first_line()  # the server prints it once it listens
        assert line == f"judge-mcp: serving MCP at http://127.0.0.1:{server.port}/mcp; {needs}" + (" (JUDGE_MCP_HTTP_TOKEN)" if token else " (loopback only)")
        if token:
            async with httpx.AsyncClient(timeout=30) as http:
                bad = await http.post(server.url, json=INIT, headers=ACCEPT)
                # the token was pasted with spaces and a newline: the trimmed token is what clients send
                good = await http.post(server.url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token.strip()}"})
            assert bad.status_code == 401
            challenge = bad.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge  # RFC 6750: not an OAuth prompt
            assert good.status_code == 200


def test_ipv6_loopback_start_line(tmp_path: Path) -> None:
    with HttpServer(server_env("http://127.0.0.1:9/v1", tmp_path / "j.db"), host="::1") as server:
        line = server.first_line()
    if "Cannot assign requested address" in line or "address family" in line.lower():
        pytest.skip("no IPv6 loopback on this machine")
    assert line.startswith(f"judge-mcp: serving MCP at http://[::1]:{server.port}/mcp;")


@pytest.mark.parametrize("token, refused", [("short-token", True), ("0123456789abcdef", False)])
def test_a_short_token_is_refused_on_a_non_loopback_bind(tmp_path: Path, token: str, refused: bool) -> None:
    with HttpServer(server_env("http://127.0.0.1:9/v1", tmp_path / "j.db", JUDGE_MCP_HTTP_TOKEN=token), host="0.0.0.0") as server:
        if refused:
            assert server.proc.wait(timeout=30) != 0
            assert "with a JUDGE_MCP_HTTP_TOKEN of 11 characters; use at least 16" in server.proc.stderr.read()
        else:
            assert server.first_line() == f"judge-mcp: serving MCP at http://0.0.0.0:{server.port}/mcp; a bearer token is required (JUDGE_MCP_HTTP_TOKEN)"


def test_a_database_that_cannot_be_opened_is_named_on_stderr_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the database's directory should be")
    env = server_env("http://127.0.0.1:9/v1", blocker / "judge.db")
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve"], env=env, input="", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"cannot open the database {str(blocker / 'judge.db')!r}" in proc.stderr


def test_bench_exits_non_zero_when_items_errored(tmp_path: Path, scripted, monkeypatch, capsys) -> None:
    failing = scripted(lambda payload: Reply(status=400, raw_body=b'{"error": {"message": "bad request"}}'))
    for name, value in server_env(failing.base_url, tmp_path / "unused.db").items():
        monkeypatch.setenv(name, value)
    status = cli.main(["bench", str(FIXTURES / "pairs.jsonl"), "--method", "grp", "--limit", "2", "--db", str(tmp_path / "b.db"), "--quiet"])
    assert status == 1
    assert "judge-mcp bench: 2 item(s) errored" in capsys.readouterr().err


def test_bench_exits_zero_when_every_item_was_judged(tmp_path: Path, scripted, monkeypatch) -> None:
    backend = scripted(UniversalJudge())
    for name, value in server_env(backend.base_url, tmp_path / "unused.db").items():
        monkeypatch.setenv(name, value)
    assert cli.main(["bench", str(FIXTURES / "pairs.jsonl"), "--method", "grp", "--limit", "2", "--db", str(tmp_path / "b.db"), "--quiet"]) == 0


def test_sessions_list_of_a_tenant_without_sessions_names_whose_the_database_holds(tmp_path: Path, capsys, monkeypatch) -> None:
    """Sessions made over HTTP with JUDGE_MCP_HTTP_TOKEN are tenant `default`'s; `sessions list` reads tenant `local`
    by default. It said "no LWE sessions yet" of a database holding sessions; it names the tenants that have some."""
    from judge_mcp.storage.lwe_sessions import LweRepository
    from judge_mcp.storage.sqlite import SqliteEngine

    db = tmp_path / "judge.db"
    store = SqliteEngine(db)
    try:
        for name in ("s1", "s2"):
            LweRepository(store, tenant="default").ensure_session(name, 4, "meta-prompt")
    finally:
        store.close()
    monkeypatch.setenv("JUDGE_MCP_DB", str(db))
    assert cli.main(["sessions", "list"]) == 0
    out = capsys.readouterr().out
    assert "no LWE sessions yet" not in out
    assert "no LWE sessions of tenant 'local'; the database holds LWE sessions of tenant 'default' (2 sessions)" in out
    assert "--tenant default" in out
    assert cli.main(["sessions", "list", "--tenant", "default"]) == 0
    assert "name=s1" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["sessions", "list"], ["stats"], ["gc", "--vacuum"]])
def test_every_command_that_reads_state_takes_db(tmp_path: Path, capsys, monkeypatch, command: list[str]) -> None:
    """--db names the database for sessions, stats and gc alike (sessions list refused it), over JUDGE_MCP_DB."""
    from judge_mcp.storage.lwe_sessions import LweRepository
    from judge_mcp.storage.sqlite import SqliteEngine

    db = tmp_path / "mine.db"
    store = SqliteEngine(db)
    try:
        LweRepository(store, tenant="local").ensure_session("kept", 4, "meta-prompt")
    finally:
        store.close()
    monkeypatch.setenv("JUDGE_MCP_DB", str(tmp_path / "elsewhere.db"))
    assert cli.main([*command, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "no database" not in out and not (tmp_path / "elsewhere.db").exists()
    if command[0] == "sessions":
        assert "name=kept" in out
