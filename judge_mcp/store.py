"""All state in one SQLite file (WAL) through sqlite-utils: forward-only migrations, the call cache, the verdict
log, the option pool, and the LWE sessions (see methods/lwe.py for how they are used).

Every write that must be all-or-nothing runs inside `Store.transaction()` (BEGIN IMMEDIATE ... COMMIT), so a process
killed at any moment leaves either the whole change or none of it. One `Store` may be shared by threads and tasks:
a re-entrant lock serialises its use of the one connection; other processes are serialised by SQLite itself
(busy timeout).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: list[tuple[str, Migration]] = []

def migration(fn: Migration) -> Migration:
    """Register a forward-only migration; they run once each, in definition order."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn

@migration
def m001_core(db: sqlite_utils.Database) -> None:
    db.execute(
        """CREATE TABLE IF NOT EXISTS call_cache (
            key TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            request TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at REAL NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS verdicts (
            id INTEGER PRIMARY KEY,
            tool TEXT NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            inputs TEXT NOT NULL,
            output TEXT NOT NULL,
            usage TEXT NOT NULL,
            calls TEXT NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX IF NOT EXISTS verdicts_tool ON verdicts(tool, created_at)")
    db.execute(
        """CREATE TABLE IF NOT EXISTS option_pool (
            id INTEGER PRIMARY KEY,
            instruction_hash TEXT NOT NULL,
            instruction TEXT NOT NULL,
            option TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE(instruction_hash, option)
        )"""
    )

def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self.migrate()

    # ---- plumbing -----------------------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """An all-or-nothing write. Re-entrant within a thread (the inner block joins the outer transaction)."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.db
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            else:
                self.conn.execute("COMMIT")

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.db.query(sql, params))

    def migrate(self) -> list[str]:
        with self.transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            done = {row["name"] for row in db.query("SELECT name FROM _migrations")}
            applied = []
            for name, fn in MIGRATIONS:
                if name in done:
                    continue
                fn(db)
                db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", [name, time.time()])
                applied.append(name)
        return applied

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def integrity_ok(self) -> bool:
        return self.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"

    # ---- call cache ---------------------------------------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            rows = list(self.db.query("SELECT response FROM call_cache WHERE key = ?", [key]))
            if not rows:
                return None
            self.db.execute("UPDATE call_cache SET hits = hits + 1 WHERE key = ?", [key])
            return json.loads(rows[0]["response"])

    def cache_put(self, key: str, backend: str, model: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO call_cache (key, backend, model, request, response, created_at, hits)"
                " VALUES (?, ?, ?, ?, ?, ?, 0)",
                [key, backend, model, _dumps(request), _dumps(response), time.time()],
            )

    # ---- verdict log --------------------------------------------------------------------------------------------
    def log_verdict(
        self,
        tool: str,
        backend: str,
        model: str,
        inputs: dict[str, Any],
        output: dict[str, Any],
        usage: dict[str, Any],
        calls: list[dict[str, Any]],
    ) -> int:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [tool, backend, model, _dumps(inputs), _dumps(output), _dumps(usage), _dumps(calls), time.time()],
            )
            return int(cursor.lastrowid)

    def verdicts(self, tool: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        sql = "SELECT * FROM verdicts" + (" WHERE tool = ?" if tool else "") + " ORDER BY id DESC LIMIT ?"
        rows = self.query(sql, [tool, limit] if tool else [limit])
        for row in rows:
            for col in ("inputs", "output", "usage", "calls"):
                row[col] = json.loads(row[col])
        return rows

    # ---- option pool (grade_score_options' unrelated options) ---------------------------------------------------
    def add_options(self, instruction: str, options: list[str]) -> None:

        digest = hashlib.sha256(instruction.strip().encode("utf-8")).hexdigest()
        now = time.time()
        with self.transaction() as db:
            for option in options:
                db.execute(
                    "INSERT OR IGNORE INTO option_pool (instruction_hash, instruction, option, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    [digest, instruction, option, now],
                )

    def pool_options(self, exclude_instruction: str, limit: int = 200) -> list[dict[str, Any]]:
        """Stored options that answer a different instruction (newest first)."""

        digest = hashlib.sha256(exclude_instruction.strip().encode("utf-8")).hexdigest()
        return self.query(
            "SELECT instruction, option FROM option_pool WHERE instruction_hash != ? ORDER BY id DESC LIMIT ?",
            [digest, limit],
        )
