"""`judge-mcp bench --labels` for the LWE methods: after the learning (chosen-first) placement's verdict, the item's
gold label is recorded on it (record_label's own code, labels.record), so LWE learns from labels as a user's
record_label calls would make it (methods/lwe/label_feedback.py). The summary's `lwe.learning_curve` gives the
accuracy per block of items in file order: run once with and once without --labels (stored as METHOD+labels) to
compare the curves. On the scripted judges and the embedded model this measures plumbing, not a model's learning.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio.to_thread

from judge_mcp.methods.lwe import label_feedback
from judge_mcp.stats import labels
from judge_mcp.runtime.app import App
from judge_mcp.contract.args import RecordLabelArgs

BLOCKS = 5  # the learning curve's blocks of items (equal shares of the run, in file order)
SETTLE_S = 5.0  # wait at most this long for the verdict's row (written in the background)


async def gold_label(app: App, verdict_id: str | None) -> bool:
    """Record the gold label "A" (the learning placement shows the chosen response first) on the verdict; whether it
    went into the session's feedback buffer (it contradicted the verdict, or the verdict had no winner)."""
    if verdict_id is None:
        return False
    settled = await app.verdict_writes.settle(verdict_id, SETTLE_S)
    result = await anyio.to_thread.run_sync(partial(labels.record, app.store, RecordLabelArgs(verdict_id=verdict_id, label="A"), pending=not settled,
                                                        learners=label_feedback.LEARNERS))
    return result.label_feedback


def learning_curve(rows: list[dict[str, Any]], placements: tuple[str, ...], blocks: int = BLOCKS) -> dict[str, Any]:
    """Accuracy per block of items (every placement judged, in file order), and how many labels became feedback."""
    by_item: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        if row["status"] == "done" and row["record"] is not None:
            by_item.setdefault(row["item_id"], {})[row["placement"]] = row["record"]
    items = [done for done in by_item.values() if all(p in done for p in placements)]
    if not items:
        return {}
    size = -(-len(items) // min(blocks, len(items)))
    curve = []
    for start in range(0, len(items), size):
        block = items[start : start + size]
        right = sum(bool(done[p]["correct"]) for done in block for p in placements)
        curve.append({"items": [start + 1, start + len(block)], "accuracy": right / (len(block) * len(placements))})
    fed = sum(bool(done[placements[0]].get("detail", {}).get("label_feedback")) for done in items)
    return {"learning_curve": curve, "label_feedback": fed}
