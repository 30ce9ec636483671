"""Running one test body on both store engines: `@on_both_engines` on a test that uses the `store` fixture (directly or
through `make_judge`) runs it with SQLite and with PostgreSQL (a new database on the session's server;
testkit/postgres_server.py, skipped where no server binaries exist except under CI)."""

from __future__ import annotations

import pytest

ENGINES = ("sqlite", "postgresql")

on_both_engines = pytest.mark.parametrize("store", ENGINES, indirect=True)
