"""Running one benchmark: items judged concurrently (up to the backend's concurrency), each finished judgment
stored at once, finished ones skipped on a re-run, progress on stderr, and the summary built from the stored rows.

LWE methods follow the paper's protocol instead: one item at a time in file order, the chosen-first (learning)
placement before the swapped (scoring-only) one, so every case is built from the meta-prompt version current at
that point; a run that judged every item refines a last partial feedback batch (Algorithm 1, "or t = T").
"""

from __future__ import annotations

import os

import hashlib
import logging
import platform
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from judge_mcp.runtime.app import App
from judge_mcp.bench import batching, fitting, lwe_labels, metrics, uncertainty
from judge_mcp.bench.data import Item, dataset_name, load_items
from judge_mcp.bench.media import images_problem
from judge_mcp.bench.methods import STRING_PROMPT_ONLY, Method, Options, method_key, repeat_suffix
from judge_mcp.bench.published import METHODS
from judge_mcp.bench.published import with_published
from judge_mcp.bench.progress import Progress
from judge_mcp.bench.stored_runs import Results, methods_fingerprint, run_totals
from judge_mcp.methods import lwe
from judge_mcp.storage.lwe_sessions import LweRepository
from judge_mcp.calls.fanout import first_error
from judge_mcp.calls.context import CallContext

log = logging.getLogger("judge_mcp.bench")
MAX_CONSECUTIVE_ERRORS = 12  # stop a run whose backend keeps failing (a re-run resumes it)
LWE_METHODS = ("lwe", "selective-lwe")


class BenchError(Exception):
    """A benchmark that cannot run as asked (wrong dataset kind for the method, and the like)."""


# ---- the run -------------------------------------------------------------------------------------------------------
@dataclass
class RunSpec:
    dataset: Path
    method: str
    limit: int | None = None
    sample: int | None = None  # N items spread evenly over the file instead of the first N
    backend: str | None = None  # a backend name known to the App's settings (None: the environment's)
    options: Options = field(default_factory=Options)
    concurrency: int | None = None  # items in flight (None: the backend's concurrency)
    batch_poll_s: float | None = None  # a batch = true backend's batches are polled this often (None: batching's default)
    max_dataset_bytes: int | None = None  # the largest dataset file read (None: data.MAX_DATASET_BYTES)
    alpaca_gamed: Path | None = None  # alpaca-eval: AlpacaEval's df_gamed.csv, for its length_controlled_v1 GLM


def backend_key(app: App, backend_name: str | None) -> tuple[str, str, str]:
    """(key, display name, model id): the key is the model id plus a short hash of the backend's identity (kind,
    endpoint, model file), so runs against different servers or files never share results."""
    backend = app.backend(backend_name)
    identity = backend.identity()  # resolves a local model's file (and so its model id) without loading it
    if identity is None:
        raise BenchError(f"backend '{backend.name}' is the MCP client's own model (kind \"sampling\"), which only an MCP tool call "
                         "can ask; bench a configured backend instead")
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:8]
    return f"{backend.model_id}@{digest}", backend.name, backend.model_id


def panel_key(app: App, names: tuple[str, ...]) -> tuple[str, str, str]:
    """backend_key for a panel: every member's key, in the order given (a panel of other members or order is
    another run)."""
    keys = [backend_key(app, name) for name in names]
    digest = hashlib.sha256("|".join(k for k, _, _ in keys).encode("utf-8")).hexdigest()[:8]
    return f"panel[{'+'.join(n for _, n, _ in keys)}]@{digest}", "+".join(n for _, n, _ in keys), "panel: " + ", ".join(m for _, _, m in keys)


def session_name(dataset: str, method: str, backend_key_: str) -> str:
    """The LWE session a run learns in, named after the run ([A-Za-z0-9_.-], at most 64 characters)."""
    digest = hashlib.sha256(f"{dataset}|{method}|{backend_key_}".encode()).hexdigest()[:8]
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"bench-{dataset}-{method}").strip("-")
    return f"{base[: 64 - 9]}-{digest}"


def check_method(method: Method, items: list[Item], dataset: str) -> None:
    problem = images_problem(method.name, items, dataset)
    if problem is not None:
        raise BenchError(problem)
    kind = items[0].kind
    if method.name in STRING_PROMPT_ONLY and any(it.has_messages for it in items):
        raise BenchError(
            f"method {method.name!r} rates answers to a string prompt, but {dataset} holds conversations or trajectories "
            f"(methods for them: {', '.join(m for m, spec in METHODS.items() if kind in spec.kinds and m not in STRING_PROMPT_ONLY)})"
        )
    if kind not in method.kinds:
        raise BenchError(
            f"method {method.name!r} judges {' or '.join(method.kinds)} data, but {dataset} is {kind} "
            f"(methods for {kind} data: {', '.join(m for m, spec in METHODS.items() if kind in spec.kinds)})"
        )


async def run(app: App, spec: RunSpec, *, progress_stream: TextIO | None = None, quiet: bool = False) -> dict[str, Any]:
    """CallContext every unfinished (item, placement) of the run and return the summary of all its stored results."""
    if spec.method not in METHODS:
        raise BenchError(f"unknown method {spec.method!r}; choose one of {', '.join(METHODS)}")
    notes = fitting.cap_bundled_model(app, spec.options.panel or (spec.backend,))  # before any backend is built
    bench = _Run(app, spec, progress_stream)
    crowded = None if bench.sequential else fitting.local_server_warning(app, bench.backend_names(), spec.concurrency)
    for note in [*notes, crowded]:
        if note:
            bench.warn(note)
    bench.skip_degenerate()
    async with batching.attached(app, bench.backend_names(), spec.batch_poll_s, None if quiet else bench.stream) as pools:
        bench.batched = bool(pools)
        if pools and bench.sequential:
            bench.warn(batching.SEQUENTIAL_NOTE)
        await bench.judge_all(quiet)
        summary = await bench.summary()
        if pools:
            summary["batch"] = batching.summary_of(pools, bench.results.rows({it.id for it in bench.items}))
    return summary


class _Run:
    """One invocation of a run: what it judges (fixed at the start), the judging, and the summary."""

    def __init__(self, app: App, spec: RunSpec, progress_stream: TextIO | None) -> None:
        self.app, self.spec, self.stream = app, spec, progress_stream or sys.stderr
        self.method = METHODS[spec.method]
        self.items = load_items(spec.dataset, spec.limit, spec.sample, image_dirs=app.settings.image_dirs, max_bytes=spec.max_dataset_bytes)
        self.dataset = dataset_name(spec.dataset)
        check_method(self.method, self.items, self.dataset)
        panel = spec.options.panel
        key, backend_name, model = panel_key(app, panel) if panel else backend_key(app, spec.backend)
        self.mkey = method_key(self.method.name, spec.options) + repeat_suffix(spec.options)
        self.sequential = self.method.name in LWE_METHODS
        self.options = spec.options
        if self.sequential:
            self.options = Options(**{**asdict(self.options), "session": session_name(self.dataset, self.mkey, key)})
        self.results = Results(app.store, self.dataset, self.mkey, key)
        self.fingerprint = methods_fingerprint()
        self.started_with = self.results.start(
            backend_name=backend_name, model=model, dataset_path=str(spec.dataset), kind=self.items[0].kind,
            options=asdict(self.options), fingerprint=self.fingerprint,
        )
        self.placements = self.method.placements()
        self.finished = self.results.finished()
        self.warnings: list[str] = []
        self.forget_changed_items()
        if self.started_with is not None and self.started_with != self.fingerprint and self.finished:
            self.warn(
                f"this run's {len(self.finished)} stored judgment(s) were made by another version of the prompts or judging "
                f"code (fingerprint {self.started_with}, now {self.fingerprint}); they are reused as stored: use a new --db "
                "to measure the current version"
            )
        self.judged = 0
        self.batched = False  # a batch = true backend judges: every item in flight at once (each call waits for its batch)
        self.consecutive_errors = 0
        self.last_cause = ""  # the last failure's cause: a timeout's is told to raise the setting, not to re-run
        self.stop = anyio.Event()
        self.bar: Progress | None = None
        self.started = self.last_mark = time.perf_counter()  # wall time is stored as items finish (a killed run keeps it)

    def forget_changed_items(self) -> None:
        """Items whose line in the file changed since they were judged (another prompt, response or gold label, or
        another file of the same name) are judged again: their stored judgments no longer describe them. Rows stored
        before digests were kept are reused as they are."""
        digests = {it.id: it.digest for it in self.items}
        changed = sorted({
            row["item_id"] for row in self.results.rows(set(digests))
            if row["status"] == "done" and (row["record"] or {}).get("item_digest") not in (None, digests[row["item_id"]])
        })
        if not changed:
            return
        self.finished -= {(item_id, p) for item_id in changed for p in self.placements}
        shown = ", ".join(changed[:5]) + (", ..." if len(changed) > 5 else "")
        self.warn(f"{len(changed)} item(s) of {self.spec.dataset} changed since this run judged them ({shown}); they are judged again")

    def warn(self, text: str) -> None:
        """A warning for the summary, printed at once."""
        self.warnings.append(text)
        print(f"judge-mcp bench: warning: {text}", file=self.stream)

    def skip_degenerate(self) -> None:
        for item in self.items:
            if item.degenerate and (item.id, "single") not in self.finished:
                self.results.put(item.id, "single", item.seq, item.category, "skipped", error="degenerate: identical or empty responses")

    def backend_names(self) -> tuple[str | None, ...]:
        return self.spec.options.panel or (self.spec.backend,)

    def in_flight(self) -> int:
        """Items judged at once: one for LWE (file order), else --concurrency, every item with a batch backend, else
        the backend's concurrency (panel: the smallest)."""
        if self.sequential:
            return 1
        if self.spec.concurrency or self.batched:
            return self.spec.concurrency or len(self.items)
        return min(self.app.backend(n).concurrency for n in self.backend_names())

    async def judge_placement(self, item: Item, placement: str) -> tuple[bool, bool | None]:
        """(ok, correct) for one placement; failures are stored as error rows (retried on the next run)."""
        try:
            record = await self.method.judge(self.app, item, placement, self.options, self.spec.backend)
        except Exception as exc:  # a backend failure, a context overflow, bad input: keep the run going
            cause = _cause(exc)
            log.warning("%s %s %s: %s", self.mkey, item.id, placement, cause)
            hint = fitting.connection_warning(cause, self.spec.backend)
            if hint and not any(w.startswith(hint[:40]) for w in self.warnings):  # once a run
                self.warn(hint)
            self.results.put(item.id, placement, item.seq, item.category, "error", error=cause)
            self.last_cause = cause
            self.consecutive_errors += 1
            if self.consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
                self.stop.set()
            return False, None
        self.consecutive_errors = 0
        if "names" in record or (item.kind == "pairwise" and "predicted" in record):
            record["longer"] = item.longer  # a verdict on a pair (or one picking of its two responses): which was the longer
        if "names" in record and item.generators:  # the models that wrote chosen and rejected, and their lengths (published.pair_lc)
            record.update(models=list(item.generators), lengths=list(item.lengths))
        record["item_digest"] = item.digest
        self.results.put(item.id, placement, item.seq, item.category, "done", record=record)
        return True, record["correct"]

    async def judge_item(self, item: Item) -> None:
        outcome: dict[str, tuple[bool, bool | None]] = {}
        todo = [p for p in self.placements if (item.id, p) not in self.finished]

        async def one(placement: str) -> None:
            outcome[placement] = await self.judge_placement(item, placement)

        if self.sequential:  # LWE: the learning placement first, then the scoring-only one
            for placement in todo:
                await one(placement)
        else:
            async with anyio.create_task_group() as tg:
                for placement in todo:
                    tg.start_soon(one, placement)
        self.judged += 1
        now = time.perf_counter()
        self.results.add_time(now - self.last_mark, 1)
        self.last_mark = now
        if self.bar is not None:
            failed = any(not ok for ok, _ in outcome.values())  # right: every placement judged now is right (pair accuracy)
            self.bar.update(right=bool(outcome) and all(bool(correct) for _, correct in outcome.values()) and not failed, error=failed)

    async def judge_all(self, quiet: bool) -> None:
        todo = [it for it in self.items if not it.degenerate and any((it.id, p) not in self.finished for p in self.placements)]
        self.bar = Progress(len(todo), f"{self.dataset} {self.mkey}", stream=self.stream) if not quiet else None
        queue = iter(todo)

        async def worker() -> None:
            for item in queue:
                if self.stop.is_set():
                    return
                await self.judge_item(item)

        workers = max(1, min(self.in_flight(), len(todo)))
        if self.bar is not None:
            self.bar.begin(workers)
        try:
            async with anyio.create_task_group() as ticking:
                if self.bar is not None:
                    ticking.start_soon(self.bar.tick_while_waiting)
                async with anyio.create_task_group() as tg:
                    for _ in range(workers):
                        tg.start_soon(worker)
                ticking.cancel_scope.cancel()
        finally:
            self.results.add_time(time.perf_counter() - self.last_mark, 0)
        if self.stop.is_set():
            advice = timeout_advice([self.last_cause]) or "fix the backend and run the same command again to resume"
            print(f"bench: stopped after {MAX_CONSECUTIVE_ERRORS} failures in a row (see the errors in the summary); {advice}", file=self.stream)

    async def summary(self) -> dict[str, Any]:
        final_refine = None
        if self.sequential and not self.stop.is_set():
            t0 = time.perf_counter()
            final_refine = await refine_last_batch(
                self.app, self.spec.backend, self.options.session, self.results, self.items, self.placements
            )
            self.results.add_time(time.perf_counter() - t0, 0)  # the run's wall time includes its last refinement
        wall = time.perf_counter() - self.started
        summary = build_summary(self.results, self.items, self.method, self.spec, wall, self.judged)
        summary["run"]["fingerprint"] = self.fingerprint
        summary["run"]["started_with_fingerprint"] = self.started_with
        if final_refine is not None and "lwe" in summary:
            summary["lwe"]["final_refinement"] = final_refine
            if final_refine["versions"]:
                summary["lwe"]["last_meta_prompt_version"] = final_refine["versions"][-1]
        if self.warnings:
            summary["warnings"] = self.warnings
        return summary


async def refine_last_batch(
    app: App, backend: str | None, session: str, results: Results, items: list[Item], placements: tuple[str, ...]
) -> dict[str, Any] | None:
    """Refine the session's partial last batch once every item of the run is judged (a run with errors or gaps
    leaves it buffered for the resumed run). None when not every item is done or nothing was buffered."""
    finished = results.finished()
    if any((it.id, p) not in finished for it in items if not it.degenerate for p in placements):
        return None
    state = LweRepository(app.store).session_row(session)
    if state is None or state["pending"] == 0:
        return None
    judge = CallContext(app.backend(backend), app.cache, app.store)
    refinement = await lwe.refine_pending(judge, app.store, session)
    return {
        "items": state["pending"],
        "versions": refinement.versions,
        "warnings": refinement.warnings,
        "calls": judge.calls,
        "prompt_chars": sum(r.get("prompt_chars", 0) for r in judge.records),
        "completion_chars": sum(r.get("completion_chars", 0) for r in judge.records),
    }


def _cause(exc: BaseException) -> str:
    exc = first_error(exc)
    return f"{type(exc).__name__}: {exc}"[:500]


def run_summary(info: dict[str, Any], method: Method, rows: list[dict[str, Any]], *, items: int | None = None,
                gamed: Path | None = None) -> dict[str, Any]:
    """A run's summary from its `bench_runs` row and its result rows: the one builder behind the terminal, the
    report from a database and the JSON of `judge-mcp bench`."""
    summary = {
        "dataset": info["dataset"],
        "dataset_path": info["dataset_path"],
        "kind": info["kind"],
        "items": len({r["item_id"] for r in rows}) if items is None else items,
        "method": method.name,
        "method_key": info["method"],
        "about": method.about,
        "options": {k: v for k, v in info["options"].items() if k != "session"},
        "backend": info["backend_name"],
        "backend_key": info["backend"],
        "model": info["model"],
        # with a published judge's own figures (AlpacaEval's win rates)
        **with_published(info["method"], rows, metrics.summarise(rows, method.placements(), info["method"]), gamed),
        "run": run_totals(info),
    }
    uncertainty.with_win_rate_ci(uncertainty.without_undefined(summary), rows)
    if isinstance(summary.get("overall"), dict):  # the run's wall time per item, beside each item's own latency
        summary["overall"]["wall_seconds_per_item"] = summary["run"]["wall_seconds_per_judged_item"]
    return summary


def build_summary(results: Results, items: list[Item], method: Method, spec: RunSpec, wall: float, judged: int) -> dict[str, Any]:
    """The summary of this invocation: run_summary plus what only the invocation knows (limit, sample, errors seen,
    its own wall time, the machine)."""
    rows = results.rows({it.id for it in items})
    info = results.run_info()
    assert info is not None, "Results.start() records the run before it is summarised"
    summary = run_summary(info, method, rows, items=len(items), gamed=spec.alpaca_gamed)
    # items of this selection with no stored row at all (a run stopped by failures in a row never reached them) are not
    # finished either: without them the summary and the exit status named only the errored items
    summary["incomplete"] = int(summary.get("incomplete") or 0) + len({it.id for it in items} - {r["item_id"] for r in rows})
    if "lwe" in summary:  # accuracy per block of items (with --labels: LWE learning from the gold labels)
        summary["lwe"].update(lwe_labels.learning_curve(rows, method.placements()))
    summary.update(
        limit=spec.limit,
        sample=spec.sample,
        error_examples=sorted({r["error"] for r in rows if r["status"] == "error" and r.get("error")})[:5],
    )
    summary["run"].update(
        wall_seconds_this_invocation=round(wall, 1),
        judged_this_invocation=judged,
        machine=machine(),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    return summary


def machine() -> dict[str, Any]:
    cores: int | None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": cores, "processor": platform.machine()}


def timeout_advice(examples: list[str]) -> str | None:
    """What to do when items failed by timing out: the same command with the same timeout times out the same way, so
    the advice is the setting to raise (quoted from the error), and only then the re-run. None when none timed out."""
    for example in examples:
        at = example.find("; raise ")
        if at >= 0 and ("timed out" in example or "call's bound" in example):
            what = example[at + 2:].split(" (", 1)[0]  # "raise JUDGE_MCP_TIMEOUT_S above 120"
            return f"they timed out, and the same command times out the same way: {what}, then run it again to judge them"
    if any("timed out" in example for example in examples):
        return ("they timed out, and the same command times out the same way: raise JUDGE_MCP_TIMEOUT_S (or timeout_s in "
                "[backends.NAME]) first, then run it again to judge them")
    return None
