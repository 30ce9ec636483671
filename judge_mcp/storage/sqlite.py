"""All state in one SQLite file (WAL) through sqlite-utils: the connections, transactions and the migration registry
(each module that owns tables registers its migrations and holds its SQL: the call cache in methods/call_cache.py,
the verdict log in verdict_log.py, LWE in methods/lwe/repository.py, the option pool in methods/unrelated_pool.py,
the bench in bench/results.py).

Every write that must be all-or-nothing runs inside `Store.transaction()` (BEGIN IMMEDIATE ... COMMIT), so a process
killed at any moment leaves either the whole change or none of it. A database that cannot be opened, read or written
(a directory or a non-SQLite file at the path, a full disk, a lock held past the busy timeout) raises `StoreError`,
naming the file and SQLite's reason; a failed write is rolled back first, so nothing of it is kept. One `Store` may be shared by threads and tasks:
writes go through one connection under a re-entrant lock, reads outside a transaction through a second, read-only
one (in WAL mode a read never waits for a writer), and other processes are serialised by SQLite itself (busy
timeout; a lock held past it is a StoreError that says so).

Async code never calls the store on the event loop: `await store.aio.NAME(...)` runs the method in a worker
thread, so a write waiting for another process's lock stalls only the call that needs it, never other clients.
The two trips of every tool call (the call cache's read, the verdict's write) take a cheaper road: each `Store` has
two persistent threads of its own, `store.reads` and `store.writes` (`Lane`), which run their jobs in order. A read
never queues behind a write (a write waiting for another process's lock holds up only later writes, which would
wait for the writing connection's lock anyway). A job that has been handed to a lane runs to its end even if its
caller stops waiting: a write transaction is committed or rolled back whole, never cut off.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: dict[str, Migration] = {}

# The migration registry. Each module that owns tables registers its forward-only migrations with @migration;
# `Store.migrate()` applies every registered one not yet recorded in `_migrations`, in name order (m001..., m002...,
# m101... for the bench), each in the same transaction as its record. Every judge-mcp database has the tables of
# the modules below (imported before migrating); the bench's tables exist in the databases the bench opens
# (judge_mcp.bench.results registers them and migrates on use).
SCHEMA_MODULES = (
    "judge_mcp.calls.cache",
    "judge_mcp.storage.verdict_log",
    "judge_mcp.storage.lwe_sessions",
    "judge_mcp.methods.unrelated_pool",
)


def migration(fn: Migration) -> Migration:
    """Register a forward-only migration under its function name (which fixes its order); it runs once per database."""
    if fn.__name__ in MIGRATIONS and MIGRATIONS[fn.__name__] is not fn:
        raise ValueError(f"two migrations are named {fn.__name__!r}")
    MIGRATIONS[fn.__name__] = fn
    return fn

class StoreError(Exception):
    """The database could not be opened, read or written (the message names the file and the reason)."""


def dumps(value: Any) -> str:
    """A JSON column's text: the one encoding every table uses (sorted keys, non-ASCII kept)."""
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


class OffLoop:
    """`x.aio.NAME(...)`: the method NAME of `x` (the store or a repository over it), awaited in a worker thread
    (see the module docstring)."""

    def __init__(self, target: Any):
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await anyio.to_thread.run_sync(partial(method, *args, **kwargs))

        return call


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the caller stopped waiting; the job ran to its end all the same
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _serve(jobs: queue.SimpleQueue[Any]) -> None:
    """A lane's thread: run each job, hand its outcome to the caller's event loop; None stops the thread."""
    while (job := jobs.get()) is not None:
        fn, loop, then = job
        try:
            result, error = fn(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(then, result, error)
        except RuntimeError:  # the caller's event loop has closed: nobody is left to tell
            pass
        del job, fn, loop, then, result, error


class Lane:
    """One persistent worker thread that runs a store's jobs in order, off the event loop: a cheaper trip than a
    worker thread borrowed per call (anyio.to_thread): the caller's side is a queue entry and a future, the thread
    answers through `loop.call_soon_threadsafe`. Started on first use; stopped by `close()` (after the jobs handed to
    it before) or when its store is garbage collected. A job runs to its end even if its caller is cancelled, so a
    write transaction is never cut off: it commits or rolls back whole."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` in the lane's thread; its result, or its exception raised here. A caller cancelled
        while it waits stops waiting; the job still runs to its end."""
        future = asyncio.get_running_loop().create_future()
        self.submit(partial(fn, *args, **kwargs) if args or kwargs else fn, partial(_settle, future))
        return await future

    def submit(self, fn: Callable[[], Any], then: Callable[[Any, BaseException | None], None]) -> None:
        """Hand `fn()` to the lane's thread; `then(result, None)` or `then(None, exception)` is called on this event
        loop once it has run (call it on the event loop's thread)."""
        if self._thread is None:
            self._started()
        self._jobs.put((fn, asyncio.get_running_loop(), then))

    def _started(self) -> None:
        with self._start:
            if self._thread is None:
                thread = threading.Thread(target=_serve, args=(self._jobs,), name=self.name, daemon=True)
                thread.start()
                self._thread = thread

    def close(self) -> None:
        """Stop the thread once the jobs handed to it so far are done (waits for them)."""
        with self._start:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            if thread is not threading.current_thread():
                thread.join()


def _path_problem(path: Path) -> str | None:
    """Why a database cannot be created or opened at `path`, in words (SQLite only says "unable to open database
    file"): a folder at the path, a file where a folder should be, a read-only filesystem, no write permission.
    None when none of these is the cause."""
    if str(path) == ":memory:":
        return None
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


class Store:
    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0):
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._in_transaction = threading.local()  # this thread is inside transaction(): its reads see its writes
        self.aio = OffLoop(self)
        self.reads = Lane(f"judge-mcp store reads {self.path.name}")
        self.writes = Lane(f"judge-mcp store writes {self.path.name}")
        for lane in (self.reads, self.writes):  # an idle lane's thread ends with its store even if close() is never called
            weakref.finalize(self, lane._jobs.put, None)
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
            reason = exc.args[0] if isinstance(exc, StoreError) else (_path_problem(self.path) or f"{type(exc).__name__}: {exc}")
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
        """Apply every registered migration this database has not had yet; returns their names."""
        for module in SCHEMA_MODULES:
            importlib.import_module(module)
        if MIGRATIONS.keys() <= self._migrated:
            return []
        with self.transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            done = {row["name"] for row in db.query("SELECT name FROM _migrations")}
            applied = []
            for name in sorted(MIGRATIONS.keys() - done):
                MIGRATIONS[name](db)
                db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", [name, time.time()])
                applied.append(name)
        self._migrated = done | set(applied)
        return applied

    def close(self) -> None:
        self.reads.close()
        self.writes.close()
        with self._lock:
            self.conn.close()
        if self.reader is not None:
            with self._read_lock:
                self.reader.close()

    def vacuum(self) -> None:
        """Rewrite the file to give the space of deleted rows back to the filesystem (retention.gc)."""
        with self._lock:
            try:
                self.conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise StoreError(f"could not vacuum the database {str(self.path)!r}: {self._why(exc)}") from exc
