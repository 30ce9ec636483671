"""judge_stats' time against the verdict log's length: the figures from the counters kept as verdicts are written
(stats.from_store) against the full scan of the log that judge_stats did before them (stats.scan_store), side by
side on one database, at each size.

    .venv/bin/python -m perf.stats_scale [--sizes 1000,100000,1000000] [--postgres] [--repeat 5] [--old-budget-s 120]

The log is filled with synthetic verdicts of every shape (testkit/synthetic_verdicts.py: the verdict rows
and, in the same transactions, the counts the write path computes for them), growing from one size to the next.
At each size it prints the median of --repeat calls of each (the old scan fewer times when slow), their ratio, the
new code's time for a last-N window of 10,000, and whether the two reports are equal; then what keeping the counts
adds to one verdict's write (`VerdictLog.log` against the same row written alone, alternating blocks), and how long
the migration that made the counters takes on an SQLite log written before it (--backfill verdicts). The old scan is skipped where
its time, extrapolated linearly from the previous size, would pass --old-budget-s (said so in the output). SQLite
in a temporary file; with --postgres also PostgreSQL (a server started from the binaries on this machine,
testkit/postgres_server.py).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_mcp.stats import report as stats
from testkit.synthetic_verdicts import fill, synthetic
from judge_mcp.storage.engine import Engine, dumps
from judge_mcp.storage.verdict_log import VerdictLog

BASE_AT = 1.7e9  # the synthetic log's first verdict time (one verdict a second from there)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median wall time of `repeat` calls, in ms, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times), result


def run_engine(name: str, store: Engine, sizes: list[int], repeat: int, budget_s: float) -> None:
    print(f"\n{name}")
    print(f"{'verdicts':>10} {'fill s':>8} {'old scan ms':>12} {'new ms':>8} {'old/new':>9} {'new last=10k ms':>16}  reports equal")
    have, old_ms, old_size = 0, None, None
    for size in sizes:
        started = time.perf_counter()
        fill(store, size - have, seed=size, first_id=have + 1, start_at=BASE_AT + have, page=5000)
        filled_s, have = time.perf_counter() - started, size
        if store.dialect.name == "postgresql":  # the planner's statistics, as autovacuum keeps them on a live log
            store.query("ANALYZE")
        new_ms, new = timed(lambda: stats.from_store(store, 100), repeat)
        wide_ms, _ = timed(lambda: stats.from_store(store, 10_000), repeat)
        assert new.all_time.verdicts == size, (new.all_time.verdicts, size)
        guess_s = None if old_ms is None or old_size is None else old_ms / 1000.0 * size / old_size
        if guess_s is not None and guess_s > budget_s:
            print(f"{size:>10,} {filled_s:>8.1f} {'skipped':>12} {new_ms:>8.2f} {'-':>9} {wide_ms:>16.1f}  -   "
                  f"(old scan skipped: ~{guess_s:.0f} s extrapolated from {old_size:,}, over --old-budget-s {budget_s:g})")
            continue
        old_ms, old = timed(lambda: stats.scan_store(store, 100), repeat if size <= 10_000 else 1)
        old_size = size
        print(f"{size:>10,} {filled_s:>8.1f} {old_ms:>12.1f} {new_ms:>8.2f} {old_ms / new_ms:>8.0f}x {wide_ms:>16.1f}  {old == new}")


def write_cost(store: Engine, rounds: int = 6, block: int = 300) -> None:
    """What keeping the counts adds to a verdict's write: VerdictLog.log (the row and its counts, one transaction)
    against the same row written alone in its own transaction, alternating blocks of `block` verdicts; the median
of each write's time."""
    rng = random.Random(99)
    log = VerdictLog(store)
    sql = "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

    def row_alone(v: Any) -> None:
        with store.transaction() as tx:
            tx.insert(sql, [v.tool, v.backend, v.model, dumps(v.inputs), dumps(v.output), dumps(v.usage), dumps(v.calls), time.time()])

    runs: dict[str, list[float]] = {"row alone": [], "row and counts": []}
    for _ in range(rounds):
        for name, write in (("row alone", row_alone), ("row and counts", lambda v: log.log(*v.args()))):
            for v in [synthetic(rng) for _ in range(block)]:
                started = time.perf_counter()
                write(v)
                runs[name].append((time.perf_counter() - started) * 1000.0)
    alone, counted = (statistics.median(runs[name]) for name in ("row alone", "row and counts"))  # medians: robust to a busy machine's stalls
    print(f"  one verdict's write: the row alone {alone:.3f} ms, the row and its counts {counted:.3f} ms (+{counted - alone:.3f} ms, {counted / alone:.2f}x)")


def backfill(folder: Path, count: int) -> None:
    """How long the migration that made the counters (m010) takes on an SQLite log of `count` verdicts written
    before it: the log is written under the migrations before m010, then reopened with all of them."""
    from judge_mcp.storage.migrations import MIGRATIONS
    from judge_mcp.storage.sqlite import SqliteEngine

    path = folder / "old.db"
    before = [m for m in MIGRATIONS if m.__name__ < "m010"]
    old, rng = SqliteEngine(path, before), random.Random(5)
    sql = "INSERT INTO verdicts (tool, backend, model, inputs, output, usage, calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    for offset in range(0, count, 5000):
        with old.transaction() as tx:
            for k in range(offset, min(count, offset + 5000)):
                v = synthetic(rng)
                tx.execute(sql, [v.tool, v.backend, v.model, dumps(v.inputs), dumps(v.output), dumps(v.usage), dumps(v.calls), BASE_AT + k])
    old.close()
    started = time.perf_counter()
    store = SqliteEngine(path)
    took = time.perf_counter() - started
    try:
        equal = stats.from_store(store, 100) == stats.scan_store(store, 100)
    finally:
        store.close()
    print(f"  backfill (m010) of an SQLite log of {count:,} verdicts: {took:.1f} s; reports equal after it: {equal}")


def describe() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}, load average {load}, {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000,1000000", help="log sizes, ascending (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="calls per figure, the median kept (default: %(default)s)")
    parser.add_argument("--old-budget-s", type=float, default=120.0, help="skip the old scan when it would take longer (default: %(default)s)")
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL (a server started from the local binaries)")
    parser.add_argument("--writes-only", action="store_true", help="only the write cost and the backfill (no log filled)")
    parser.add_argument("--backfill", type=int, default=100_000, help="verdicts in the old log the backfill is timed on; 0: skip (default: %(default)s)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"judge_stats (last=100) by log size: {describe()}")
    with tempfile.TemporaryDirectory(prefix="stats-scale-") as folder:
        from judge_mcp.storage.sqlite import SqliteEngine

        store = SqliteEngine(Path(folder) / "judge.db")
        try:
            if not args.writes_only:
                run_engine("SQLite", store, sizes, args.repeat, args.old_budget_s)
        finally:
            store.close()
        writes = SqliteEngine(Path(folder) / "writes.db")
        try:
            write_cost(writes)
        finally:
            writes.close()
        if args.backfill:
            backfill(Path(folder), args.backfill)
    if args.postgres:
        from testkit.postgres_server import PostgresServer
        from judge_mcp.storage.postgres import PostgresEngine

        server = PostgresServer.start()
        try:
            pg = PostgresEngine(server.create_database("stats_scale"))
            try:
                if not args.writes_only:
                    run_engine("PostgreSQL", pg, sizes, args.repeat, args.old_budget_s)
            finally:
                pg.close()
            pg = PostgresEngine(server.create_database("stats_writes"))
            try:
                write_cost(pg)
            finally:
                pg.close()
        finally:
            server.close()
    print(f"\nend: load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
