"""The call cache's table: one stored temperature-0 answer per request key (calls/cache.py decides what is looked up
and when; its reads and writes go through here). Every read and write of `call_cache`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from judge_mcp.storage.engine import Engine, Tx, dumps

KEYS_PER_READ = 500  # well under SQLite's limit of bound parameters per statement (and PostgreSQL's)


class CacheRow(NamedTuple):
    """A cache row not yet written. A tool call run through `App.run` writes its rows in the same transaction as its
    verdict (one write per tool call, verdict_log.VerdictLog.log); until then `CallCache` answers from memory."""

    key: str
    backend: str
    model: str
    request: dict[str, Any]
    response: dict[str, Any]


class CacheTable:
    """The call_cache table's reads and writes. Synchronous: `CallCache` runs them in the store's lanes."""

    def __init__(self, store: Engine):
        self.store = store

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The stored answers among `keys`, by key, in one read (a pure read: a hit writes nothing, so it never waits
        for a lock)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), KEYS_PER_READ):
            chunk = unique[start : start + KEYS_PER_READ]
            marks = ",".join("?" * len(chunk))
            for row in self.store.query(f"SELECT key, response FROM call_cache WHERE key IN ({marks})", chunk):
                found[row["key"]] = json.loads(row["response"])
        return found

    def put_many(self, rows: Iterable[CacheRow]) -> None:
        """Cache rows in one transaction."""
        with self.store.transaction() as tx:
            self.insert(tx, rows)

    # one row, a row with a stored key replaced (also a part of pg_leases.py's finishing statement)
    UPSERT = (
        "INSERT INTO call_cache (key, backend, model, request, response, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET backend = excluded.backend, model = excluded.model,"
        " request = excluded.request, response = excluded.response, created_at = excluded.created_at"
    )

    @staticmethod
    def upsert_params(row: CacheRow, now: float) -> list[Any]:
        key, backend, model, request, response = row
        return [key, backend, model, dumps(request), dumps(response), now]

    @staticmethod
    def insert(tx: Tx, rows: Iterable[CacheRow]) -> None:
        """The rows, inside the caller's transaction (a row with a stored key replaces it)."""
        now = time.time()
        for row in rows:
            tx.execute(CacheTable.UPSERT, CacheTable.upsert_params(row, now))

    @staticmethod
    def delete_older_than(tx: Tx, cutoff: float) -> int:
        """Delete the rows stored before `cutoff` (a time.time() value) inside the caller's transaction; how many."""
        return tx.execute("DELETE FROM call_cache WHERE created_at < ?", [cutoff])
