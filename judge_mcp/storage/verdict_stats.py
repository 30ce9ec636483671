"""The bias telemetry's aggregates, kept current as verdicts are written (tables made by
migrations.m012_verdict_stats):

- `stats_groups`: one row per group (backend, model, tool, inputs brought) with its all-time counts (`Counts`'
  columns) and `logged`, the verdicts logged under it (a panel member's contribution counts in `verdicts`, not in
  `logged`);
- `verdict_facts`: what each verdict added, one row per part (part 0 the verdict itself, 1.. the panel members with
  trials), keyed by the verdict's id: the last-N window sums the newest rows; part 0 of a pairwise verdict also
  says which answer is longer (`longer_answer`, "A" or "B", NULL for equal lengths; migrations' m015), where
  judge_stats meets the verdict with its label (stats/agreement.py);
- `stats_totals`: `skipped`, the verdicts whose output could not be read (only rows logged before these tables,
  backfilled).

`add` runs inside the transaction that writes the verdict row, so a verdict and its counts are in together or not
at all. Counters are changed by `UPDATE ... SET n = n + ?` and upserts, never read-modify-written, so two
processes (or replicas) writing at once lose no update. `trim` deletes verdicts and their facts and subtracts them
from the counters in one transaction: the all-time figures are always those of the verdicts the log holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_mcp.storage import tenancy as tenants
from judge_mcp.storage.engine import Engine, Tx
from judge_mcp.storage.verdict_facts import COLUMNS, REAL_COLUMNS, Counts, Key

FACT_COLUMNS = COLUMNS[1:]  # a facts row is one verdict of its group: no `verdicts` column
assert COLUMNS[0] == "verdicts"
GROUP_KEY = ("backend", "model", "tool", "inputs")
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)  # SQLite's INSERT ... RETURNING (PostgreSQL has it)
CHUNK = 200  # facts rows per multi-row INSERT (well under both engines' limits on parameters)


def create_tables(tx: Tx) -> None:
    """The three tables and their indexes (IF NOT EXISTS)."""
    def kind(name: str) -> str:
        return tx.dialect.real if name in REAL_COLUMNS else "INTEGER"

    counters = ", ".join(f"{name} {kind(name)} NOT NULL DEFAULT 0" for name in ("logged", *COLUMNS))
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS stats_groups (
            id {tx.dialect.auto_id}, backend TEXT NOT NULL, model TEXT NOT NULL, tool TEXT NOT NULL, inputs TEXT NOT NULL,
            {counters}, UNIQUE (backend, model, tool, inputs))"""
    )
    facts = ", ".join(f"{name} {kind(name)} NOT NULL DEFAULT 0" for name in FACT_COLUMNS)
    clustered = " WITHOUT ROWID" if tx.dialect.name == "sqlite" else ""  # SQLite: rows stored in key order
    tx.execute(
        f"""CREATE TABLE IF NOT EXISTS verdict_facts (
            verdict_id BIGINT NOT NULL, part INTEGER NOT NULL, group_id BIGINT, created_at {tx.dialect.real} NOT NULL,
            {facts}, PRIMARY KEY (verdict_id, part)){clustered}"""
    )
    tx.execute("CREATE INDEX IF NOT EXISTS verdict_facts_created ON verdict_facts(created_at)")
    tx.execute("CREATE TABLE IF NOT EXISTS stats_totals (name TEXT PRIMARY KEY, n INTEGER NOT NULL)")


@dataclass
class WindowCounts:
    """A window of the log: its verdicts, those skipped, its time span, and each group's counts."""

    verdicts: int = 0
    skipped: int = 0
    oldest_at: float | None = None
    newest_at: float | None = None
    groups: dict[Key, Counts] = field(default_factory=dict)


# ---- writes ------------------------------------------------------------------------------------------------------
_NAMES = ("logged", *COLUMNS)


def _upsert(key: Sequence[str]) -> str:
    return (
        f"INSERT INTO stats_groups ({', '.join(key)}, {', '.join(_NAMES)}) VALUES ({', '.join('?' * (len(key) + len(_NAMES)))})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(f'{name} = stats_groups.{name} + excluded.{name}' for name in _NAMES)}"
    )


# Since migrations.m013_tenants a group is also keyed by its tenant and a facts row carries it; `tenant` None writes
# the tables as m012 made them (the migrations carry their own copy of this code: storage/migration_helpers.py).
_UPSERT, _UPSERT_TENANT = _upsert(GROUP_KEY), _upsert(("tenant", *GROUP_KEY))
_FACTS = f"verdict_facts (verdict_id, part, group_id, created_at, {', '.join(FACT_COLUMNS)}"
LONGER = "longer_answer"  # since migrations' m015; written with the tenant
_PG_ADD = (
    f"WITH g AS ({_UPSERT_TENANT} RETURNING id) INSERT INTO {_FACTS}, tenant, {LONGER})"
    f" SELECT ?, ?, g.id, ?, {', '.join('?' * len(FACT_COLUMNS))}, ?, ? FROM g"
)


def _group(tx: Tx, key: Key, counts: Counts, logged: int, tenant: str | None) -> int:
    """Add `counts` (and `logged`) to the group's counters, making its row if new; its id."""
    upsert, params = (_UPSERT, [*key]) if tenant is None else (_UPSERT_TENANT, [tenant, *key])
    if tx.dialect.name == "postgresql" or RETURNING:
        return int(tx.query(upsert + " RETURNING id", [*params, logged, *counts.values()])[0]["id"])
    tx.execute(upsert, [*params, logged, *counts.values()])
    where = "backend = ? AND model = ? AND tool = ? AND inputs = ?" + ("" if tenant is None else " AND tenant = ?")
    rows = tx.query(f"SELECT id FROM stats_groups WHERE {where}", [*key, *([] if tenant is None else [tenant])])
    return int(rows[0]["id"])


def _insert_facts(tx: Tx, rows: Sequence[Sequence[Any]], tenant: str | None, longer: Mapping[int, str | None]) -> None:
    """Facts rows: (verdict_id, part, group_id, created_at, *FACT_COLUMNS), CHUNK per statement (with `tenant`, and
    part 0 with its verdict's longer answer from `longer`)."""
    width = 4 + len(FACT_COLUMNS) + 2 * (tenant is not None)
    one = "(" + ", ".join("?" * width) + ")"
    columns = _FACTS + ("" if tenant is None else f", tenant, {LONGER}") + ")"

    def extra(row: Sequence[Any]) -> tuple[Any, ...]:
        return () if tenant is None else (tenant, longer.get(row[0]) if row[1] == 0 else None)

    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        tx.execute(
            f"INSERT INTO {columns} VALUES {', '.join([one] * len(chunk))}",
            [value for row in chunk for value in (*row, *extra(row))],
        )


def _add_skipped(tx: Tx, n: int) -> None:
    if n:
        tx.execute("INSERT INTO stats_totals (name, n) VALUES ('skipped', ?) ON CONFLICT (name) DO UPDATE SET n = stats_totals.n + excluded.n", [n])


def add(tx: Tx, verdict_id: int, created_at: float, parts: list[tuple[Key, Counts]] | None, tenant: str, longer: str | None = None) -> None:
    """Inside the transaction writing verdict `verdict_id` of `tenant`: its facts rows and its groups' counters (`parts`
    from verdict_facts.contributions; None: a verdict whose output could not be read, counted as skipped); `longer`:
    its longer answer (verdict_facts.longer_answer)."""
    if parts is None or tx.dialect.name != "postgresql":
        add_many(tx, [(verdict_id, created_at, parts)], tenant, {verdict_id: longer})
        return
    # PostgreSQL: one statement (one round trip) per part, its group's upsert feeding its facts row; groups in key order
    for number, (key, counts) in sorted(enumerate(parts), key=lambda item: item[1][0]):
        values = counts.values()
        tx.execute(_PG_ADD, [tenant, *key, int(number == 0), *values, verdict_id, number, created_at, *values[1:], tenant,
                             longer if number == 0 else None])


def add_many(
    tx: Tx, verdicts: Iterable[tuple[int, float, list[tuple[Key, Counts]] | None]], tenant: str | None = None,
    longer: Mapping[int, str | None] | None = None,
) -> None:
    """`add` for several verdicts at once: each group's counters change once (the backfill's pages); `longer`: the
    verdicts' longer answers by id (those not in it: None). `tenant` None: the tables as m012 made them, before
    tenants and longer answers."""
    totals: dict[Key, tuple[Counts | None, int]] = {}
    pending: list[tuple[int, int, Key | None, float, Counts]] = []
    skipped = 0
    for verdict_id, created_at, parts in verdicts:
        if parts is None:
            skipped += 1
            pending.append((verdict_id, 0, None, created_at, Counts()))
            continue
        for number, (key, counts) in enumerate(parts):
            total, logged = totals.get(key, (None, 0))
            totals[key] = (counts if total is None else plus(total, counts), logged + (number == 0))
            pending.append((verdict_id, number, key, created_at, counts))
    ids = {key: _group(tx, key, counts or Counts(), logged, tenant) for key, (counts, logged) in sorted(totals.items())}  # sorted: one lock order
    _insert_facts(tx, [(v, p, None if key is None else ids[key], at, *c.values()[1:]) for v, p, key, at, c in pending], tenant, longer or {})
    _add_skipped(tx, skipped)


def plus(a: Counts, b: Counts) -> Counts:
    """The two counts added."""
    return Counts.of({name: x + y for name, x, y in zip(COLUMNS, a.values(), b.values())})


# ---- retention ---------------------------------------------------------------------------------------------------
_SUMS = ", ".join(f"SUM({name}) AS {name}" for name in FACT_COLUMNS)
_AGG = f"SELECT group_id, COUNT(*) AS verdicts, SUM(CASE WHEN part = 0 THEN 1 ELSE 0 END) AS logged, {_SUMS}"
# PostgreSQL: one statement (one snapshot) deletes the verdicts, then their facts, and sums what it deleted; the
# last row (group_id NULL, `gone` set) counts the verdicts deleted.
_PG_TRIM = (
    "WITH gone AS (DELETE FROM verdicts WHERE created_at < ? RETURNING id),"
    " f AS (DELETE FROM verdict_facts USING gone WHERE verdict_facts.verdict_id = gone.id RETURNING verdict_facts.*)"
    f" {_AGG}, NULL AS gone FROM f GROUP BY group_id"
    f" UNION ALL SELECT NULL, 0, 0, {', '.join('0' for _ in FACT_COLUMNS)}, COUNT(*) FROM gone"
)


def trim(tx: Tx, cutoff: float) -> int:
    """Delete the verdicts logged before `cutoff` with their facts, and take what they added off the counters (the
    caller's transaction); how many verdicts were deleted."""
    if tx.dialect.name == "postgresql":
        rows = tx.query(_PG_TRIM, [cutoff])
        deleted = sum(int(row["gone"]) for row in rows if row["gone"] is not None)
        rows = [row for row in rows if row["gone"] is None]
    else:  # SQLite: the transaction holds the write lock (BEGIN IMMEDIATE), so the three statements see one log
        rows = tx.query(f"{_AGG} FROM verdict_facts WHERE created_at < ? GROUP BY group_id", [cutoff])
        tx.execute("DELETE FROM verdict_facts WHERE created_at < ?", [cutoff])
        deleted = tx.execute("DELETE FROM verdicts WHERE created_at < ?", [cutoff])
    for row in rows:
        if row["group_id"] is None:
            tx.execute("UPDATE stats_totals SET n = n - ? WHERE name = 'skipped'", [int(row["verdicts"])])
            continue
        counts = Counts.of(row)
        tx.execute(
            f"UPDATE stats_groups SET {', '.join(f'{name} = {name} - ?' for name in _NAMES)} WHERE id = ?",
            [int(row["logged"]), *counts.values(), row["group_id"]],
        )
    return deleted


# ---- reads -------------------------------------------------------------------------------------------------------
_GROUP_COLUMNS = ", ".join(f"g.{name}" for name in (*GROUP_KEY, "logged", *COLUMNS))
# One statement, one snapshot: the totals (one row even when no group has verdicts) with every group that has any.
# Parameters: the name of the tenant's skipped total (only the tenant that owns the rows from before tenants has one),
# the tenant four times.
_ALL_TIME = (
    "SELECT t.skipped, t.oldest, t.newest, g.id, " + _GROUP_COLUMNS + " FROM (SELECT"
    " (SELECT n FROM stats_totals WHERE name = ?) AS skipped,"
    " (SELECT MIN(created_at) FROM verdict_facts WHERE tenant = ?) AS oldest,"
    " (SELECT MAX(created_at) FROM verdict_facts WHERE tenant = ?) AS newest) t"
    " LEFT JOIN stats_groups g ON g.verdicts > 0 AND g.tenant = ?"
)
# Parameters: the tenant, the offset, the tenant.
_LAST = (
    "WITH cut AS (SELECT verdict_id FROM verdict_facts WHERE tenant = ? AND part = 0 ORDER BY verdict_id DESC LIMIT 1 OFFSET ?),"
    " w AS (SELECT * FROM verdict_facts WHERE tenant = ? AND verdict_id >= (SELECT verdict_id FROM cut))"
    " SELECT t.n, t.skipped, t.oldest, t.newest, a.*, " + ", ".join(f"g.{name}" for name in GROUP_KEY) + " FROM"
    " (SELECT COUNT(*) AS n, SUM(CASE WHEN group_id IS NULL THEN 1 ELSE 0 END) AS skipped,"
    "  MIN(created_at) AS oldest, MAX(created_at) AS newest FROM w WHERE part = 0) t"
    f" LEFT JOIN ({_AGG} FROM w WHERE group_id IS NOT NULL GROUP BY group_id) a ON TRUE"
    " LEFT JOIN stats_groups g ON g.id = a.group_id"
)


def _key(row: dict[str, Any]) -> Key:
    return (str(row["backend"]), str(row["model"]), str(row["tool"]), str(row["inputs"]))


def all_time(store: Engine, tenant: str | None = None) -> WindowCounts:
    """Every verdict the log holds of `tenant` (None: the call's, tenants.current()): the counters (a read; a few rows
    however long the log)."""
    tenant = tenant or tenants.current()
    skipped = "skipped" if tenant == tenants.legacy(store.dialect.name) else "skipped of no tenant"
    rows = store.query(_ALL_TIME, [skipped, tenant, tenant, tenant])
    window = WindowCounts(skipped=int(rows[0]["skipped"] or 0), oldest_at=rows[0]["oldest"], newest_at=rows[0]["newest"])
    window.groups = {_key(row): Counts.of(row) for row in rows if row["id"] is not None}
    window.verdicts = window.skipped + sum(int(row["logged"]) for row in rows if row["id"] is not None)
    return window


def last(store: Engine, n: int, tenant: str | None = None) -> WindowCounts | None:
    """The newest `n` verdicts of `tenant` (None: the call's), summed from their facts rows (reads about n rows, by an
    index); None when the log holds no more than n verdicts (the window is then the whole log: `all_time`)."""
    tenant = tenant or tenants.current()
    rows = store.query(_LAST, [tenant, n - 1, tenant])
    head = rows[0]
    if not head["n"] or int(head["n"]) < n:
        return None
    window = WindowCounts(verdicts=int(head["n"]), skipped=int(head["skipped"] or 0), oldest_at=head["oldest"], newest_at=head["newest"])
    window.groups = {_key(row): Counts.of(row) for row in rows if row["group_id"] is not None}
    return window


def tenants_logged(store: Engine) -> dict[str, int]:
    """Every tenant's count of verdicts in the log (the counters' `logged`, a few rows), for a reader that found none
    of its own tenant to say whose verdicts the log does hold (`judge-mcp stats --tenant`)."""
    rows = store.query("SELECT tenant, SUM(logged) AS n FROM stats_groups GROUP BY tenant ORDER BY tenant")
    return {str(row["tenant"]): int(row["n"]) for row in rows if row["n"]}
