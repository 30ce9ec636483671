"""The LWE repository: every read and write of sessions, meta-prompt versions and the feedback buffer (tables made
by migrations.m003_lwe). The algorithm that uses them is in methods/lwe/judging.py, the administration in
methods/lwe/sessions.py.

Writes that must be all-or-nothing run in one `transaction()`; a version is committed only if the session is
still at the version the caller read (else `LweConflict`, nothing written): `UPDATE ... WHERE current_version =
expected` decides it, which holds across processes on either engine (SQLite serialises writers; PostgreSQL's row
lock makes the second writer wait and then find the version changed). Async code awaits `repo.aio.NAME(...)`
(`LweOffLoop`), which runs the method in a worker thread.
"""

from __future__ import annotations

import json
import time
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage import texts
from judge_mcp.storage.engine import Engine, Tx
from judge_mcp.storage.lanes import in_thread


class LweConflict(Exception):
    """The session changed between reading it and writing a new version; nothing was written."""


LWE_REASONS = ("initial", "refine", "condense", "reset", "rollback")
# a feedback item's texts, in the order of their columns before `winner` (the last, `feedback`, after it)
FEEDBACK_TEXTS = ("prompt", "response_a", "response_b", "eval_prompt", "judgment", "feedback")


def session_key(tenant: str, session: str) -> str:
    """A session's key in the tables (`lwe_sessions.name`, `session` of its versions and feedback): its tenant and its
    name (names match [A-Za-z0-9_.-]{1,64}, so the first `/` ends the tenant). Two tenants' sessions of one name are
    two sessions; migrations.m013_tenants gave the sessions from before tenants their key."""
    return f"{tenant}/{session}"


def sessions_by_tenant(store: Engine) -> dict[str, int]:
    """Every tenant's count of LWE sessions, for a reader that found none of its own tenant to say whose the
    database does hold (`judge-mcp sessions list --tenant`)."""
    rows = store.query("SELECT tenant, COUNT(*) AS n FROM lwe_sessions GROUP BY tenant ORDER BY tenant")
    return {str(row["tenant"]): int(row["n"]) for row in rows}


class LweRepository:
    """Sessions, versions and feedback of one tenant's LWE sessions (`tenant`; None: the call's, tenants.current()).
    Every method takes and returns a session's name; the tables hold its key (`session_key`)."""

    def __init__(self, store: Engine, tenant: str | None = None):
        self.store = store
        self.tenant = tenant or tenants.current()
        self.aio = LweOffLoop(self)

    def _key(self, session: str) -> str:
        return session_key(self.tenant, session)

    def _named(self, row: dict[str, Any]) -> dict[str, Any]:
        """A session row with its name in place of its key."""
        row["name"] = str(row["name"]).split("/", 1)[1]
        return row

    def session_row(self, session: str) -> dict[str, Any] | None:
        """The session with its current meta-prompt text and pending-feedback count, or None."""
        session = self._key(session)
        rows = self.store.query(
            "SELECT s.name, s.current_version, s.batch_size, s.learn_from_labels, s.created_at, s.updated_at, v.text,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.source = 'label' AND f.status != 'discarded') AS label_feedback"
            " FROM lwe_sessions s JOIN lwe_versions v ON v.session = s.name AND v.version = s.current_version"
            " WHERE s.name = ?",
            [session],
        )
        return self._named(rows[0]) if rows else None

    def ensure_session(self, session: str, batch_size: int, initial_text: str, learn_from_labels: bool = True) -> dict[str, Any]:
        """The session, created with version 1 (reason "initial") if it does not exist yet (`batch_size` and
        `learn_from_labels` are set then, and kept by an existing session). Race-free across
        processes: the session row is inserted with ON CONFLICT DO NOTHING, and only the process whose insert made
        it adds version 1, in the same transaction."""
        row = self.session_row(session)
        if row is not None:
            return row
        now, key = time.time(), self._key(session)
        with self.store.transaction() as tx:
            made = tx.execute(
                "INSERT INTO lwe_sessions (name, current_version, batch_size, learn_from_labels, created_at, updated_at, tenant)"
                " VALUES (?, 1, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                [key, batch_size, int(learn_from_labels), now, now, self.tenant],
            )
            if made:
                tx.execute(
                    "INSERT INTO lwe_versions (session, version, parent, reason, text, created_at) VALUES (?, 1, NULL, 'initial', ?, ?)",
                    [key, initial_text, now],
                )
        row = self.session_row(session)
        assert row is not None
        return row

    def sessions(self) -> list[dict[str, Any]]:
        rows = self.store.query(
            "SELECT s.name, s.current_version, s.batch_size, s.created_at, s.updated_at,"
            " (SELECT COUNT(*) FROM lwe_versions v WHERE v.session = s.name) AS versions,"
            " (SELECT COUNT(*) FROM lwe_feedback f WHERE f.session = s.name AND f.status = 'pending') AS pending"
            " FROM lwe_sessions s WHERE s.tenant = ? ORDER BY s.name",
            [self.tenant],
        )
        return [self._named(row) for row in rows]

    def versions(self, session: str, *, with_text: bool = False) -> list[dict[str, Any]]:
        session = self._key(session)
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
        rows = self.store.query("SELECT * FROM lwe_versions WHERE session = ? AND version = ?", [self._key(session), version])
        if rows:
            rows[0]["session"] = session
        return rows[0] if rows else None

    def add_feedback(self, session: str, item: dict[str, Any]) -> tuple[int, int]:
        """Buffer one feedback item; (its id, pending items in the session after the insert). Its long texts are
        stored once (storage/texts.py), shared with the call cache and the verdict log, and listed in `text_refs`."""
        session = self._key(session)
        with self.store.transaction() as tx:
            feedback_id = self._insert_feedback(tx, session, item, time.time())
            pending = tx.query("SELECT COUNT(*) AS n FROM lwe_feedback WHERE session = ? AND status = 'pending'", [session])
            return feedback_id, int(pending[0]["n"])

    @staticmethod
    def _insert_feedback(tx: Tx, session: str, item: dict[str, Any], now: float) -> int:
        kept = texts.shelve(tx, item, FEEDBACK_TEXTS, "lwe", now)
        refs = kept.get(texts.REFS)
        return tx.insert(
            "INSERT INTO lwe_feedback (session, meta_version, prompt, response_a, response_b, eval_prompt, judgment, winner, feedback,"
            " feedback_parse_ok, status, created_at, text_refs, source, verdict_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
            [
                session,
                item["meta_version"],
                *(kept.get(field, "") for field in FEEDBACK_TEXTS[:5]),
                item["winner"],
                kept.get("feedback", ""),
                int(bool(item["feedback_parse_ok"])),
                now,
                None if refs is None else json.dumps(refs, sort_keys=True),
                item.get("source", "self"),
                item.get("verdict_id"),
            ],
        )

    @classmethod
    def label_feedback(cls, tx: Tx, tenant: str, session: str, verdict_id: str, item: dict[str, Any] | None) -> bool:
        """Inside the caller's transaction (the label's own): discard the verdict's pending label item, if any (a
        replaced label), then buffer `item` (None: the label agrees with the verdict) when `tenant`'s session of that
        name learns from labels. Whether an item was buffered."""
        session = session_key(tenant, session)
        rows = tx.query("SELECT learn_from_labels FROM lwe_sessions WHERE name = ?", [session])
        if not rows or not rows[0]["learn_from_labels"]:
            return False
        tx.execute("UPDATE lwe_feedback SET status = 'discarded', used_at = ? WHERE verdict_id = ? AND status = 'pending'", [time.time(), verdict_id])
        if item is None:
            return False
        cls._insert_feedback(tx, session, {**item, "source": "label", "verdict_id": verdict_id}, time.time())
        return True

    def pending(self, session: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Buffered feedback items, oldest first."""
        sql = "SELECT * FROM lwe_feedback WHERE session = ? AND status = 'pending' ORDER BY id"
        key = self._key(session)
        rows = self.store.query(sql + " LIMIT ?", [key, limit]) if limit is not None else self.store.query(sql, [key])
        return self._with_texts(rows, session)

    def _with_texts(self, rows: list[dict[str, Any]], session: str) -> list[dict[str, Any]]:
        """Feedback rows with their stored texts back in their columns (`text_refs` then gone, as in older rows), and the
        session's name in place of its key."""
        for row in rows:
            row["session"] = session
            refs = row.pop(texts.REFS, None)
            if refs:
                row[texts.REFS] = json.loads(refs)
        texts.resolve(self.store, rows)
        return rows

    def feedback(self, session: str) -> list[dict[str, Any]]:
        return self._with_texts(self.store.query("SELECT * FROM lwe_feedback WHERE session = ? ORDER BY id", [self._key(session)]), session)

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
        now, name, session = time.time(), session, self._key(session)
        ids = [int(i) for i in use_feedback]
        with self.store.transaction() as tx:
            # The compare-and-set first: it locks the session's row (PostgreSQL) until the commit, so of two
            # processes committing from the same version one waits here, then finds the version changed.
            if not tx.execute(
                "UPDATE lwe_sessions SET updated_at = ? WHERE name = ? AND current_version = ?", [now, session, expected_version]
            ):
                rows = tx.query("SELECT current_version FROM lwe_sessions WHERE name = ?", [session])
                if not rows:
                    raise LweConflict(f"session {name!r} does not exist")
                raise LweConflict(f"session {name!r} is at version {rows[0]['current_version']}, not {expected_version}")
            version = tx.query("SELECT MAX(version) AS v FROM lwe_versions WHERE session = ?", [session])[0]["v"] + 1
            tx.execute(
                "INSERT INTO lwe_versions (session, version, parent, reason, text, restored_from, feedback_ids, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [session, version, expected_version, reason, text, restored_from, json.dumps(ids), now],
            )
            if ids:
                marks = ",".join("?" * len(ids))
                marked = tx.execute(
                    f"UPDATE lwe_feedback SET status = 'used', used_in_version = ?, used_at = ?"
                    f" WHERE session = ? AND status = 'pending' AND id IN ({marks})",
                    [version, now, session, *ids],
                )
                if marked != len(set(ids)):
                    raise LweConflict(f"feedback items {ids} of session {name!r} are no longer all pending")
            if discard_pending:
                tx.execute(
                    "UPDATE lwe_feedback SET status = 'discarded', used_in_version = ?, used_at = ? WHERE session = ? AND status = 'pending'",
                    [version, now, session],
                )
            tx.execute("UPDATE lwe_sessions SET current_version = ?, updated_at = ? WHERE name = ?", [version, now, session])
        return version


class LweOffLoop:
    """`LweRepository.aio`: the repository's methods that async code needs, each awaited in a worker thread."""

    def __init__(self, repo: LweRepository):
        self._repo = repo

    async def session_row(self, session: str) -> dict[str, Any] | None:
        return await in_thread(self._repo.session_row, session)

    async def ensure_session(self, session: str, batch_size: int, initial_text: str, learn_from_labels: bool = True) -> dict[str, Any]:
        return await in_thread(self._repo.ensure_session, session, batch_size, initial_text, learn_from_labels)

    async def pending(self, session: str, limit: int | None = None) -> list[dict[str, Any]]:
        return await in_thread(self._repo.pending, session, limit)

    async def add_feedback(self, session: str, item: dict[str, Any]) -> tuple[int, int]:
        return await in_thread(self._repo.add_feedback, session, item)

    async def commit_version(
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
        return await in_thread(
            self._repo.commit_version,
            session,
            expected_version=expected_version,
            text=text,
            reason=reason,
            use_feedback=use_feedback,
            restored_from=restored_from,
            discard_pending=discard_pending,
        )
