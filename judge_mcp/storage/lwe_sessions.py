"""The LWE repository: its tables (migration m002_lwe) and every read and write of sessions, meta-prompt versions
and the feedback buffer. The algorithm that uses them is in judging.py, the administration in sessions.py.

Writes that must be all-or-nothing run in one `Store.transaction()`; a version is committed only if the session is
still at the version the caller read (else `LweConflict`, nothing written). Async code calls `repo.aio.NAME(...)`,
which runs the method in a worker thread like `store.aio`.
"""

from __future__ import annotations

import json
import time
from typing import Any

import sqlite_utils

from judge_mcp.storage.sqlite import OffLoop, Store, migration


class LweConflict(Exception):
    """The session changed between reading it and writing a new version; nothing was written."""


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


class LweRepository:
    """Sessions, versions and feedback of every LWE session in one Store."""

    def __init__(self, store: Store):
        self.store = store
        self.aio = OffLoop(self)

    def session_row(self, session: str) -> dict[str, Any] | None:
        """The session with its current meta-prompt text and pending-feedback count, or None."""
        rows = self.store.query(
            "SELECT s.name, s.current_version, s.batch_size, s.created_at, s.updated_at, v.text,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending"
            " FROM lwe_sessions s JOIN lwe_versions v ON v.session = s.name AND v.version = s.current_version"
            " WHERE s.name = ?",
            [session],
        )
        return rows[0] if rows else None

    def ensure_session(self, session: str, batch_size: int, initial_text: str) -> dict[str, Any]:
        """The session, created with version 1 (reason "initial") if it does not exist yet. Race-free across
        processes: creation happens inside one BEGIN IMMEDIATE transaction."""
        row = self.session_row(session)
        if row is not None:
            return row
        now = time.time()
        with self.store.transaction() as db:
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
        row = self.session_row(session)
        assert row is not None
        return row

    def sessions(self) -> list[dict[str, Any]]:
        return self.store.query(
            "SELECT s.name, s.current_version, s.batch_size, s.created_at, s.updated_at,"
            " (SELECT COUNT(*) FROM lwe_versions v WHERE v.session = s.name) AS versions,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending"
            " FROM lwe_sessions s ORDER BY s.name"
        )

    def versions(self, session: str, *, with_text: bool = False) -> list[dict[str, Any]]:
        text = "text" if with_text else "NULL AS text"
        rows = self.store.query(
            f"SELECT version, parent, reason, {text}, LENGTH(text) AS chars, restored_from, feedback_ids, created_at"
            " FROM lwe_versions WHERE session = ? ORDER BY version",
            [session],
        )
        for row in rows:
            row["feedback_ids"] = json.loads(row["feedback_ids"])
            if not with_text:
                del row["text"]
        return rows

    def version(self, session: str, version: int) -> dict[str, Any] | None:
        rows = self.store.query("SELECT * FROM lwe_versions WHERE session = ? AND version = ?", [session, version])
        return rows[0] if rows else None

    def add_feedback(self, session: str, item: dict[str, Any]) -> tuple[int, int]:
        """Buffer one feedback item; (its id, pending items in the session after the insert)."""
        with self.store.transaction() as db:
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

    def pending(self, session: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Buffered feedback items, oldest first."""
        sql = "SELECT * FROM lwe_feedback WHERE session = ? AND status = 'pending' ORDER BY id"
        return self.store.query(sql + " LIMIT ?", [session, limit]) if limit is not None else self.store.query(sql, [session])

    def feedback(self, session: str) -> list[dict[str, Any]]:
        return self.store.query("SELECT * FROM lwe_feedback WHERE session = ? ORDER BY id", [session])

    def commit_version(
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
        with self.store.transaction() as db:
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
