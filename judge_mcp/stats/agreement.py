"""Agreement of the judges with human labels (record_label), per judge_stats group (backend, model, tool, inputs):
pure figures over (verdict answer, label, probability) triples, and `attach`, which reads the labels joined with
their verdicts (a page at a time: as many rows as labels) and puts the figures on a report's groups.

- accuracy: labelled verdicts whose answer is the label (a pair without a winner answers "tie"; a grade or FLIP
  verdict naming no single option or response answers "none", which no label is);
- kappa: Cohen's kappa between the verdicts' answers and the labels over the categories they use,
  (p_o - p_e) / (1 - p_e) with p_e the chance agreement of the two marginals; null when p_e is 1 (one category only);
- calibration: ECE and Brier score of `p_better` against A/B labels, computed by stats/calibration.py's
  `probability_figures` (the bench's definitions: confidence max(p, 1 - p), ECE_BINS equal-width bins); a "tie"
  label is left out.
A group with no label has `labelled` 0 and null figures, never 0. A panel verdict counts under the backend and model
it was logged with, and each member that judged (status ok) under its own, as judge_stats counts them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from judge_mcp.stats import labels
from judge_mcp.stats.calibration import probability_figures
from judge_mcp.contract.results import Agreement, LabelCalibration, Rate, StatsReport, Window
from judge_mcp.storage.label_rows import LabelTable

if TYPE_CHECKING:
    from judge_mcp.storage.engine import Engine

PAGE = 500
Key = tuple[str, str, str, str]  # backend, model, tool, inputs


def kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (rater 1, rater 2) category pairs; None when there are none or chance agreement is total."""
    n = len(pairs)
    if not n:
        return None
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    observed = sum(a == b for a, b in pairs)
    chance = sum(first[c] * second[c] for c in first)  # p_e * n^2
    if chance == n * n:
        return None
    return round((observed * n - chance) / (n * n - chance), 4)


class Tally:
    """One group's labelled verdicts."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []  # (verdict's answer, label)
        self.p_label: list[float | None] = []  # per A/B label: p_better of the labelled answer, None without one

    def add(self, answer: str, label: str, p: float | None, ab: bool) -> None:
        self.pairs.append((answer, label))
        if ab:
            self.p_label.append(p)

    def figures(self) -> Agreement:
        n, right = len(self.pairs), sum(a == b for a, b in self.pairs)
        probs = probability_figures(self.p_label)
        return Agreement(
            labelled=n,
            accuracy=Rate(rate=round(right / n, 4) if n else None, count=right, of=n),
            kappa=kappa(self.pairs),
            calibration=LabelCalibration(n=probs["n"], of=len(self.p_label), ece=probs["ece"], brier=probs["brier"]),
        )


def entries(row: dict[str, Any]) -> Iterator[tuple[Key, str, float | None]]:
    """What one labelled verdict row contributes: (group, the verdict's answer, p of the label) for the row and for each
    panel member that judged."""
    tool, output = str(row["tool"]), row["output"]
    if not isinstance(output, dict):
        return
    inputs = str(row["inputs"])
    yield (str(row["backend"]), str(row["model"]), tool, inputs), labels.judged(tool, output), labels.p_label(tool, output, row["label"])
    members = output.get("panel")
    for member in members if isinstance(members, list) else []:
        if isinstance(member, dict) and member.get("status") == "ok" and isinstance(member.get("backend"), str) and isinstance(member.get("model"), str):
            key = (member["backend"], member["model"], tool, inputs)
            yield key, labels.judged(tool, member), labels.p_label(tool, member, row["label"])


def tally(rows: Iterable[dict[str, Any]], first_id: int | None) -> tuple[dict[Key, Tally], dict[Key, Tally]]:
    """Tallies per group over every labelled row, and over those whose verdict id is `first_id` or newer (None: none)."""
    everything: dict[Key, Tally] = {}
    recent: dict[Key, Tally] = {}
    for row in rows:
        for key, answer, p in entries(row):
            ab = row["tool"] in labels.PAIRWISE and row["label"] in ("A", "B")
            everything.setdefault(key, Tally()).add(answer, row["label"], p, ab)
            if first_id is not None and row["id"] >= first_id:
                recent.setdefault(key, Tally()).add(answer, row["label"], p, ab)
    return everything, recent


def _with(window: Window, tallies: dict[Key, Tally]) -> Window:
    groups = [
        g.model_copy(update={"agreement": tallies[key].figures()}) if (key := (g.backend, g.model, g.tool, g.inputs)) in tallies else g
        for g in window.groups
    ]
    return window.model_copy(update={"groups": groups})


def labelled_rows(store: Engine, page: int = PAGE) -> Iterator[dict[str, Any]]:
    """Every label joined with its verdict (output decoded), `page` rows per read."""
    table, after = LabelTable(store), ""
    while True:
        rows = table.page(after=after, limit=page)
        for row in rows:
            try:
                output = json.loads(row["output"])
            except (TypeError, ValueError):
                output = None
            yield {**row, "output": output}
        if len(rows) < page:
            return
        after = rows[-1]["verdict_id"]


def attach(report: StatsReport, store: Engine) -> StatsReport:
    """The report with each group's agreement with the labels, over all time and over its `last` window (the verdicts
    from the oldest of the newest last_n on). Blocking."""
    everything, recent = tally(labelled_rows(store), LabelTable(store).first_of_newest(report.last_n))
    if not everything:
        return report
    return report.model_copy(update={"all_time": _with(report.all_time, everything), "last": _with(report.last, recent)})
