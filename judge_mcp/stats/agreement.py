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
- length (compare_pair, lwe_judge): over the labelled verdicts with a winner and an A/B label whose answers differ in
  length (the verdict's facts row says which is longer), the share naming the longer answer (`longer_picked`), the
  share of their labels that are the longer answer (`longer_labels`), and `bias`, the first minus the second (the
  bench's length_bias, bench/figures.py, with the labels as gold): how much more than the labels the judge prefers
  the longer answer. A tie (verdict or label) says nothing about length and is left out, so both shares have one
  denominator.
Each figure carries its 95% interval (stats/intervals.py): the rates' `ci` (Wilson), `kappa_ci`, `calibration.ci`,
`scores.ci` and `length.ci` (a seeded bootstrap over the labelled verdicts), or a text where the sample is too small.
A group with no label has `labelled` 0 and null figures, never 0. A panel verdict counts under the backend and model
it was logged with, and each member that judged (status ok) under its own, as judge_stats counts them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from judge_mcp.stats import intervals, labels
from judge_mcp.stats import score_agreement
from judge_mcp.stats.calibration import probability_figures
from judge_mcp.contract.results import Agreement, Ci, LabelCalibration, LabelLength, Rate, ScoreAgreement, StatsReport, Window
from judge_mcp.storage.label_rows import LabelTable

if TYPE_CHECKING:
    from judge_mcp.storage.engine import Engine

PAGE = 500
Key = tuple[str, str, str, str]  # backend, model, tool, inputs
T = TypeVar("T")


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
        self.scores: list[tuple[float, float]] = []  # score_response: (overall, label)
        self.pairwise = False  # a pairwise verdict is labelled: the group has length figures
        self.length: list[tuple[bool, bool]] = []  # decided, A/B-labelled, unequal lengths: (verdict names the longer, label does)

    def add(self, answer: str, label: str, p: float | None, ab: bool, score: float | None = None, longer: str | None | bool = False) -> None:
        """One labelled verdict; `longer`: a pairwise verdict's longer answer ("A", "B"; None for equal lengths or
        unknown), False for other tools."""
        self.pairs.append((answer, label))
        if ab:
            self.p_label.append(p)
        if score is not None and label.isdigit():
            self.scores.append((score, float(label)))
        if longer is not False:
            self.pairwise = True
            if longer in ("A", "B") and answer in ("A", "B") and label in ("A", "B"):
                self.length.append((answer == longer, label == longer))

    def figures(self) -> Agreement:
        """The figures, each with its 95% interval (stats/intervals.py): Wilson for the rates, a seeded bootstrap over
        the labels for kappa, ECE, Brier, length bias, MAE and the rank correlations."""
        pairs = self.pairs
        n, right = len(pairs), sum(a == b for a, b in pairs)
        probs = probability_figures(self.p_label)
        ps: list[float | None] = [p for p in self.p_label if p is not None]
        k = kappa(pairs)
        return Agreement(
            labelled=n,
            accuracy=rate(right, n),
            kappa=k,
            kappa_ci=intervals.ci_bootstrap(n, lambda idx: kappa([pairs[i] for i in idx]), defined=k is not None),
            calibration=LabelCalibration(n=probs["n"], of=len(self.p_label), ece=probs["ece"], brier=probs["brier"], ci=_boot(ps, {
                "ece": lambda sample: probability_figures(sample)["ece"],
                "brier": lambda sample: probability_figures(sample)["brier"],
            }) if ps else {}),
            scores=self._score_figures(),
            length=self._length_figures(),
        )

    def _length_figures(self) -> LabelLength | None:
        if not self.pairwise:
            return None
        pairs = self.length
        of, picked, labelled = len(pairs), sum(p for p, _ in pairs), sum(lab for _, lab in pairs)
        bias = round((picked - labelled) / of, 4) if of else None
        ci = intervals.ci_mean([float(p) - float(lab) for p, lab in pairs]) if of else None
        return LabelLength(longer_picked=rate(picked, of), longer_labels=rate(labelled, of), bias=bias, ci=ci)

    def _score_figures(self) -> ScoreAgreement | None:
        s = self.scores
        if not s:
            return None
        mae, rho, tau = score_agreement.mae(s), score_agreement.spearman(s), score_agreement.kendall(s)
        ci = _boot(s, {"mae": score_agreement.mae, "spearman": score_agreement.spearman, "kendall": score_agreement.kendall},
                   defined={"mae": mae is not None, "spearman": rho is not None, "kendall": tau is not None})
        return ScoreAgreement(n=len(s), mae=mae, spearman=rho, kendall=tau, ci=ci)


def rate(count: int, of: int) -> Rate:
    """A rate with its Wilson interval."""
    return Rate(rate=round(count / of, 4) if of else None, count=count, of=of, ci=intervals.ci_rate(count, of))


def _boot(items: list[T], figures: dict[str, Callable[[list[T]], float | None]], defined: dict[str, bool] | None = None) -> dict[str, Ci]:
    """Each figure's bootstrap interval over resamples of `items` (the same resamples for every figure)."""
    return {
        name: intervals.ci_bootstrap(len(items), lambda idx, f=f: f([items[i] for i in idx]), defined=(defined or {}).get(name, True))  # type: ignore[misc]
        for name, f in figures.items()
    }


def longer_of(row: dict[str, Any]) -> str | None | bool:
    """A labelled row's longer answer for Tally.add: "A", "B" or None for a pairwise verdict, False for other tools."""
    if row["tool"] not in labels.PAIRWISE:
        return False
    return row.get("longer") if row.get("longer") in ("A", "B") else None


def entries(row: dict[str, Any]) -> Iterator[tuple[Key, str, float | None, float | None]]:
    """What one labelled verdict row contributes: (group, the verdict's answer, p of the label, its score) for the row
    and for each panel member that judged."""
    tool, output = str(row["tool"]), row["output"]
    if not isinstance(output, dict):
        return
    inputs = str(row["inputs"])
    yield (str(row["backend"]), str(row["model"]), tool, inputs), labels.judged(tool, output), labels.p_label(tool, output, row["label"]), \
        labels.score_of(tool, output)
    members = output.get("panel")
    for member in members if isinstance(members, list) else []:
        if isinstance(member, dict) and member.get("status") == "ok" and isinstance(member.get("backend"), str) and isinstance(member.get("model"), str):
            key = (member["backend"], member["model"], tool, inputs)
            yield key, labels.judged(tool, member), labels.p_label(tool, member, row["label"]), labels.score_of(tool, member)


def tally(rows: Iterable[dict[str, Any]], first_id: int | None) -> tuple[dict[Key, Tally], dict[Key, Tally]]:
    """Tallies per group over every labelled row, and over those whose verdict id is `first_id` or newer (None: none)."""
    everything: dict[Key, Tally] = {}
    recent: dict[Key, Tally] = {}
    for row in rows:
        longer = longer_of(row)
        for key, answer, p, score in entries(row):
            ab = row["tool"] in labels.PAIRWISE and row["label"] in ("A", "B")
            everything.setdefault(key, Tally()).add(answer, row["label"], p, ab, score, longer)
            if first_id is not None and row["id"] >= first_id:
                recent.setdefault(key, Tally()).add(answer, row["label"], p, ab, score, longer)
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
