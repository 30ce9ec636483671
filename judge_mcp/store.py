"""All state in one SQLite file (WAL) through sqlite-utils: forward-only migrations, the call cache, the verdict
log, the option pool, and the LWE sessions (see methods/lwe/ for how they are used).

Every write that must be all-or-nothing runs inside `Store.transaction()` (BEGIN IMMEDIATE ... COMMIT), so a process
killed at any moment leaves either the whole change or none of it. A database that cannot be opened, read or written
(a directory or a non-SQLite file at the path, a full disk, a lock held past the busy timeout) raises `StoreError`,
naming the file and SQLite's reason; a failed write is rolled back first, so nothing of it is kept. One `Store` may be shared by threads and tasks:
writes go through one connection under a re-entrant lock, reads outside a transaction through a second, read-only
one (in WAL mode a read never waits for a writer), and other processes are serialised by SQLite itself (busy
timeout; a lock held past it is a StoreError that says so).

Async code never calls the store on the event loop: `await store.aio.NAME(...)` runs the method in a worker
thread, so a write waiting for another process's lock stalls only the call that needs it, never other clients.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
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


LWE_REASONS = ("initial", "refine", "condense", "reset", "rollback")


@migration
def m002_lwe(db: sqlite_utils.Database) -> None:
    """LWE sessions: one row per session, every meta-prompt version ever made, and the feedback buffer.

    A version's `parent` is the version that was current when it was made (the one it replaced); a rollback also
    records `restored_from`. Feedback rows are `pending` until one refinement uses them (`used`, with the version
    they produced) or a reset drops them (`discarded`, with the reset version); they are never deleted.
    """
    db.execute(
        """CREATE TABLE IF NOT EXISTS lwe_sessions (
            name TEXT PRIMARY KEY,
            current_version INTEGER NOT NULL,
            batch_size INTEGER NOT NULL CHECK (batch_size BETWEEN 1 AND 64),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS lwe_versions (
            session TEXT NOT NULL REFERENCES lwe_sessions(name),
            version INTEGER NOT NULL CHECK (version >= 1),
            parent INTEGER,
            reason TEXT NOT NULL CHECK (reason IN ('initial', 'refine', 'condense', 'reset', 'rollback')),
            text TEXT NOT NULL,
            restored_from INTEGER,
            feedback_ids TEXT NOT NULL DEFAULT '[]',
            created_at REAL NOT NULL,
            PRIMARY KEY (session, version)
        )"""
    )
    db.execute(
        """CREATE TABLE IF NOT EXISTS lwe_feedback (
            id INTEGER PRIMARY KEY,
            session TEXT NOT NULL REFERENCES lwe_sessions(name),
            meta_version INTEGER NOT NULL,
            prompt TEXT NOT NULL,
            response_a TEXT NOT NULL,
            response_b TEXT NOT NULL,
            eval_prompt TEXT NOT NULL,
            judgment TEXT NOT NULL,
            winner TEXT CHECK (winner IN ('A', 'B')),
            feedback TEXT NOT NULL,
            feedback_parse_ok INTEGER NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'used', 'discarded')),
            used_in_version INTEGER,
            created_at REAL NOT NULL,
            used_at REAL
        )"""
    )
    db.execute("CREATE INDEX IF NOT EXISTS lwe_feedback_status ON lwe_feedback(session, status, id)")


class StoreError(Exception):
    """The database could not be opened, read or written (the message names the file and the reason)."""


class LweConflict(Exception):
    """The session changed between reading it and writing a new version; nothing was written."""

def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

# `PRAGMA application_id` of every judge-mcp database ("JMCP"): a non-empty SQLite file without it is another
# application's, and is refused rather than migrated.
APPLICATION_ID = 0x4A4D4350


def _claim(conn: sqlite3.Connection) -> None:
    """Mark a new (empty) database as judge-mcp's, accept one already marked (or made by judge-mcp before the mark
    existed: it has our `_migrations` table), and refuse any other non-empty database with a StoreError."""
    if conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
        return
    tables = sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    ours = "_migrations" in tables and {"call_cache", "verdicts"} & set(tables)
    if tables and not ours:
        shown = ", ".join(tables[:6]) + (", ..." if len(tables) > 6 else "")
        raise StoreError(
            f"it is an SQLite database of another application (tables: {shown}); judge-mcp leaves it untouched. "
            "Point JUDGE_MCP_DB at a new file"
        )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


class _OffLoop:
    """`store.aio.NAME(...)`: the store's method NAME, awaited in a worker thread (see the module docstring)."""

    def __init__(self, store: "Store"):
        self._store = store

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await anyio.to_thread.run_sync(partial(method, *args, **kwargs))

        return call


class Store:
    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0):
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._in_transaction = threading.local()  # this thread is inside transaction(): its reads see its writes
        self.aio = _OffLoop(self)
        self.reader: sqlite3.Connection | None = None
        conn: sqlite3.Connection | None = None
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
            _claim(conn)  # before anything changes the file: another application's database is refused untouched
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            self.conn = conn
            self.db = sqlite_utils.Database(conn)
            self.migrate()
            if str(path) != ":memory:":  # a second connection to ":memory:" would be another database
                self.reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
                self.reader.execute("PRAGMA query_only=ON")
                self.reader.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
                self.reader.row_factory = sqlite3.Row
        except (OSError, sqlite3.Error, StoreError) as exc:
            if conn is not None:
                conn.close()
            reason = exc.args[0] if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
            raise StoreError(f"cannot open the database {str(path)!r} (JUDGE_MCP_DB): {reason}") from exc

    # ---- plumbing -----------------------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """An all-or-nothing write. Re-entrant within a thread (the inner block joins the outer transaction)."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.db
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"could not write the database {str(self.path)!r}: {self._why(exc)}") from exc
            self._in_transaction.active = True
            try:
                yield self.db
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if self.conn.in_transaction:  # SQLite may already have rolled back (e.g. on a full disk)
                    self.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(
                        f"could not write the database {str(self.path)!r}: {self._why(exc)} (the write was rolled back; nothing of it was kept)"
                    ) from exc
                raise
            finally:
                self._in_transaction.active = False

    def _why(self, exc: sqlite3.Error) -> str:
        """SQLite's reason, and for a lock, whose and for how long it was waited for."""
        if "locked" in str(exc) or "busy" in str(exc):
            return f"{exc}: another connection held its write lock past the {self.busy_timeout_s:g} s busy timeout"
        return str(exc)

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """Rows as dicts. Outside a transaction through the read-only connection, which never waits for a writer;
        inside one (in this thread) through the writer, so the transaction sees its own changes."""
        try:
            if self.reader is None or getattr(self._in_transaction, "active", False):
                with self._lock:
                    return list(self.db.query(sql, params))
            with self._read_lock:
                return [dict(row) for row in self.reader.execute(sql, params).fetchall()]
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the database {str(self.path)!r}: {self._why(exc)}") from exc

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
        if self.reader is not None:
            with self._read_lock:
                self.reader.close()

    def integrity_ok(self) -> bool:
        return self.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"

    # ---- call cache ---------------------------------------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        """A pure read: a hit writes nothing (the `hits` column is no longer counted), so it never waits for a lock."""
        rows = self.query("SELECT response FROM call_cache WHERE key = ?", [key])
        return json.loads(rows[0]["response"]) if rows else None

    def cache_get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored answers among `keys`, by key, in one read (a pure read, as cache_get)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # well under SQLite's limit of bound parameters per statement
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.query(f"SELECT key, response FROM call_cache WHERE key IN ({marks})", chunk):
                found[row["key"]] = json.loads(row["response"])
        return found

    def cache_put(self, key: str, backend: str, model: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        self.cache_put_many([(key, backend, model, request, response)])

    def cache_put_many(self, rows: Iterable[tuple[str, str, str, dict[str, Any], dict[str, Any]]]) -> None:
        """Cache rows (cache_put's arguments each) in one transaction."""
        with self.transaction() as db:
            self._insert_cache_rows(db, rows)

    @staticmethod
    def _insert_cache_rows(db: sqlite_utils.Database, rows: Iterable[tuple[str, str, str, dict[str, Any], dict[str, Any]]]) -> None:
        now = time.time()
        for key, backend, model, request, response in rows:
            db.execute(
                "INSERT OR REPLACE INTO call_cache (key, backend, model, request, response, created_at, hits)"
                " VALUES (?, ?, ?, ?, ?, ?, 0)",
                [key, backend, model, _dumps(request), _dumps(response), now],
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
        cache_rows: Iterable[tuple[str, str, str, dict[str, Any], dict[str, Any]]] = (),
    ) -> int:
        """The verdict row, and the tool call's new cache rows (cache_put's arguments each), in one transaction."""
        with self.transaction() as db:
            self._insert_cache_rows(db, cache_rows)
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

    # ---- retention ----------------------------------------------------------------------------------------------
    def gc(self, *, cache_older_than_s: float | None = None, verdicts_older_than_s: float | None = None, vacuum: bool = False) -> dict[str, int]:
        """Delete call-cache rows and verdict-log rows older than the given ages, in one transaction (LWE sessions,
        their versions and feedback are never touched). With `vacuum`, the file is then rewritten to give the
        space back to the filesystem (SQLite otherwise reuses it for new rows)."""
        now = time.time()
        counts = {"call_cache": 0, "verdicts": 0}
        with self.transaction() as db:
            if cache_older_than_s is not None:
                counts["call_cache"] = db.execute("DELETE FROM call_cache WHERE created_at < ?", [now - cache_older_than_s]).rowcount
            if verdicts_older_than_s is not None:
                counts["verdicts"] = db.execute("DELETE FROM verdicts WHERE created_at < ?", [now - verdicts_older_than_s]).rowcount
        if vacuum:
            with self._lock:
                try:
                    self.conn.execute("VACUUM")
                except sqlite3.Error as exc:
                    raise StoreError(f"could not vacuum the database {str(self.path)!r}: {self._why(exc)}") from exc
        return counts

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

    # ---- LWE sessions (see methods/lwe/) ----------------------------------------------------------------------
    def lwe_session_row(self, session: str) -> dict[str, Any] | None:
        """The session with its current meta-prompt text and pending-feedback count, or None."""
        rows = self.query(
            "SELECT s.name, s.current_version, s.batch_size, s.created_at, s.updated_at, v.text,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending"
            " FROM lwe_sessions s JOIN lwe_versions v ON v.session = s.name AND v.version = s.current_version"
            " WHERE s.name = ?",
            [session],
        )
        return rows[0] if rows else None

    def lwe_ensure_session(self, session: str, batch_size: int, initial_text: str) -> dict[str, Any]:
        """The session, created with version 1 (reason "initial") if it does not exist yet. Race-free across
        processes: creation happens inside one BEGIN IMMEDIATE transaction."""
        row = self.lwe_session_row(session)
        if row is not None:
            return row
        now = time.time()
        with self.transaction() as db:
            exists = list(db.query("SELECT 1 FROM lwe_sessions WHERE name = ?", [session]))
            if not exists:
                db.execute(
                    "INSERT INTO lwe_sessions (name, current_version, batch_size, created_at, updated_at) VALUES (?, 1, ?, ?, ?)",
                    [session, batch_size, now, now],
                )
                db.execute(
                    "INSERT INTO lwe_versions (session, version, parent, reason, text, created_at) VALUES (?, 1, NULL, 'initial', ?, ?)",
                    [session, initial_text, now],
                )
        row = self.lwe_session_row(session)
        assert row is not None
        return row

    def lwe_sessions(self) -> list[dict[str, Any]]:
        return self.query(
            "SELECT s.name, s.current_version, s.batch_size, s.created_at, s.updated_at,"
            " (SELECT COUNT(*) FROM lwe_versions v WHERE v.session = s.name) AS versions,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending"
            " FROM lwe_sessions s ORDER BY s.name"
        )

    def lwe_versions(self, session: str, *, with_text: bool = False) -> list[dict[str, Any]]:
        text = "text" if with_text else "NULL AS text"
        rows = self.query(
            f"SELECT version, parent, reason, {text}, LENGTH(text) AS chars, restored_from, feedback_ids, created_at"
            " FROM lwe_versions WHERE session = ? ORDER BY version",
            [session],
        )
        for row in rows:
            row["feedback_ids"] = json.loads(row["feedback_ids"])
            if not with_text:
                del row["text"]
        return rows

    def lwe_version(self, session: str, version: int) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM lwe_versions WHERE session = ? AND version = ?", [session, version])
        return rows[0] if rows else None

    def lwe_add_feedback(self, session: str, item: dict[str, Any]) -> tuple[int, int]:
        """Buffer one feedback item; (its id, pending items in the session after the insert)."""
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO lwe_feedback (session, meta_version, prompt, response_a, response_b, eval_prompt, judgment,"
                " winner, feedback, feedback_parse_ok, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                [
                    session,
                    item["meta_version"],
                    item["prompt"],
                    item["response_a"],
                    item["response_b"],
                    item["eval_prompt"],
                    item["judgment"],
                    item["winner"],
                    item["feedback"],
                    int(bool(item["feedback_parse_ok"])),
                    time.time(),
                ],
            )
            pending = list(db.query("SELECT COUNT(*) AS n FROM lwe_feedback WHERE session = ? AND status = 'pending'", [session]))
            return int(cursor.lastrowid), int(pending[0]["n"])

    def lwe_pending(self, session: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Buffered feedback items, oldest first."""
        sql = "SELECT * FROM lwe_feedback WHERE session = ? AND status = 'pending' ORDER BY id"
        return self.query(sql + " LIMIT ?", [session, limit]) if limit is not None else self.query(sql, [session])

    def lwe_feedback(self, session: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM lwe_feedback WHERE session = ? ORDER BY id", [session])

    def lwe_commit_version(
        self,
        session: str,
        *,
        expected_version: int,
        text: str,
        reason: str,
        use_feedback: list[int] | tuple[int, ...] = (),
        restored_from: int | None = None,
        discard_pending: bool = False,
    ) -> int:
        """Add a version and make it current, all in one transaction, or raise LweConflict and write nothing.

        Checks that the session's current version is still `expected_version` (the one the caller read) and that
        every id in `use_feedback` is still pending in this session; those items are marked used by the new version.
        `discard_pending` marks every other pending item discarded (reset). The new version's parent is
        `expected_version`.
        """
        if reason not in LWE_REASONS:
            raise ValueError(f"unknown meta-prompt version reason {reason!r}")
        now = time.time()
        ids = [int(i) for i in use_feedback]
        with self.transaction() as db:
            rows = list(db.query("SELECT current_version FROM lwe_sessions WHERE name = ?", [session]))
            if not rows:
                raise LweConflict(f"session {session!r} does not exist")
            if rows[0]["current_version"] != expected_version:
                raise LweConflict(f"session {session!r} is at version {rows[0]['current_version']}, not {expected_version}")
            version = list(db.query("SELECT MAX(version) AS v FROM lwe_versions WHERE session = ?", [session]))[0]["v"] + 1
            db.execute(
                "INSERT INTO lwe_versions (session, version, parent, reason, text, restored_from, feedback_ids, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [session, version, expected_version, reason, text, restored_from, json.dumps(ids), now],
            )
            if ids:
                marks = ",".join("?" * len(ids))
                cursor = db.execute(
                    f"UPDATE lwe_feedback SET status = 'used', used_in_version = ?, used_at = ?"
                    f" WHERE session = ? AND status = 'pending' AND id IN ({marks})",
                    [version, now, session, *ids],
                )
                if cursor.rowcount != len(set(ids)):
                    raise LweConflict(f"feedback items {ids} of session {session!r} are no longer all pending")
            if discard_pending:
                db.execute(
                    "UPDATE lwe_feedback SET status = 'discarded', used_in_version = ?, used_at = ? WHERE session = ? AND status = 'pending'",
                    [version, now, session],
                )
            db.execute("UPDATE lwe_sessions SET current_version = ?, updated_at = ? WHERE name = ?", [version, now, session])
        return version
