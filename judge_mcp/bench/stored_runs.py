"""Where bench results live: two tables of their own in the bench database (default bench.db in the per-user data
directory, config.default_bench_db_path).

The bench database is an ordinary judge-mcp store brought to `BENCH_MIGRATIONS` (bench/schema.py: the
judge's tables and the bench's), so the call cache, the verdict log and the LWE sessions of a run live beside
its results. A result is written as soon as its judgment finishes, so a killed run loses at most the judgments in
flight and a re-run skips every finished one. The tables' SQL is in storage/bench_results.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from judge_mcp.bench.schema import BENCH_MIGRATIONS
from judge_mcp.storage.bench_results import BenchResults
from judge_mcp.storage.engine import Engine


def methods_fingerprint() -> str:
    """A short hash of what decides a judgment besides the model: the prompt files and the judging code
    (judge_mcp/methods). A run resumed after either changed mixes two versions of its method; the harness warns."""
    root = Path(__file__).resolve().parent.parent.parent
    files = sorted((root / "judge_mcp" / "prompts").glob("*.txt")) + sorted((root / "judge_mcp" / "methods").glob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def ensure_schema(store: Engine) -> BenchResults:
    """The bench tables of `store`: applies the bench's migrations if the database has not had them (a no-op,
    without a transaction, once it has)."""
    store.migrate(BENCH_MIGRATIONS)
    return BenchResults(store)


class Results:
    """The results of one run (dataset, method, backend) inside a bench store."""

    def __init__(self, store: Engine, dataset: str, method: str, backend: str):
        self.store = store
        self.key = (dataset, method, backend)
        self.table = ensure_schema(store)

    def finished(self) -> set[tuple[str, str]]:
        """(item_id, placement) pairs that need no more work: done, or skipped as degenerate."""
        return self.table.finished(self.key)

    def put(self, item_id: str, placement: str, seq: int, category: str, status: str, record: dict[str, Any] | None = None, error: str | None = None) -> None:
        self.table.put(self.key, item_id, placement, seq, category, status, record, error)

    def rows(self, item_ids: set[str] | None = None) -> list[dict[str, Any]]:
        return self.table.rows(self.key, item_ids)

    def start(self, *, backend_name: str, model: str, dataset_path: str, kind: str, options: dict[str, Any], fingerprint: str | None = None) -> str | None:
        """Record (or update) the run's metadata; returns the methods fingerprint the run was started with (None
        for runs stored before fingerprints were kept)."""
        return self.table.start(
            self.key, backend_name=backend_name, model=model, dataset_path=dataset_path, kind=kind, options=options, fingerprint=fingerprint
        )

    def add_time(self, seconds: float, judged: int) -> None:
        self.table.add_time(self.key, seconds, judged)

    def run_info(self) -> dict[str, Any] | None:
        return self.table.run_info(self.key)


def run_totals(info: dict[str, Any]) -> dict[str, Any]:
    """Wall time and judged items summed over every invocation of a run (its `bench_runs` row)."""
    wall, judged = info["wall_seconds"], info["judged"]
    return {
        "wall_seconds_total": round(wall, 1),
        "judged_total": judged,
        "wall_seconds_per_judged_item": round(wall / judged, 2) if judged else None,
    }


def run_rows(store: Engine, dataset: str, method: str, backend: str, item_ids: set[str] | None = None) -> list[dict[str, Any]]:
    return BenchResults(store).rows((dataset, method, backend), item_ids)


def all_runs(store: Engine) -> list[dict[str, Any]]:
    return ensure_schema(store).runs()
