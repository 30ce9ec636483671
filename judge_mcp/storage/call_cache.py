"""The call cache's table: one stored temperature-0 answer per request key (calls/cache.py decides what is looked up
and when; its reads and writes go through here). Every read and write of `call_cache`. A long answer text is stored
once, in `texts` (storage/texts.py), and the row refers to it by hash; a row whose text is gone is not an answer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from judge_mcp.storage import texts
from judge_mcp.storage.engine import Engine, Tx, dumps

KEYS_PER_READ = 500  # well under SQLite's limit of bound parameters per statement (and PostgreSQL's)


class CacheRow(NamedTuple):
    """A cache row not yet written. A tool call run through runtime/run.py's `run_method` writes its rows in the same transaction as its
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
        return self.complete(self.store, found)

    @staticmethod
    def complete(store: Engine | Tx, found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The stored answers with their texts read back from `texts`; an answer whose text is not there any more
        is left out (a miss: the request is sent again), never served without its text."""
        texts.resolve(store, found.values())
        return {key: answer for key, answer in found.items() if texts.REFS not in answer}

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
    def statements(row: CacheRow, now: float) -> list[tuple[str, list[Any]]]:
        """The statements that store one row, as (SQL, parameters): its long text's (when it has one), then its
        own (pg_leases.py runs them as one statement)."""
        key, backend, model, request, response = row
        out: list[tuple[str, list[Any]]] = []
        text = response.get("text")
        if isinstance(text, str) and len(text) >= texts.LONG:
            digest, out = texts.upsert_statements(text, "cache", now)
            response = {**{k: v for k, v in response.items() if k != "text"}, texts.REFS: {"text": digest}}
        out.append((CacheTable.UPSERT, [key, backend, model, dumps(request), dumps(response), now]))
        return out

    @staticmethod
    def insert(tx: Tx, rows: Iterable[CacheRow], now: float | None = None) -> None:
        """The rows, inside the caller's transaction (a row with a stored key replaces it); a long text once."""
        now = time.time() if now is None else now
        for key, backend, model, request, response in rows:
            response = texts.shelve(tx, response, ("text",), "cache", now)
            tx.execute(CacheTable.UPSERT, [key, backend, model, dumps(request), dumps(response), now])

    @staticmethod
    def delete_older_than(tx: Tx, cutoff: float) -> int:
        """Delete the rows stored before `cutoff` (a time.time() value) inside the caller's transaction; how many."""
        return tx.execute("DELETE FROM call_cache WHERE created_at < ?", [cutoff])
