"""The SQLite engine (`engine.Engine`): all state in one file (WAL), its connections and transactions.

Every write that must be all-or-nothing runs inside `SqliteEngine.transaction()` (BEGIN IMMEDIATE ... COMMIT), so a process
killed at any moment leaves either the whole change or none of it. A database that cannot be opened, read or written
(a directory or a non-SQLite file at the path, a full disk, a lock held past the busy timeout) raises `StoreError`,
naming the file and SQLite's reason; a failed write is rolled back first, so nothing of it is kept. One `SqliteEngine` may
be shared by threads and tasks: writes go through one connection under a re-entrant lock, reads outside a
transaction through a second, read-only one (in WAL mode a read never waits for a writer), and other processes are
serialised by SQLite itself (busy timeout; a lock held past it is a StoreError that says so). Async code never
calls it on the event loop: see lanes.py. What is SQLite's own stays here: the PRAGMAs, the application_id mark,
dropping a column on an SQLite older than 3.35.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from judge_mcp.redaction import scrub_params
from judge_mcp.storage import migrations as schema
from judge_mcp.storage.engine import Dialect, Migration, StoreError
from judge_mcp.storage.lanes import Lane

__all__ = ["APPLICATION_ID", "SQLITE", "SqliteTx", "SqliteEngine", "StoreError"]

SQLITE = Dialect(name="sqlite", auto_id="INTEGER PRIMARY KEY", real="REAL")
DROP_COLUMN = sqlite3.sqlite_version_info >= (3, 35, 0)  # ALTER TABLE ... DROP COLUMN; older: the table is rebuilt

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


def _rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description or ()]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


class SqliteTx:
    """`engine.Tx` over the writing connection, inside `SqliteEngine.transaction()`."""

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(sql, scrub_params(params)).rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return _rows(self.conn.execute(sql, params))

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self.conn.execute(sql, scrub_params(params)).lastrowid or 0)

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.conn.execute("SELECT * FROM pragma_table_info(?)", [table])}

    def drop_column(self, table: str, column: str) -> None:
        if DROP_COLUMN:
            self.conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
            return
        # SQLite before 3.35: sqlite-utils writes the rebuild (a new table, the rows copied, the old one dropped,
        # the new one renamed), run here inside this transaction (its `transform` would commit on its own)
        # lazy: sqlite-utils loads only for the rebuild an old SQLite needs
        import sqlite_utils

        for sql in sqlite_utils.Database(self.conn, recursive_triggers=False).table(table).transform_sql(drop={column}):
            self.conn.execute(sql)


def _path_problem(path: Path) -> str | None:
    """Why a database cannot be created or opened at `path`, in words (SQLite only says "unable to open database
    file"): a folder at the path, a file where a folder should be, a read-only filesystem, no write permission.
    None when none of these is the cause."""
    if str(path) == ":memory:":
        return None
    try:
        return _path_problem_of(path)
    except OSError:  # a check that cannot look either: SQLite's own words stay the reason
        return None


def _closed_folder(path: Path) -> Path | None:
    """The first folder above `path` this user may not enter (no search permission: another user's home, a 0700
    folder), where every look further down fails with "Permission denied"; None when there is none."""
    for folder in reversed(path.parents):
        if os.path.isdir(folder) and not os.access(folder, os.X_OK):
            return folder
    return None


def _path_problem_of(path: Path) -> str | None:
    closed = _closed_folder(path)
    if closed is not None:
        return (f"this user may not enter the folder {str(closed)!r} (no permission), so the database cannot be made or "
                "opened below it; set JUDGE_MCP_DB to a place this user can write")
    if path.is_dir():
        return "that path is a folder, not a file (give JUDGE_MCP_DB a file name, e.g. .../judge.db)"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{str(folder)!r} is a file, so it cannot hold the folder the database goes in"
    target = path if path.exists() else folder
    try:
        read_only_fs = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        read_only_fs = False
    if read_only_fs:
        return f"{str(target)!r} is on a read-only filesystem; set JUDGE_MCP_DB to a writable place"
    if not os.access(target, os.W_OK) or (path.exists() and not os.access(folder, os.W_OK)):
        what = "the file" if target == path else "the folder"
        return f"{what} {str(target)!r} is not writable by this user (SQLite also needs to write its -wal file beside it)"
    return None


class SqliteEngine:
    """The SQLite engine. `migrations` is the schema to bring the file to (storage/migrations.py; App, the CLI and the
    bench pass theirs through `storage.open_store`)."""

    dialect = SQLITE

    def __init__(self, path: str | Path, migrations: Sequence[Migration] = schema.MIGRATIONS, *, busy_timeout_s: float = 30.0):
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._in_transaction = threading.local()  # this thread is inside transaction(): its reads see its writes
        self.reads = Lane(f"judge-mcp store reads {self.path.name}")
        self.writes = Lane(f"judge-mcp store writes {self.path.name}")
        for lane in (self.reads, self.writes):
            lane.stop_when_collected(self)
        self._migrated: set[str] = set()
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
            self._tx = SqliteTx(conn)
            self.migrate(migrations)
            if str(path) != ":memory:":  # a second connection to ":memory:" would be another database
                self.reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
                self.reader.execute("PRAGMA query_only=ON")
                self.reader.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
                self.reader.row_factory = sqlite3.Row
        except (OSError, sqlite3.Error, StoreError) as exc:
            if conn is not None:
                conn.close()
            reason = exc.args[0] if isinstance(exc, StoreError) else (_path_problem(self.path) or f"{type(exc).__name__}: {exc}")
            raise StoreError(f"cannot open the database {str(path)!r} (JUDGE_MCP_DB): {reason}") from exc

    @property
    def location(self) -> str:
        return str(self.path.resolve()) if str(self.path) != ":memory:" else f"memory:{id(self)}"

    # ---- plumbing -----------------------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[SqliteTx]:
        """An all-or-nothing write. Re-entrant within a thread (the inner block joins the outer transaction)."""
        with self._lock:
            if self.conn.in_transaction:
                yield self._tx
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"could not write the database {str(self.path)!r}: {self._why(exc)}") from exc
            self._in_transaction.active = True
            try:
                yield self._tx
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

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts. Outside a transaction through the read-only connection, which never waits for a writer;
        inside one (in this thread) through the writer, so the transaction sees its own changes."""
        try:
            if self.reader is None or getattr(self._in_transaction, "active", False):
                with self._lock:
                    return self._tx.query(sql, params)
            with self._read_lock:
                return [dict(row) for row in self.reader.execute(sql, params).fetchall()]
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the database {str(self.path)!r}: {self._why(exc)}") from exc

    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Apply the migrations this database has not had yet, in order, in one transaction (BEGIN IMMEDIATE: another
        process migrating the same file at once waits, then finds them applied); their names. Once a list is
        applied, asking again costs no transaction."""
        wanted = schema.names(migrations)
        if self._migrated.issuperset(wanted):
            return []
        with self.transaction() as tx:
            applied = schema.apply(tx, migrations)
        self._migrated.update(wanted)
        return applied

    def close(self) -> None:
        self.reads.close()
        self.writes.close()
        with self._lock:
            self.conn.close()
        if self.reader is not None:
            with self._read_lock:
                self.reader.close()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file and truncate it (`judge-mcp gc` reports the file's size after)."""
        with self._lock:
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise StoreError(f"could not checkpoint the database {str(self.path)!r}: {self._why(exc)}") from exc

    def vacuum(self) -> None:
        """Rewrite the file to give the space of deleted rows back to the filesystem (retention.gc)."""
        with self._lock:
            try:
                self.conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise StoreError(f"could not vacuum the database {str(self.path)!r}: {self._why(exc)}") from exc
