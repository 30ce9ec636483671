"""Synthetic verdicts of every shape the bias telemetry counts (compare_pair trials, lwe_judge's vanilla pair and
meta-path judgment with re-asks in its call records, grade_score_options over 2-5 options, FLIP responses, panels
whose members carry trials, a tool the telemetry does not know, inputs brought, usage with and without values), for
tests that compare the telemetry's counters with a scan of the log and for perf/stats_scale.py. Deterministic for a
seed. `fill` writes many at once: the verdict rows and their telemetry counts in pages, each page one transaction,
with the same facts the write path computes (storage/verdict_facts.py)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from judge_mcp import tenants
from judge_mcp.storage import verdict_facts, verdict_stats
from judge_mcp.storage.engine import Engine, dumps

BACKENDS = (("default", "openai/gpt-x"), ("local", "smollm2-135m"), ("remote", "claude-y"))
RAW = "The answer weighs accuracy, completeness and clarity; " * 2  # a model's raw text in each trial (~110 chars)


@dataclass
class Verdict:
    tool: str
    backend: str
    model: str
    inputs: dict[str, Any]
    output: dict[str, Any]
    usage: dict[str, Any]
    calls: list[dict[str, Any]]

    def args(self) -> tuple[Any, ...]:
        """VerdictLog.log's positional arguments."""
        return self.tool, self.backend, self.model, self.inputs, self.output, self.usage, self.calls


def _side(rng: random.Random) -> str | None:
    return rng.choice(("A", "B", "A", "B", None))


def _usage(rng: random.Random) -> dict[str, Any]:
    usage: dict[str, Any] = {"calls": rng.randint(1, 6), "cached_calls": rng.randint(0, 2), "latency_ms": round(rng.uniform(5, 9000), 3)}
    if rng.random() < 0.1:
        del usage["latency_ms"]
    return usage


def _pair_trials(rng: random.Random) -> list[dict[str, Any]]:
    trials = []
    for order in ("AB", "BA"):
        better = _side(rng)
        trials.append({"order": order, "better": better, "parse_ok": better is not None, "reasked": rng.random() < 0.2, "raw": RAW})
    return trials


def _inputs(rng: random.Random) -> dict[str, Any]:
    inputs: dict[str, Any] = {"prompt": "Q?", "response_a": "a" * rng.randint(1, 40), "response_b": "b" * rng.randint(1, 40)}
    roll = rng.random()
    if roll < 0.15:
        inputs["criteria"] = "be exact"
    elif roll < 0.25:
        inputs["reference"] = "Canberra"
    elif roll < 0.3:
        inputs["response_a_images"] = [{"sha256": "0" * 64, "media_type": "image/png", "bytes": 10}]
    return inputs


def _compare_pair(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    trials = _pair_trials(rng)
    a, b = trials[0]["better"], trials[1]["better"]
    return {"winner": a if a == b else None, "consistent": a == b, "trials": trials}, []


def _lwe(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ab, ba = _side(rng), _side(rng)
    meta = rng.random() < 0.5
    output: dict[str, Any] = {"vanilla": {"ab": ab, "ba": ba}, "path": "meta_prompt" if meta else "vanilla", "eval_prompt": RAW, "judgment": RAW}
    if meta:
        winner = _side(rng)
        output.update(winner=winner, parse_ok=winner is not None, reasked=rng.random() < 0.2)
    else:
        output["winner"] = ab if ab == ba else None
    calls = [{"purpose": f"lwe_judge:vanilla:{order}:reask"} for order in ("AB", "BA") if rng.random() < 0.2]
    return output, [{"purpose": "lwe_judge:vanilla:AB"}, *calls]


def _grade(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    n = rng.randint(2, 5)
    trials = []
    for _ in range(rng.randint(1, 3)):
        order = rng.sample(range(n), n)
        position = rng.choice([*range(n), None])
        trials.append({"order": order, "selected_position": position, "parse_ok": position is not None, "reasked": rng.random() < 0.1, "raw": RAW})
    tied = rng.sample(range(n), rng.choice((1, 1, 2)))
    return {"trials": trials, "tied_indices": tied}, []


def _flip(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    results = [{"parse_ok": rng.random() < 0.9, "reasked": rng.random() < 0.1, "inferred": RAW} for _ in range(rng.randint(1, 4))]
    return {"results": results, "tied_best": rng.sample(range(len(results)), min(len(results), rng.choice((1, 2))))}, []


def _panel(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    members = []
    for backend, model in BACKENDS[:2]:
        trials = _pair_trials(rng)
        members.append({"backend": backend, "model": model, "winner": None, "trials": trials, "usage": _usage(rng)})
    members.append({"backend": "x", "verdict": "A"})  # without trials: adds nothing
    return {"winner": _side(rng), "panel": members, "trials": []}, []


def _other(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"trials": [{"parse_ok": rng.random() < 0.8, "reasked": False}, {"score": 3}]}, []


SHAPES = (("compare_pair", _compare_pair, 40), ("lwe_judge", _lwe, 15), ("grade_score_options", _grade, 15),
          ("infer_instruction_reward", _flip, 15), ("compare_pair", _panel, 10), ("pointwise_score", _other, 5))


def synthetic(rng: random.Random) -> Verdict:
    """One verdict of a random shape."""
    tool, make, _ = rng.choices(SHAPES, weights=[w for _, _, w in SHAPES])[0]
    output, calls = make(rng)
    backend, model = ("panel", "panel/default+local") if "panel" in output else rng.choice(BACKENDS)
    return Verdict(tool, backend, model, _inputs(rng), output, _usage(rng), calls)


COLUMNS = "id, tool, backend, model, inputs, output, usage, calls, created_at, tenant"


def fill(
    store: Engine, count: int, *, seed: int = 0, page: int = 2000, first_id: int = 1, start_at: float | None = None, tenant: str | None = None
) -> None:
    """Write `count` synthetic verdicts, ids from `first_id`, one second apart from `start_at` (default: now minus
    count seconds): their rows (multi-row INSERTs with the ids given) and their telemetry counts, `page` verdicts per
    transaction, as `tenant`'s (None: the current one, tenants.py). A benchmark's way to a large log quickly; the tool path writes one verdict per transaction
    (VerdictLog.log) with the same facts."""
    rng = random.Random(seed)
    tenant = tenant or tenants.current()
    start = time.time() - count if start_at is None else start_at
    for offset in range(0, count, page):
        rows, parts, longer = [], [], {}
        for k in range(offset, min(count, offset + page)):
            v, at = synthetic(rng), start + k
            rows.append((first_id + k, v.tool, v.backend, v.model, dumps(v.inputs), dumps(v.output), dumps(v.usage), dumps(v.calls), at, tenant))
            written = verdict_facts.written_row(*v.args())
            parts.append((first_id + k, at, verdict_facts.contributions(written)))
            longer[first_id + k] = verdict_facts.longer_answer(written["lengths"])
        with store.transaction() as tx:
            for chunk in range(0, len(rows), 100):
                block = rows[chunk:chunk + 100]
                tx.execute(f"INSERT INTO verdicts ({COLUMNS}) VALUES {', '.join(['(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'] * len(block))}",
                           [value for row in block for value in row])
            verdict_stats.add_many(tx, parts, tenant, longer)
    if store.dialect.name == "postgresql":  # the ids were given: move the identity past them for later writes
        store.query("SELECT setval(pg_get_serial_sequence('verdicts', 'id'), (SELECT MAX(id) FROM verdicts))")
