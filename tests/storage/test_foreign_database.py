"""A database file that is not judge-mcp's: another application's SQLite file is refused untouched (no table added, its
journal mode kept), and judge-mcp's own databases, new or made before the mark existed, carry its application id."""

from __future__ import annotations

import sqlite3

import pytest

from judge_mcp.storage.sqlite import APPLICATION_ID, SqliteEngine, StoreError


def test_another_applications_database_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another application.*invoices"):
        SqliteEngine(path)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["invoices"]
    conn.close()


def test_new_and_older_judge_mcp_databases_are_marked(tmp_path):
    new = SqliteEngine(tmp_path / "new.db")
    assert new.query("PRAGMA application_id")[0]["application_id"] == APPLICATION_ID
    new.conn.execute("PRAGMA application_id = 0")  # as a database made before the mark existed
    new.close()
    reopened = SqliteEngine(tmp_path / "new.db")
    assert reopened.query("PRAGMA application_id")[0]["application_id"] == APPLICATION_ID
    reopened.close()
