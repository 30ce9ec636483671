"""What judge_stats' length bias against labels (agreement.length) costs, on SQLite, side by side on one database:

- the labels' read (agreement.attach: every label joined with its verdict) with the facts-row join that brings each
  verdict's longer answer, against the same read without that join (the query before it), alternating, --repeat
  times each;
- migration m015's backfill (one UPDATE of the pairwise verdicts' facts rows from their stored inputs) against a
  full read of the log in pages (what m012's backfill and the reference scan do), alternating, --repeat times each.

    .venv/bin/python -m perf.label_length [--verdicts 50000] [--labels 10000] [--repeat 3]

The log is synthetic (testkit/synthetic_verdicts.py); its verdicts get ids and the first --labels pairwise ones a
label (half A, half B). Prints medians in ms and their ratios; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from judge_mcp.stats import agreement
from judge_mcp.stats import report as stats
from judge_mcp.storage import label_rows
from judge_mcp.storage.migrations import m015_longer_answers
from judge_mcp.storage.sqlite import SqliteEngine
from testkit.synthetic_verdicts import fill

JOIN = " LEFT JOIN verdict_facts f ON f.verdict_id = v.id AND f.part = 0"


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0] if Path("/proc/loadavg").exists() else "?"


def _page_without_join(self: Any, *, after: str = "", limit: int = 500) -> list[dict[str, Any]]:
    """LabelTable.page as it was before agreement.length: no facts-row join."""
    return self.store.query(
        f"SELECT l.verdict_id, l.label, l.inputs, v.id, v.tool, v.backend, v.model, {label_rows.SHORT_OUTPUT['sqlite']} AS output"
        " FROM labels l JOIN verdicts v ON v.verdict_id = l.verdict_id"
        " WHERE l.verdict_id > ? AND v.tenant = ? ORDER BY l.verdict_id LIMIT ?",
        [after, self.tenant, limit],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=50_000)
    parser.add_argument("--labels", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteEngine(Path(tmp) / "judge.db")
        fill(store, args.verdicts, seed=1, page=5000)
        with store.transaction() as tx:
            tx.execute("UPDATE verdicts SET verdict_id = printf('%032x', id)")
            tx.execute(
                "INSERT INTO labels (verdict_id, tool, label, inputs, created_at, updated_at, tenant)"
                " SELECT verdict_id, tool, CASE WHEN id % 2 = 0 THEN 'A' ELSE 'B' END, 'text', 1, 1, tenant FROM verdicts"
                " WHERE tool IN ('compare_pair', 'lwe_judge') ORDER BY id LIMIT ?",
                [args.labels],
            )
        labelled = store.query("SELECT COUNT(*) AS n FROM labels")[0]["n"]
        report = stats.compute([], 100)
        joined: list[float] = []
        plain: list[float] = []
        backfill: list[float] = []
        scan: list[float] = []
        written = store.query("SELECT verdict_id, part, longer_answer FROM verdict_facts ORDER BY verdict_id, part")
        original = label_rows.LabelTable.page
        for k in range(args.repeat):
            for join in (True, False) if k % 2 == 0 else (False, True):  # alternate which goes first
                label_rows.LabelTable.page = original if join else _page_without_join  # type: ignore[method-assign]
                try:
                    started = time.perf_counter()
                    agreement.attach(report, store)
                    (joined if join else plain).append(time.perf_counter() - started)
                finally:
                    label_rows.LabelTable.page = original  # type: ignore[method-assign]
            with store.transaction() as tx:
                tx.execute("UPDATE verdict_facts SET longer_answer = NULL")
                started = time.perf_counter()
                m015_longer_answers(tx)
                backfill.append(time.perf_counter() - started)
            started = time.perf_counter()
            rows = sum(1 for _ in stats.iter_rows(store, 1000))
            scan.append(time.perf_counter() - started)
        filled = store.query("SELECT COUNT(*) AS n FROM verdict_facts WHERE longer_answer IS NOT NULL")[0]["n"]
        assert store.query("SELECT verdict_id, part, longer_answer FROM verdict_facts ORDER BY verdict_id, part") == written  # backfill = write path
        store.close()

    def ms(times: list[float]) -> float:
        return statistics.median(times) * 1000.0

    print(f"{args.verdicts} verdicts ({rows} read by the scan), {labelled} labels, {filled} facts rows with a longer answer")
    print(f"labels read with the facts join: {ms(joined):.1f} ms; without: {ms(plain):.1f} ms; ratio {ms(joined) / ms(plain):.2f}")
    print(f"m015 backfill: {ms(backfill):.1f} ms; full read of the log in pages: {ms(scan):.1f} ms; ratio {ms(backfill) / ms(scan):.2f}")
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
