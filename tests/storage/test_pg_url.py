"""Database connection strings read by libpq itself (storage/pg_url.py, through psycopg): URLs and keyword DSNs give
libpq's own keywords (checked against psycopg's conninfo_to_dict, which asks libpq), a password with `#`, `?`, `/`,
`@` or `[` never shows, a string libpq would read otherwise than meant is refused at start (exit 2) without its
password, a keyword DSN is PostgreSQL (never an SQLite file), and an unusable JUDGE_MCP_DB never lets any tool use
another database: `serve` refuses it, on every transport."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.server_process import clean_env
from judge_mcp.config.settings import ConfigError, load_settings, settings_or_error
from judge_mcp.redaction import known
from judge_mcp.storage.engine import StoreError
from judge_mcp.storage.pg_url import ConninfoError, conninfo, parse
from judge_mcp.storage.pg_url import is_postgres_url, shown
from judge_mcp.storage.postgres import PostgresEngine

SECRET = "Pw#?[x-secret-4417"  # what libpq accepts unencoded in a URL's password
LIBPQ_READS = [
    f"postgresql://judge:{SECRET}@db.internal:5432/judge?sslmode=require",
    "postgresql://judge:Pw%2F%40x-secret-4417@db.internal/judge",
    "postgres://judge@db/judge?password=Pw%23x-secret-4417&application_name=a%20b",
    "postgresql://[::1]:5433,h2:5434/judge?ssl=true",
    "postgresql:///judge?host=/var/run/postgresql",
    "postgres://",
    r"host=db.internal port=5432 password='Pw#?[/@ x\'-secret-4417' dbname=judge",
    r"host = db  password=Pw\ x-secret-4417 user=judge",
]


@pytest.mark.parametrize("value", LIBPQ_READS)
def test_a_connection_string_reads_as_libpq_reads_it_and_shows_no_secret(value: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    parsed = parse(value)
    assert parsed.params == conninfo_to_dict(value)  # libpq's own reading
    assert conninfo_to_dict(conninfo(parsed)) == parsed.params  # what the driver is handed reads back the same
    assert is_postgres_url(value)
    text = shown(value)
    assert "secret" not in text and "4417" not in text
    if "password" in parsed.params:
        assert "[redacted]" in text


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://judge:Pw/x-secret-4417@db/judge",  # libpq: host "judge", port "Pw", database "x-secret-4417@db/judge"
        "postgresql://judge:Pw@x-secret-4417@db/judge",  # libpq: password "Pw", host "x-secret-4417@db"
        "postgresql://judge:Pw@[x-secret-4417/judge",  # an unclosed IPv6 bracket
        "postgresql://db/judge?password=x-secret-4417&bogus=1",
        "postgresql://judge:Pw%zzx-secret-4417@db/judge",
        "host=db password=x-secret 4417 dbname=judge",  # an unquoted space: libpq's "missing =" would echo "4417"
        "host=db password='x-secret-4417 dbname=judge",
    ],
)
def test_a_string_libpq_reads_otherwise_is_refused_at_start_without_its_secret(value: str, tmp_path: Path) -> None:
    with pytest.raises(ConninfoError) as caught:
        parse(value)
    assert "secret" not in str(caught.value) and "4417" not in str(caught.value)
    assert "secret" not in shown(value)
    with pytest.raises(ConfigError) as refused:
        load_settings({"JUDGE_MCP_DB": value, "HOME": str(tmp_path)})
    assert "JUDGE_MCP_DB" in str(refused.value) and "secret" not in str(refused.value) and "4417" not in str(refused.value)


def test_serve_refuses_a_malformed_url_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    for value in ("postgresql://judge:Pw/x-secret-4417@db/judge", "postgresql://judge:Pw@[x-secret-4417/judge"):
        env = clean_env(JUDGE_MCP_DB=value, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
        proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "-v"], input="", capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "JUDGE_MCP_DB" in proc.stderr and "percent-encoded" in proc.stderr and "Traceback" not in proc.stderr
        assert "secret" not in proc.stderr and "4417" not in proc.stderr


def test_a_keyword_dsn_is_postgresql_never_an_sqlite_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    value = "host=db.internal password=x-secret-4417 dbname=judge"
    settings = load_settings({"JUDGE_MCP_DB": value, "HOME": str(tmp_path)})
    assert settings.db_url == value and "x-secret-4417" in known()
    with pytest.raises(StoreError) as caught:  # an SQLite file would have opened (named after the password)
        PostgresEngine("host=127.0.0.1 port=1 password=x-secret-4417 dbname=judge connect_timeout=2")
    assert "x-secret-4417" not in str(caught.value) and "password=[redacted]" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_password_libpq_accepts_unencoded_works_and_never_shows(postgres_server) -> None:
    base = postgres_server.require_password("odd_pw_user", SECRET)  # postgresql://odd_pw_user@127.0.0.1:PORT/postgres
    url = base.replace("odd_pw_user@", f"odd_pw_user:{SECRET}@")
    port = base.rsplit(":", 1)[1].split("/")[0]
    dsn = f"host=127.0.0.1 port={port} user=odd_pw_user password='{SECRET}' dbname=postgres"
    import psycopg

    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE odd_pw_db OWNER odd_pw_user")
    for value in (url.replace("/postgres", "/odd_pw_db"), dsn.replace("dbname=postgres", "dbname=odd_pw_db")):
        store = PostgresEngine(value)  # the old urlsplit reading crashed on '[' and showed everything after '#'
        try:
            assert store.query("SELECT current_user AS u") == [{"u": "odd_pw_user"}]
            assert SECRET not in store.shown and "Pw#" not in store.shown and "[redacted]" in store.shown
        finally:
            store.close()
    wrong = url.replace(SECRET, SECRET[::-1])
    with pytest.raises(StoreError, match="password authentication failed") as caught:
        PostgresEngine(wrong)
    assert SECRET[::-1] not in str(caught.value) and "secret" not in str(caught.value)


@pytest.mark.parametrize("value", ["mysql://x/y", "postgress://judge@db/judge", "postgresql://judge:Pw/x-secret-4417@db/judge"])
def test_an_unusable_database_setting_never_sends_a_tool_to_another_database(value: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(ConfigError, match="JUDGE_MCP_DB"):  # no settings naming the per-user file in its place
        settings_or_error({"JUDGE_MCP_DB": value, "HOME": str(tmp_path), "XDG_DATA_HOME": str(data)})
    env = clean_env(JUDGE_MCP_DB=value, HOME=str(tmp_path), XDG_DATA_HOME=str(data))
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve"], input="", capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "configuration error: JUDGE_MCP_DB" in proc.stderr, proc.stderr
    assert "serving anyway" not in proc.stderr and not data.exists()  # the per-user database was never made


async def test_the_password_reaches_no_tool_result_and_no_log_line_of_a_server(postgres_server, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from testkit.scripted_judges import PAIR
    from testkit.server_process import free_port

    base = postgres_server.require_password("leak_user", SECRET)
    import psycopg

    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE leak_db OWNER leak_user")
    url = base.replace("leak_user@", f"leak_user:{SECRET}@").replace("/postgres", "/leak_db")
    env = clean_env(
        JUDGE_MCP_DB=url, JUDGE_MCP_BACKEND="openai", JUDGE_MCP_MODEL="m", JUDGE_MCP_MAX_RETRIES="0",
        JUDGE_MCP_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",  # nothing listens: every judging call fails
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve", "-v"], env=env, cwd=tmp_path)
    with open(tmp_path / "stderr.txt", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            results = [await client.call_tool("compare_pair", PAIR), await client.call_tool("judge_stats", {})]
            with psycopg.connect(postgres_server.url(), autocommit=True) as conn:  # the server's connections cut
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'leak_user'")
                conn.execute("ALTER ROLE leak_user NOLOGIN")
            try:
                results += [await client.call_tool("judge_stats", {}), await client.call_tool("lwe_session_show", {"session": "s"})]
            finally:
                with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
                    conn.execute("ALTER ROLE leak_user LOGIN")
    texts = [block.text for result in results for block in result.content]
    assert results[0].is_error and not results[1].is_error and results[2].is_error  # the database failed the third
    assert any("could not" in t and "the database 'postgresql://leak_user:[redacted]@127.0.0.1" in t for t in texts[2:]), texts
    stderr = (tmp_path / "stderr.txt").read_text()
    for text in [*texts, stderr]:
        assert "secret-4417" not in text and "Pw#" not in text


def test_without_psycopg_a_connection_string_is_left_to_the_engine_and_never_shown(monkeypatch) -> None:
    """libpq reads the string through psycopg: without it nothing is parsed by hand, `check` leaves the refusal to the
    engine (which names the command that installs psycopg), and the string is not shown at all."""
    from judge_mcp.storage.pg_url import check

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as in an install without the postgres extra
    value = "postgresql://judge:x-secret-4417@db/judge"
    assert check(value) == "" and is_postgres_url(value)
    assert "secret" not in shown(value) and "not installed" in shown(value)


def test_libpqs_own_message_never_reaches_the_refusal() -> None:
    """libpq quotes the string in its complaints ('invalid URI query parameter: "x-secret-4417"'): the refusal says
    what is wrong in its own words."""
    with pytest.raises(ConninfoError) as caught:
        parse("postgresql://db/judge?x-secret-4417=1")
    assert "4417" not in str(caught.value) and "query parameter" in str(caught.value)
