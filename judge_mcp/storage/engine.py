"""The seam between judge-mcp and a database engine: what the repositories, the migrations, the call cache and App
use of a store. Two engines implement it: SQLite (`storage/sqlite.py`) and PostgreSQL (`storage/postgres.py`,
through psycopg 3), each a class that provides `Engine` and `Tx`, with its own `Dialect`. Nothing above this
layer changes between them: the repositories (`call_cache.py`, `verdict_log.py`, `lwe_sessions.py`, `option_pool.py`,
`bench_results.py`) and the migrations (`migrations.py`) are written against these protocols.

What the repositories' SQL may assume of an engine:
- `?` placeholders (an engine whose driver takes another style rewrites them; psycopg's is `%s`);
- the SQL that SQLite (3.24+) and PostgreSQL share: `INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE SET
  col = excluded.col`, `CASE`, `COUNT`, `LENGTH`, subqueries; no `INSERT OR IGNORE/REPLACE`, no `PRAGMA`;
- a new row's integer id comes from `Tx.insert` (SQLite: the cursor's lastrowid; a server engine: `RETURNING id`);
- column types that differ between engines come from the `Dialect` (an engine-assigned id, a float);
- a statement that has no shared form (the verdict log's JSON functions) is kept in its repository once per
  engine, chosen by `Dialect.name`.

An engine may also offer `leases` (an attribute; the call cache reads it with `getattr(store, "leases", None)`):
claims on a call-cache key shared by every process on the database, so identical requests in flight in different
processes reach the backend once (PostgreSQL's: storage/pg_leases.py). SQLite's processes share no leases: it has
none, and the call cache shares identical requests within its process only.

Everything else an engine does for itself: connections, transactions (all-or-nothing, re-entrant within a
thread), the read and write lanes (`lanes.Lane`), marking a database as judge-mcp's (SQLite's application_id),
serialising migrations between processes, and turning its driver's errors into `StoreError` naming the database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from judge_mcp.redaction import scrub
from judge_mcp.storage.lanes import Lane


class StoreError(Exception):
    """The database could not be opened, read or written (the message names the database and the reason)."""


# One encoder for every JSON column (json.dumps would build one per call with these options: eight per verdict row)
_COLUMN_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def dumps(value: Any) -> str:
    """A JSON column's text: the one encoding every table uses (sorted keys, non-ASCII kept), with every registered
    credential blanked out of its strings (redaction.scrub: whatever wrote the value, no key reaches the database)."""
    return _COLUMN_ENCODER.encode(scrub(value))


@dataclass(frozen=True)
class Dialect:
    """What differs in the text of SQL between engines, as the migrations and repositories need it."""

    name: str  # "sqlite" or "postgresql"; chooses a repository's per-engine statement where there is no shared form
    auto_id: str  # an integer primary key the database assigns ("INTEGER PRIMARY KEY" in SQLite)
    real: str  # a double-precision float column ("REAL" in SQLite, "DOUBLE PRECISION" in PostgreSQL)


class Tx(Protocol):
    """One open transaction (`Engine.transaction()`): every statement in it is committed together or not at all."""

    dialect: Dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts, seeing this transaction's own changes."""
        ...

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one INSERT of one row into a table whose key is an engine-assigned integer `id`; that id."""
        ...

    def columns(self, table: str) -> set[str]:
        """The names of the table's columns (for migrations that must look before they change a table)."""
        ...

    def drop_column(self, table: str, column: str) -> None:
        """Remove a column and its values, keeping every row and the table's other columns and constraints."""
        ...


Migration = Callable[[Tx], None]


class Engine(Protocol):
    """A database judge-mcp keeps its state in. Safe to share between threads and tasks; its methods block, so async
    code runs them in the store's lanes (`reads`, `writes`) or in a worker thread, never on the event loop."""

    dialect: Dialect
    reads: Lane  # one thread running reads in order; a read never waits for a write
    writes: Lane  # one thread running writes in order

    @property
    def location(self) -> str:
        """Names the database, the same string for every Engine open on it (per-database locks in one process)."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts. Outside a transaction a read never waits for a writer; inside one (in this thread) it sees
        the transaction's changes."""
        ...

    def transaction(self) -> AbstractContextManager[Tx]:
        """An all-or-nothing write; re-entrant within a thread (an inner block joins the outer transaction). A
        database error inside it rolls it back and is raised as StoreError."""
        ...

    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Apply, in order and each once, the migrations this database has not had (storage/migrations.py); their
        names. One transaction: a failing migration leaves nothing of itself or of those after it."""
        ...

    def vacuum(self) -> None:
        """Give the space of deleted rows back (retention)."""
        ...

    def checkpoint(self) -> None:
        """Fold any write-ahead log into the database (SQLite's WAL); nothing for an engine without one."""
        ...

    def close(self) -> None:
        """Finish the jobs handed to the lanes, then close every connection."""
        ...
