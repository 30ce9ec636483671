"""The tests' own PostgreSQL server (testkit/postgres_server.py): it starts from the machine's binaries, each test gets
a database of its own, and a restart keeps what was committed."""

from __future__ import annotations

import subprocess

from testkit.postgres_server import find_bindir


def _psql(url: str, sql: str) -> str:
    bindir = find_bindir()
    assert bindir is not None
    done = subprocess.run([str(bindir / "psql"), url, "-tAc", sql], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_test_gets_an_empty_database_of_its_own(postgres_server, postgres_url) -> None:
    assert postgres_url.startswith("postgresql://") and "127.0.0.1" in postgres_url
    assert _psql(postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0"
    other = postgres_server.create_database("another_one")
    _psql(other, "CREATE TABLE t (x int)")
    assert _psql(postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0"


def test_a_restart_keeps_committed_rows(postgres_server, postgres_url) -> None:
    _psql(postgres_url, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (41), (1)")
    postgres_server.restart()
    postgres_server.wait_ready()
    assert _psql(postgres_url, "SELECT sum(x) FROM kept") == "42"
