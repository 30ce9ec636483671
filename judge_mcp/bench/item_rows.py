"""`judge-mcp bench-report --db DB --items FILE`: one row per judged item of every run stored in a bench database,
as JSON Lines (or CSV when FILE ends in .csv), for reading results outside SQLite.

A row: run (dataset, method, backend), item id, category, gold ("chosen": the dataset's better response), each
placement's verdict (the response it named: "chosen"/"rejected", or null when unparsed or a tie), whether each
placement was right, right in every placement, and the parse failures of the item. Rows of items that errored carry
the error and no verdict.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from judge_mcp.bench.metrics import named
from judge_mcp.bench.stored_runs import all_runs, run_rows
from judge_mcp.storage.engine import Engine

FIELDS = ("dataset", "method", "backend", "item_id", "category", "gold", "placements", "verdicts", "right",
          "all_right", "parse_failures", "error")


def item_rows(store: Engine) -> list[dict[str, Any]]:
    """Every stored run's items, one row each, in run and item order."""
    out = []
    for run in all_runs(store):
        key = (run["dataset"], run["method"], run["backend"])
        by_item: dict[str, list[dict[str, Any]]] = {}
        for row in run_rows(store, *key):
            by_item.setdefault(row["item_id"], []).append(row)
        for item_id, rows in by_item.items():
            done = [r for r in rows if r["status"] == "done" and r["record"]]
            errors = [r["error"] for r in rows if r.get("error")]
            records = [r["record"] for r in done]
            out.append({
                "dataset": key[0], "method": key[1], "backend": key[2], "item_id": item_id,
                "category": rows[0].get("category"), "gold": "chosen",
                "placements": [r["placement"] for r in done],
                "verdicts": [named(rec) for rec in records],
                "right": [bool(rec.get("correct")) for rec in records],
                "all_right": bool(records) and all(rec.get("correct") for rec in records),
                "parse_failures": sum(int(rec.get("parse_failures") or 0) for rec in records),
                "error": "; ".join(errors) or None,
            })
    return out


def write_items(path: Path, rows: list[dict[str, Any]]) -> None:
    """JSONL, or CSV when `path` ends in .csv (list fields joined by "|")."""
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "|".join("" if v is None else str(v) for v in row[k]) if isinstance(row[k], list)
                             else ("" if row[k] is None else row[k]) for k in FIELDS})
        text = buf.getvalue()
    else:
        text = "".join(json.dumps(row) + "\n" for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
