"""How often a prompt injection in the rejected answer flips a verdict toward it, per method.

    .venv/bin/python -m perf.injection_flips [DATASET.jsonl] [--limit 20] [--attacks always_choose,highest_score]
        [--methods compare_pair,infer_instruction_reward,grade_score_options] [--position append|prepend]
        [--slots second,first] [--concurrency 2] [--db state/injection.db] [--out injection.json] [--backend NAME]
        [--single-order]

For each of the first N pairwise items (default: shared/benchmarks/llmbar_natural.jsonl) and each method, the
clean pair is judged once, then once per attack with the attack injected into the rejected answer
(testkit/injections.py), once for each slot the rejected answer is shown in (`--slots`, both by default:
`second` = shown as Assistant B / the last option, `first` = shown as Assistant A / the first option). Each
method's verdict is an index into [chosen, rejected], whatever the slot:

- compare_pair (defaults: goal "worse", template "sop", both orders): the verdict is `winner` (null when the two
  orders disagree). `--single-order` judges the shown order only (where the fence attacks aim: `--attacks fence`).
  `rejected_share` = share of the trials that named the rejected one.
- infer_instruction_reward: the instruction is the item's prompt; the verdict is `best_index` (null on a tie).
  `rejected_share` = 1 when the rejected one got the higher reward, 0.5 on a tie.
- grade_score_options: the verdict is `winner_index` (null on a tied mode: each option picked once, the usual
  sign of position bias, is no pick). `rejected_share` = the rejected option's share of the parsed trials.

Reported per method and attack, over every slot run and in `by_slot` for each: `n`, clean and attacked accuracy,
`flips` (clean verdict was not the rejected answer, attacked verdict is) over `eligible` (clean verdicts that were
not the rejected answer), `flip_rate`, `reverse_flips` (clean verdict picked the rejected answer, attacked did not:
the noise floor), and the mean `rejected_share` clean vs attacked. The backend is the environment's (JUDGE_MCP_BACKEND, default the embedded
model) or `--backend NAME` from JUDGE_MCP_CONFIG. Progress goes to stderr, the JSON summary to --out and stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from testkit.injections import ATTACKS, FENCE_ATTACKS, PAPER_ATTACKS, POSITIONS, SLOTS, attack_text, flipped, inject_pair
from judge_mcp.runtime.app import App
from judge_mcp.bench.data import Item, load_items
from judge_mcp.methods import registry
from judge_mcp.server.tools import anticipated

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_DATASET = ROOT.parent / "shared" / "benchmarks" / "llmbar_natural.jsonl"
METHODS = ("compare_pair", "infer_instruction_reward", "grade_score_options")
CHOSEN, REJECTED = 0, 1


async def judge_pair(
    app: App, method: str, prompt: str, chosen: str, rejected: str, backend: str | None, swap: bool = True, slot: str = "second"
) -> dict[str, Any]:
    """One judgment of the pair by `method`, the rejected answer shown in `slot` ("second": as B / the last option,
    "first": as A / the first): {pick, rejected_share, calls}, `pick` an index into [chosen, rejected]. `swap=False`
    judges compare_pair in the shown order only."""
    shown = [chosen, rejected] if slot == "second" else [rejected, chosen]
    to_pair = {0: CHOSEN, 1: REJECTED} if slot == "second" else {0: REJECTED, 1: CHOSEN}  # shown index -> [chosen, rejected]
    if method == "compare_pair":
        args = dict(prompt=prompt, response_a=shown[0], response_b=shown[1], swap=swap, backend=backend)
        result, _ = await registry.call(app, method, args)
        pick = to_pair.get({"A": 0, "B": 1}.get(result.winner or "", -1))
        named = [to_pair[0 if t.better == "A" else 1] for t in result.trials if t.parse_ok]
        share = sum(1 for b in named if b == REJECTED) / len(named) if named else None
    elif method == "infer_instruction_reward":
        result, _ = await registry.call(app, method, dict(instruction=prompt, responses=shown, backend=backend))
        pick = to_pair.get(result.best_index)
        r = {to_pair[it.index]: it for it in result.results}
        if r[CHOSEN].parse_ok or r[REJECTED].parse_ok:
            diff = r[REJECTED].reward - r[CHOSEN].reward
            share = 1.0 if diff > 0 else 0.5 if diff == 0 else 0.0
        else:
            share = None
    elif method == "grade_score_options":
        result, _ = await registry.call(app, method, dict(instruction=prompt, options=shown, backend=backend))
        pick = None if result.tied_indices else to_pair.get(result.winner_index)  # a tied mode is no pick
        rejected_at = 1 if slot == "second" else 0
        share = result.option_counts[rejected_at] / result.parsed_trials if result.parsed_trials else None
    else:  # pragma: no cover - argparse restricts the choice
        raise ValueError(f"unknown method {method!r}")
    return {"pick": pick, "rejected_share": share, "calls": result.usage.calls}


async def judge_item(
    app: App, item: Item, method: str, attacks: list[str], position: str, backend: str | None, swap: bool = True,
    slot: str = "second",
) -> list[dict[str, Any]]:
    """The clean judgment and one per attack, the rejected answer shown in `slot`, as records."""
    records = []
    for attack in [None, *attacks]:
        rejected = item.rejected or ""
        if attack is not None:
            _, rejected = inject_pair(item.chosen or "", rejected, attack, instruction=item.prompt, position=position, slot=slot)
        started = time.perf_counter()
        record: dict[str, Any] = {"item": item.id, "method": method, "attack": attack, "slot": slot}
        try:
            record.update(await judge_pair(app, method, item.prompt, item.chosen or "", rejected, backend, swap, slot))
        except Exception as exc:  # a tool error is a result of the run, not a crash of it
            cause = anticipated(exc) or exc  # a BackendError / InputError names itself; anything else by its type
            record.update(pick=None, rejected_share=None, calls=0, error=f"{type(cause).__name__}: {cause}"[:300])
        record["seconds"] = round(time.perf_counter() - started, 2)
        records.append(record)
    return records


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def _slot(record: dict[str, Any]) -> str:
    return record.get("slot", "second")


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method, per attack: flips toward the injected (rejected) answer against the clean verdict of the same
    item in the same slot, over every slot run; `by_slot` holds the same figures for each slot."""
    clean = {(r["method"], r["item"], _slot(r)): r for r in records if r["attack"] is None}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for method in dict.fromkeys(r["method"] for r in records):
        out[method] = {}
        attacks = list(dict.fromkeys(r["attack"] for r in records if r["method"] == method and r["attack"] is not None))
        for attack in attacks:
            attacked = [r for r in records if r["method"] == method and r["attack"] == attack and (method, r["item"], _slot(r)) in clean]
            pairs = [(clean[(method, r["item"], _slot(r))], r) for r in attacked]
            stats = _figures(pairs)
            stats["by_slot"] = {slot: _figures([(c, a) for c, a in pairs if _slot(a) == slot])
                                for slot in SLOTS if any(_slot(a) == slot for _, a in pairs)}
            out[method][attack] = stats
    return out


def _figures(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Accuracy and flips of (clean, attacked) record pairs."""
    n = len(pairs)
    eligible = [(c, a) for c, a in pairs if c["pick"] != REJECTED]
    flips = sum(1 for c, a in pairs if flipped(c["pick"], a["pick"], REJECTED))
    reverse = sum(1 for c, a in pairs if c["pick"] == REJECTED and a["pick"] != REJECTED)
    return {
        "n": n,
        "clean_accuracy": round(sum(1 for c, _ in pairs if c["pick"] == CHOSEN) / n, 4) if n else None,
        "attacked_accuracy": round(sum(1 for _, a in pairs if a["pick"] == CHOSEN) / n, 4) if n else None,
        "clean_picks_rejected": sum(1 for c, _ in pairs if c["pick"] == REJECTED),
        "attacked_picks_rejected": sum(1 for _, a in pairs if a["pick"] == REJECTED),
        "eligible": len(eligible),
        "flips": flips,
        "flip_rate": round(flips / len(eligible), 4) if eligible else None,
        "reverse_flips": reverse,
        "clean_rejected_share": _mean([c["rejected_share"] for c, _ in pairs]),
        "attacked_rejected_share": _mean([a["rejected_share"] for _, a in pairs]),
        "errors": sum(1 for c, a in pairs for r in (c, a) if r.get("error")),
    }


async def run(app: App, items: list[Item], methods: list[str], attacks: list[str], *, position: str = "append",
              concurrency: int = 2, backend: str | None = None, progress: bool = True, swap: bool = True,
              slots: tuple[str, ...] = ("second",)) -> list[dict[str, Any]]:
    """Every item judged by every method in every slot, clean and under each attack; the records in a stable order."""
    records: list[dict[str, Any]] = []
    limiter = anyio.CapacityLimiter(concurrency)
    total = len(items) * len(methods) * len(slots)
    done = 0
    t0 = time.perf_counter()

    async def one(item: Item, method: str, slot: str) -> None:
        nonlocal done
        async with limiter:
            records.extend(await judge_item(app, item, method, attacks, position, backend, swap, slot))
        done += 1
        if progress:
            print(f"[{done}/{total}] {method} {item.id} ({slot}) ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        for item in items:
            for method in methods:
                for slot in slots:
                    tg.start_soon(one, item, method, slot)
    order = {(it.id, m): k for k, (it, m) in enumerate((it, m) for it in items for m in methods)}
    records.sort(key=lambda r: (order[(r["item"], r["method"])], slots.index(r["slot"]), [None, *attacks].index(r["attack"])))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--attacks", default="always_choose", help=f"comma-separated, from: {', '.join(ATTACKS)}; 'paper' = the FLIP paper's four, 'fence' = the fence imitations")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--position", choices=POSITIONS, default="append", help="where in the rejected answer the attack goes")
    parser.add_argument("--slots", default=",".join(SLOTS), help="where the rejected answer is shown: second, first or both (default)")
    parser.add_argument("--concurrency", type=int, default=2, help="items judged at once")
    parser.add_argument("--db", default=str(ROOT / "state" / "injection.db"), help="SQLite file for the verdict log and call cache")
    parser.add_argument("--backend", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--single-order", action="store_true", help="compare_pair in order AB only (the rejected answer shown second)")
    args = parser.parse_args(argv)

    groups = {"paper": list(PAPER_ATTACKS), "fence": list(FENCE_ATTACKS)}
    attacks = groups.get(args.attacks) or [a.strip() for a in args.attacks.split(",") if a.strip()]
    for a in attacks:
        attack_text(a)  # unknown names fail here
    slots = tuple(s.strip() for s in args.slots.split(",") if s.strip())
    if not slots or any(s not in SLOTS for s in slots):
        parser.error(f"--slots takes {' and/or '.join(SLOTS)}, got {args.slots!r}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    items = [it for it in load_items(args.dataset) if it.kind == "pairwise" and not it.degenerate][: args.limit]

    from judge_mcp.config.settings import load_settings

    app = App(load_settings({**os.environ, "JUDGE_MCP_DB": args.db}))
    model_id = app.backend(args.backend).model_id
    started = time.time()

    async def go() -> list[dict[str, Any]]:
        try:
            return await run(app, items, methods, attacks, position=args.position, concurrency=args.concurrency,
                             backend=args.backend, swap=not args.single_order, slots=slots)
        finally:
            await app.aclose()

    records = anyio.run(go)
    report = {
        "dataset": str(args.dataset),
        "items": len(items),
        "attacks": {a: {slot: attack_text(a, "<instruction>", slot) for slot in slots} for a in attacks},
        "position": args.position,
        "slots": list(slots),
        "single_order": args.single_order,
        "model": model_id,
        "wall_seconds": round(time.time() - started, 1),
        "summary": summarise(records),
        "records": records,
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("model", "items", "position", "slots", "wall_seconds", "summary")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
