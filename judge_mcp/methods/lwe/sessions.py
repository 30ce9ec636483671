"""LWE session administration: show, reset and rollback (each reset or rollback adds a version; history is never
rewritten), and the read-only views behind the resources and the CLI (list, current meta-prompt, history, export).
No model calls."""

from __future__ import annotations

import time
from typing import Any

from judge_mcp.contract.fields import InputError, check_session
from judge_mcp.contract.args import LweSessionArgs
from judge_mcp.methods.lwe.judging import initial_meta_prompt
from judge_mcp.storage.lwe_sessions import LweConflict, LweRepository
from judge_mcp.storage.engine import Engine
from judge_mcp.contract.results import LweSessionResult, MetaPromptVersion


# ---- sessions: show / reset / rollback, resources and the CLI -------------------------------------------------------
def _session_or_error(store: Engine, session: str) -> dict[str, Any]:
    check_session(session)
    repo = LweRepository(store)
    row = repo.session_row(session)
    if row is None:
        known = [s["name"] for s in repo.sessions()]
        hint = f"; known sessions: {', '.join(known)}" if known else "; no session exists yet (lwe_judge creates one)"
        raise InputError(f"unknown session {session!r}{hint}")
    return row


def _version_model(row: dict[str, Any]) -> MetaPromptVersion:
    return MetaPromptVersion(
        version=row["version"],
        parent=row["parent"],
        reason=row["reason"],
        created_at=row["created_at"],
        chars=row["chars"],
        restored_from=row["restored_from"],
        feedback_items=len(row["feedback_ids"]),
    )


def lwe_session(store: Engine, args: LweSessionArgs | None = None, /, **fields: Any) -> LweSessionResult:
    """show the session; reset to the initial meta-prompt (buffered feedback is dropped, kept as discarded); or
    rollback to an earlier version's text (the buffer is kept). Reset and rollback add a version: history is
    never rewritten. `args`, or LweSessionArgs's fields as keywords (checked the same way)."""
    args = LweSessionArgs.of(args, fields)
    session, action, version = args.session, args.action, args.version
    repo = LweRepository(store)
    row = _session_or_error(store, session)
    discarded = 0
    if action == "rollback":
        assert version is not None  # LweSessionArgs requires it
        target = repo.version(session, version)
        if target is None:
            raise InputError(f"session {session!r} has no version {version} (it has 1..{len(repo.versions(session))})")
        if version == row["current_version"]:
            raise InputError(f"version {version} is already the current version of session {session!r}")
        _commit_admin(store, session, text=target["text"], reason="rollback", restored_from=version)
    elif action == "reset":
        discarded = _commit_admin(store, session, text=initial_meta_prompt(), reason="reset", discard=True)
    row = _session_or_error(store, session)
    return LweSessionResult(
        session=session,
        action=action,  # type: ignore[arg-type]
        current_version=row["current_version"],
        meta_prompt=row["text"],
        batch_size=row["batch_size"],
        pending_feedback=row["pending"],
        versions=[_version_model(v) for v in repo.versions(session)],
        discarded_feedback=discarded,
    )


def _commit_admin(store: Engine, session: str, *, text: str, reason: str, restored_from: int | None = None, discard: bool = False) -> int:
    """A reset or rollback version on top of whatever is current (no model call, so a conflict just re-reads)."""
    repo = LweRepository(store)
    for _ in range(10):
        row = repo.session_row(session)
        assert row is not None
        try:
            repo.commit_version(
                session, expected_version=row["current_version"], text=text, reason=reason, restored_from=restored_from, discard_pending=discard
            )
            return row["pending"] if discard else 0
        except LweConflict:
            time.sleep(0.01)
    raise InputError(f"session {session!r} kept changing; try the {reason} again")


def list_sessions(store: Engine) -> list[dict[str, Any]]:
    return [
        {
            "name": s["name"],
            "current_version": s["current_version"],
            "versions": s["versions"],
            "pending_feedback": s["pending"],
            "batch_size": s["batch_size"],
            "updated_at": _iso(s["updated_at"]),
        }
        for s in LweRepository(store).sessions()
    ]


def meta_prompt_text(store: Engine, session: str) -> str:
    return _session_or_error(store, session)["text"]


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def session_history(store: Engine, session: str) -> list[dict[str, Any]]:
    """Every version, oldest first, with time, reason and parent."""
    row = _session_or_error(store, session)
    return [
        {
            "version": v["version"],
            "parent": v["parent"],
            "reason": v["reason"],
            "time": _iso(v["created_at"]),
            "created_at": v["created_at"],
            "chars": v["chars"],
            "restored_from": v["restored_from"],
            "feedback_ids": v["feedback_ids"],
            "current": v["version"] == row["current_version"],
        }
        for v in LweRepository(store).versions(session)
    ]


def export_session(store: Engine, session: str) -> dict[str, Any]:
    """Everything about one session: every version with its text, and every feedback row (pending, used, discarded)."""
    row = _session_or_error(store, session)
    repo = LweRepository(store)
    versions = repo.versions(session, with_text=True)
    for v in versions:
        v["time"] = _iso(v["created_at"])
    feedback = repo.feedback(session)
    for f in feedback:
        f["feedback_parse_ok"] = bool(f["feedback_parse_ok"])
        f["time"] = _iso(f["created_at"])
    return {
        "session": session,
        "current_version": row["current_version"],
        "batch_size": row["batch_size"],
        "pending_feedback": row["pending"],
        "created_at": _iso(row["created_at"]),
        "versions": versions,
        "feedback": feedback,
    }
