"""`judge-mcp bench --repeats K`: run-to-run variance. The run is judged K times, each a run of its own in the bench
database (METHOD#r1 .. METHOD#rK; with --temperature T, METHOD#rN@tT), every request at the method's temperature
or T and never answered from the call cache nor stored in it (calls/judge.Sampling), so each repeat is a new draw
from the backend, as a user repeating the judgment would get at temperature > 0 or from a non-deterministic server.

Reported (`repeats` in the summary, and one line on the terminal): per item, whether its verdict (the response a
pairwise placement named, or the index a response-wise method picked) changed between runs: `changed_share` of the
items judged in every run; the headline metric (`accuracy`) of each run with its mean and sample stdev, and its 95%
interval over the items and the runs together (`with_runs`); and the calls each run sent (the cost of --repeats is K
times one run's calls). `per_item` holds every run's outcome of each item, so `bench-report --compare` puts the
spread between runs in its paired interval too.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from judge_mcp.stats import intervals

if TYPE_CHECKING:
    from judge_mcp.runtime.app import App
    from judge_mcp.bench.runner import RunSpec

MAX_REPEATS = 20


def add_arguments(bench: argparse.ArgumentParser) -> None:
    """The bench options of this module and LWE's --labels (bench/lwe_labels.py)."""
    bench.add_argument("--labels", action="store_true", help="lwe/selective-lwe: record each item's gold label (LWE learns from it); METHOD+labels")
    bench.add_argument("--repeats", type=int, help=f"judge every item K times (2..{MAX_REPEATS}), never from the call cache, and report the "
                       "share of items whose verdict changed and the stdev of the accuracy; stored as METHOD#r1..METHOD#rK")
    bench.add_argument("--temperature", type=float, help="with --repeats: every request at this temperature, 0..2 (default: the method's)")


def problem(args: argparse.Namespace) -> str | None:
    """The problem with this module's command-line options, or None."""
    if args.labels and args.method not in ("lwe", "selective-lwe"):
        return "--labels applies to lwe and selective-lwe"
    return check(args.repeats, args.temperature)


def check(repeats: int | None, temperature: float | None) -> str | None:
    """The problem with --repeats / --temperature, or None."""
    if repeats is None:
        return "--temperature applies with --repeats" if temperature is not None else None
    if not 2 <= repeats <= MAX_REPEATS:
        return f"--repeats is a whole number from 2 to {MAX_REPEATS}"
    if temperature is not None and not 0.0 <= temperature <= 2.0:
        return "--temperature is a number from 0 to 2"
    return None


async def from_args(app: App, spec: RunSpec, args: argparse.Namespace) -> dict[str, Any]:
    return await run_repeats(app, spec, args.repeats, args.temperature, quiet=args.quiet)


async def run_repeats(app: App, spec: RunSpec, repeats: int, temperature: float | None, *, quiet: bool = False) -> dict[str, Any]:
    """Judge the run `repeats` times; the first run's summary with `repeats` (see the module doc) added."""
    # lazy: the harness loads when a bench command runs, not when `serve` builds the parser
    from judge_mcp.bench.stored_runs import run_rows
    from judge_mcp.bench.runner import BenchError, run
    from judge_mcp.calls.context import Sampling

    problem = check(repeats, temperature)
    if problem is not None:
        raise BenchError(problem)
    summaries, rows = [], []
    for n in range(1, repeats + 1):
        options = replace(spec.options, repeat=n, sampling=Sampling(temperature=temperature, fresh=True))
        summary = await run(app, replace(spec, options=options), quiet=quiet)
        summaries.append(summary)
        rows.append(run_rows(app.store, summary["dataset"], summary["method_key"], summary["backend_key"]))
    first = dict(summaries[0])
    first["repeats"] = variance(rows, [s["overall"].get("accuracy") for s in summaries], temperature)
    first["repeats"]["method_keys"] = [s["method_key"] for s in summaries]
    return with_runs(first, summaries)


def with_runs(first: dict[str, Any], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run's summary with every repeat's per-item outcomes (`per_item`: one entry per run, for
    `bench-report --compare`) and `repeats.accuracy.ci`: the 95% interval of the accuracy over the items and the runs
    together (stats/intervals.nested_bootstrap: each resampled item draws one of its runs), so the spread between
    runs is in the interval."""
    per_run = [s.get("per_item") or {} for s in summaries]
    merged = {item: [entry for run in per_run for entry in run.get(item, [])] for item in per_run[0]}
    first["per_item"] = merged
    # the accuracy (mean of the orders, index 5; the first order's, index 0, in runs stored before it)
    rights = [[float(e[5] if len(e) > 5 else e[0]) for e in entries if (e[5] if len(e) > 5 else e[0]) is not None]
              for entries in merged.values()]
    rights = [r for r in rights if r]
    interval = intervals.nested_bootstrap(rights) if len(rights) >= intervals.MIN_BOOTSTRAP else None
    first["repeats"]["accuracy"]["ci"] = list(interval) if interval else intervals.too_few(len(rights)) if rights else None
    return first


def verdicts(rows: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Each done item's verdicts, one per placement in placement order: the response named, or the index picked."""
    by_item: dict[str, list[tuple[str, Any]]] = {}
    for row in rows:
        record = row.get("record")
        if row["status"] == "done" and isinstance(record, dict):
            by_item.setdefault(row["item_id"], []).append((row["placement"], record.get("names", record.get("predicted"))))
    return {item: tuple(v for _, v in sorted(found, key=lambda pv: pv[0])) for item, found in by_item.items()}


def variance(runs: list[list[dict[str, Any]]], accuracies: list[float | None], temperature: float | None) -> dict[str, Any]:
    per_run = [verdicts(rows) for rows in runs]
    common = set.intersection(*(set(v) for v in per_run)) if per_run else set()
    changed = sum(len({run[item] for run in per_run}) > 1 for item in common)
    values = [a for a in accuracies if a is not None]
    calls = [sum(int((r.get("record") or {}).get("calls", 0)) for r in rows if r["status"] == "done") for rows in runs]
    return {
        "k": len(runs),
        "temperature": temperature,
        "items": len(common),
        "changed_items": changed,
        "changed_share": changed / len(common) if common else None,
        "accuracy": {"values": accuracies, "mean": statistics.fmean(values) if values else None,
                     "stdev": statistics.stdev(values) if len(values) >= 2 else None},
        "calls_per_run": calls,
    }


def format_line(summary: dict[str, Any]) -> str:
    """The terminal's line for a repeated run ("" for a plain one)."""
    r = summary.get("repeats")
    if not r:
        return ""
    t = "the method's temperature" if r["temperature"] is None else f"temperature {r['temperature']:g}"
    return (f"repeats: {r['k']} runs at {t}, never from the cache: verdict changed on {r['changed_items']} of {r['items']} items "
            f"(share {_shown(r['changed_share'])}); accuracy {[_shown(a) for a in r['accuracy']['values']]} "
            f"(stdev {_shown(r['accuracy']['stdev'])}{_interval(r['accuracy'].get('ci'))}); calls per run {r['calls_per_run']}")


def _shown(value: float | None) -> str:
    """A figure as the terminal shows it (the JSON keeps every digit)."""
    return "-" if value is None else f"{value:.4f}"


def _interval(ci: Any) -> str:
    if isinstance(ci, list):
        return f"; 95% interval over items and runs [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"; {ci}" if isinstance(ci, str) else ""
