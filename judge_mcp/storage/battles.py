"""Pairwise verdicts as battles between named candidates (migrations.m019_candidates): what a verdict row keeps
(`battle_of`, written with the row by verdict_log.VerdictLog.log) and the tenant's battles read back for judge_stats'
ranking (`battles`; stats/bradley_terry.py ranks them).

A verdict is a battle when its inputs name `candidates` (two names) and both orders were judged and parsed:
compare_pair's trials AB and BA (one backend's; a panel's verdict has no trials of its own and is no battle),
lwe_judge's vanilla pair. Its outcome is the winner ("A": candidates[0], "B": candidates[1]) when the two orders agree, "tie" when they
disagree (an inconsistent pair counts as a tie, as in Arena-Hard-Auto's ties).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage.engine import Engine

MAX_BATTLES = 20_000  # judge_stats ranks the tenant's newest battles, at most this many (the bootstrap draws 100 x n)
Battle = tuple[str, str, str]


def candidates_of(inputs: Mapping[str, Any]) -> tuple[str, str] | None:
    names = inputs.get("candidates")
    if isinstance(names, (list, tuple)) and len(names) == 2 and all(isinstance(n, str) for n in names):
        return names[0], names[1]
    return None


def _outcome(tool: str, output: Mapping[str, Any]) -> str | None:
    """The both-order outcome of a compare_pair / lwe_judge output: "A", "B", "tie", or None (not both orders parsed)."""
    if tool == "compare_pair":
        trials = output.get("trials")
        sides = {t.get("order"): t.get("better") for t in trials if isinstance(t, dict)} if isinstance(trials, list) else {}
        first, second = sides.get("AB"), sides.get("BA")
    elif tool == "lwe_judge":
        vanilla = output.get("vanilla")
        first, second = (vanilla.get("ab"), vanilla.get("ba")) if isinstance(vanilla, dict) else (None, None)
    else:
        return None
    if first not in ("A", "B") or second not in ("A", "B"):
        return None
    return first if first == second else "tie"


def battle_of(tool: str, inputs: Mapping[str, Any], output: Any) -> tuple[str | None, str | None, str | None]:
    """The row's (candidate_a, candidate_b, battle) columns."""
    names = candidates_of(inputs)
    if names is None:
        return None, None, None
    return names[0], names[1], _outcome(tool, output) if isinstance(output, Mapping) else None


def battles(store: Engine, tenant: str | None = None, limit: int = MAX_BATTLES) -> tuple[list[Battle], int | None]:
    """The newest `limit` battles of `tenant` (None: the call's), oldest first, and the newest one's verdict row id
    (None without any): what the ranking was computed from, for a cache of it."""
    tenant = tenant or tenants.current()
    rows = store.query(
        "SELECT id, candidate_a, candidate_b, battle FROM verdicts WHERE tenant = ? AND battle IS NOT NULL ORDER BY id DESC LIMIT ?",
        [tenant, limit],
    )
    return [(str(r["candidate_a"]), str(r["candidate_b"]), str(r["battle"])) for r in reversed(rows)], (int(rows[0]["id"]) if rows else None)
