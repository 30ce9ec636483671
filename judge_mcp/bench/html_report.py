"""A self-contained HTML report of bench runs: tables and inline SVG charts, no script, no CDN.

`render(summaries)` takes bench summaries (the JSON `judge-mcp bench --out` writes, or those rebuilt from a bench
database) and returns one HTML page: per dataset, a table of every method's figures, accuracy and pair accuracy,
accuracy by category, consistency and position bias, cost per item, and LWE's cumulative accuracy.
"""

from __future__ import annotations

import html
import time
from collections import defaultdict
from typing import Any

from judge_mcp.bench import interval_chart, metrics

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#222;max-width:1280px}
h1{font-size:1.5rem}h2{font-size:1.25rem;margin-top:2.5rem;border-bottom:1px solid #ddd}h3{font-size:1rem;margin-bottom:.3rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f5f5f5}.note{color:#666;font-size:.85rem}
.charts{display:flex;flex-wrap:wrap;gap:1.5rem}.chart{flex:0 0 auto}svg text{font-family:inherit}
.wide{overflow-x:auto;max-width:100%}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _label(summary: dict[str, Any], with_model: bool = False) -> str:
    """The run's method (and panel); with `with_model`, also the model it used (a section that mixes models)."""
    label = summary.get("method_key") or summary.get("method", "?")
    if summary.get("panel"):
        label += f" (panel {summary.get('backend', '?')})"
    if with_model and summary.get("model"):
        label += f" · {summary['model']}"
    return label


def mixes_models(runs: list[dict[str, Any]]) -> bool:
    return len({s.get("model") for s in runs}) > 1


def with_members(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs, each panel run (--backends) followed by one row per member scored alone on the same items."""
    out = []
    for s in runs:
        out.append(s)
        for name, figures in (s.get("panel") or {}).items():
            out.append({"method_key": f"{s.get('method_key') or s.get('method', '?')} · member {name}", "overall": figures})
    return out


# ---- SVG charts -----------------------------------------------------------------------------------------------------
def bar_chart(title: str, groups: list[tuple[str, list[tuple[str, float | None]]]], *, vmax: float | None = None,
              reference: float | None = None, marks: dict[str, float | None] | None = None, width: int = 520, unit: str = "") -> str:
    """Horizontal grouped bars: one group per label, one bar per (series, value). None values are drawn as 'n/a'.
    `reference`: a dashed line across the chart; `marks`: a dashed tick per group label (its own reference value)."""
    values = [v for _, bars in groups for _, v in bars if v is not None]
    if not groups or not values:
        return ""
    top = vmax if vmax is not None else (max(values) or 1.0) * 1.1
    series = list(dict.fromkeys(name for _, bars in groups for name, _ in bars))
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(series)}
    longest = max(len(line) for label, _ in groups for line in _label_lines(label))
    left, right, bar_h, gap = max(180, 7 * longest + 12), 60, 14, 12  # room for every label whole: names are not cut
    width += left - 180
    plot_w = width - left - right
    y = 28
    parts = [f'<text x="0" y="16" font-size="13" font-weight="600">{_esc(title)}</text>']
    for label, bars in groups:
        lines = _label_lines(label)
        if len(lines) > 1 and bar_h * len(bars) < 26:
            y += 6  # room for the second line above and below a single bar
        middle = y + bar_h * len(bars) / 2
        for k, text in enumerate(lines):
            at = middle + 4 + (k - (len(lines) - 1) / 2) * 12
            parts.append(
                f'<text x="{left - 6}" y="{at:.0f}" font-size="{11 if k == 0 else 10}" text-anchor="end">'
                f'{_esc(text)}<title>{_esc(label)}</title></text>'
            )
        mark = (marks or {}).get(label)
        if mark is not None and top:
            x = left + min(1.0, mark / top) * plot_w
            parts.append(
                f'<line class="mark" x1="{x:.1f}" y1="{y - 2}" x2="{x:.1f}" y2="{y + bar_h * len(bars)}"'
                ' stroke="#333" stroke-width="1.5" stroke-dasharray="2,2">'
                f"<title>without position bias: {_fmt(mark, 2)}</title></line>"
            )
        for name, value in bars:
            if value is None:
                parts.append(f'<text x="{left + 4}" y="{y + bar_h - 3}" font-size="10" fill="#999">n/a</text>')
            else:
                w = max(0.0, min(1.0, value / top)) * plot_w if top else 0.0
                w = max(w, 2.0)  # a 0.00 shows as a stub, not as no bar (which reads as missing)
                parts.append(
                    f'<rect class="bar" x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" fill="{colours[name]}">'
                    f"<title>{_esc(label)} · {_esc(name)}: {_fmt(value)}{_esc(unit)}</title></rect>"
                )
                parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 4}" font-size="10">{_fmt(value, 2)}{_esc(unit)}</text>')
            y += bar_h
        y += gap
    if reference is not None and top:
        x = left + reference / top * plot_w
        parts.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{y - gap + 2}" stroke="#999" stroke-dasharray="3,3"/>')
    # axis
    parts.append(f'<line x1="{left}" y1="24" x2="{left}" y2="{y - gap + 2}" stroke="#444"/>')
    legend_y = y + 6
    lx = left
    for name in series:  # left to right, wrapping to a new row where the next entry would not fit
        needed = 20 + 7 * len(name)
        if lx > left and lx + needed > width:
            lx, legend_y = left, legend_y + 16
        parts.append(f'<rect x="{lx}" y="{legend_y}" width="10" height="10" fill="{colours[name]}"/>')
        parts.append(f'<text x="{lx + 14}" y="{legend_y + 9}" font-size="11">{_esc(name)}</text>')
        lx += needed
    height = legend_y + 20
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
        f' aria-label="{_esc(title)}">{"".join(parts)}</svg>'
    )


def _label_lines(label: str) -> list[str]:
    """A bar's label: "method · model" on two lines when long."""
    return label.split(" · ", 1) if len(label) > 26 else [label]


def line_chart(title: str, series: list[tuple[str, list[float]]], *, width: int = 520, height: int = 260, vmax: float = 1.0) -> str:
    """Lines over item count (x = 1..n), y from 0 to vmax."""
    series = [(name, values) for name, values in series if values]
    if not series:
        return ""
    left, right, top_pad, bottom = 40, 20, 28, 60
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    n_max = max(len(v) for _, v in series)
    parts = [f'<text x="0" y="16" font-size="13" font-weight="600">{_esc(title)}</text>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top_pad + plot_h * (1 - tick / vmax)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{tick:.2f}</text>')
    parts.append(f'<text x="{left + plot_w}" y="{top_pad + plot_h + 14}" font-size="10" text-anchor="end">{n_max} items</text>')
    parts.append(f'<text x="{left}" y="{top_pad + plot_h + 14}" font-size="10">1</text>')
    for i, (name, values) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        step = plot_w / max(1, n_max - 1)
        points = " ".join(f"{left + k * step:.1f},{top_pad + plot_h * (1 - v / vmax):.1f}" for k, v in enumerate(values))
        parts.append(f'<polyline class="line" points="{points}" fill="none" stroke="{colour}" stroke-width="2"><title>{_esc(name)}</title></polyline>')
        ly = top_pad + plot_h + 28 + 14 * (i % 2)
        lx = left + (i // 2) * 200
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 14}" y="{ly}" font-size="11">{_esc(name)} (final {_fmt(values[-1], 2)})</text>')
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
        f' aria-label="{_esc(title)}">{"".join(parts)}</svg>'
    )


# ---- the page -------------------------------------------------------------------------------------------------------
def _table(runs: list[dict[str, Any]], with_model: bool = False) -> str:
    head = "".join(f"<th>{_esc(title)}</th>" for _, title in metrics.COLUMNS)
    rows = []
    for s in runs:
        o = s.get("overall", {})
        cells = "".join(f"<td>{_cell(o, k)}</td>" for k, _ in metrics.COLUMNS)
        extra = []
        if s.get("degenerate"):
            extra.append(f"{s['degenerate']} degenerate (not judged; counted wrong in the JudgeBench score only)")
        if s.get("errors"):
            extra.append(f"{s['errors']} error{'s' if s['errors'] != 1 else ''}")
        if s.get("incomplete"):
            extra.append(f"{s['incomplete']} incomplete")
        rows.append(f"<tr><td>{_esc(_label(s, with_model))}</td>{cells}<td>{_esc(', '.join(extra))}</td></tr>")
    first = "method · model" if with_model else "method"
    return f"<div class='wide'><table><tr><th>{first}</th>{head}<th>notes</th></tr>{''.join(rows)}</table></div>"


def _cell(row: dict[str, Any], key: str) -> str:
    """A figure with its 95% interval below it (bench/uncertainty.py), or "n too small" where the sample is."""
    ci = (row.get("ci") or {}).get(key) if row.get(key) is not None else None
    if isinstance(ci, list) and len(ci) == 2:
        return f"{_esc(_fmt(row.get(key)))}<br><span class='note'>[{ci[0]:.2f}, {ci[1]:.2f}]</span>"
    if isinstance(ci, str):
        return f"{_esc(_fmt(row.get(key)))}<br><span class='note'>n too small</span>"
    return _esc(_fmt(row.get(key)))


def _category_table(runs: list[dict[str, Any]], categories: list[str], with_model: bool = False) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in categories)
    rows = []
    for s in runs:
        cats = s.get("categories", {})
        cells = "".join(
            f"<td>{_cell(cats.get(c, {}), _strict_key(cats.get(c, {})))} <span class='note'>(n={_esc(cats.get(c, {}).get('n', 0))})</span></td>"
            for c in categories
        )
        rows.append(f"<tr><td>{_esc(_label(s, with_model))}</td>{cells}</tr>")
    return f"<table><tr><th>pair accuracy by category</th>{head}</tr>{''.join(rows)}</table>"


def dataset_section(dataset: str, runs: list[dict[str, Any]]) -> str:
    kind = runs[0].get("kind", "")
    models = sorted({s.get("model", "?") for s in runs})
    mixed = mixes_models(runs)

    def label(s: dict[str, Any]) -> str:
        return _label(s, mixed)

    parts = [f"<h2>{_esc(dataset)} <span class='note'>({_esc(kind)}; judge {_esc(', '.join(models))})</span></h2>", _table(with_members(runs), mixed)]
    charts = []
    if kind == "pairwise":
        charts.append(bar_chart(
            "Pair accuracy and single-order accuracy",  # dashed: 0.5, chance for one order
            [
                (label(s), [("pair accuracy", s["overall"].get("pair_accuracy")), ("single-order accuracy", s["overall"].get("single_order_accuracy"))])
                for s in runs
            ],
            vmax=1.0, reference=0.5,
        ))
    else:
        accuracy = [(label(s), [("accuracy", s["overall"].get("pair_accuracy"))]) for s in runs]
        charts.append(bar_chart("Accuracy (the gold response alone is best)", accuracy, vmax=1.0))
    charts.append(bar_chart(
        "Consistency and position bias (dashed: no bias)",
        [(label(s), [("consistency", s["overall"].get("consistency")), ("position bias", s["overall"].get("position_bias"))]) for s in runs],
        vmax=1.0, marks={label(s): s["overall"].get("position_bias_unbiased", 0.5 if kind == "pairwise" else None) for s in runs},
    ))
    categories = sorted({c for s in runs for c in s.get("categories", {})})
    if categories:
        charts.append(bar_chart(
            "Pair accuracy by category",
            [(c, [(label(s), s.get("categories", {}).get(c, {}).get("pair_accuracy")) for s in runs]) for c in categories],
            vmax=1.0,
        ))
    calls = [(label(s), [("calls", s["overall"].get("calls_per_item")), ("cached", s["overall"].get("cached_calls_per_item"))]) for s in runs]
    charts.append(bar_chart("Model calls per item", calls))
    charts.append(bar_chart("Seconds per item", [(label(s), [("wall time of the run per item", s["overall"].get("wall_seconds_per_item")),
                                                             ("latency of one item", s["overall"].get("seconds_per_item"))]) for s in runs], unit=" s"))
    tokens = [
        (label(s), [("prompt", s["overall"].get("prompt_tokens_per_item")), ("completion", s["overall"].get("completion_tokens_per_item"))])
        for s in runs
    ]
    charts.append(bar_chart("Tokens per item", tokens))
    lwe = [(f"{label(s)} pair acc.", s["lwe"]["cumulative_pair_accuracy"]) for s in runs if s.get("lwe", {}).get("cumulative_pair_accuracy")]
    lwe += [(f"{label(s)} chosen-first acc.", s["lwe"]["cumulative_accuracy"]) for s in runs if s.get("lwe", {}).get("cumulative_accuracy")]
    if lwe:
        charts.append(line_chart("LWE: cumulative accuracy over the sequence", lwe))
    parts.append("<div class='charts'>" + "".join(f"<div class='chart'>{c}</div>" for c in charts if c) + "</div>")
    if len(categories) > 1:
        parts.append(_category_table(runs, categories, mixed))
    parts += [interval_chart.ranking_section(label(s), s["ranking"]) for s in runs if s.get("ranking")]
    notes = [note for s in runs for note in run_notes(s, label(s), mixed)]
    if notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>")
    return "\n".join(parts)


def run_notes(s: dict[str, Any], name: str, mixed: bool) -> list[str]:
    """The notes under a dataset's charts for one run (LWE, Grade Score, probabilities, wall time)."""
    notes: list[str] = []
    if s.get("lwe"):
        lwe = s["lwe"]
        text = (
            f"{name}: meta-prompt path for {_fmt(lwe.get('meta_path_share'), 2)} of the judgments, {lwe.get('refinements', 0)} refinements,"
            f" last meta-prompt version {lwe.get('last_meta_prompt_version')}"
        )
        if lwe.get("relative_cost") is not None:
            text += (
                f"; relative cost {_fmt(lwe['relative_cost'], 2)}x one vanilla judgment in characters"
                f" ({_fmt(lwe.get('relative_cost_with_scoring'), 2)}x with the swapped scoring placement)"
            )
        if lwe.get("vanilla_fig9"):
            v = lwe["vanilla_fig9"]
            text += (
                f"; its vanilla (Figure 9) pair alone: accuracy {_fmt(v['accuracy'], 2)}, consistency {_fmt(v['consistency'], 2)},"
                f" pair accuracy {_fmt(v['pair_accuracy'], 2)}"
            )
        notes.append(text)
    if s.get("grade"):
        g = s["grade"]
        text = (
            f"{name}: mean Grade Score {_fmt(g.get('mean_grade_score'), 3)} (LLM Score {_fmt(g.get('mean_llm_score'), 3)},"
            f" Choice Score {_fmt(g.get('mean_choice_score'), 3)})"
        )
        if "unrelated_pick_rate" in g:
            text += f"; unrelated option picked in {_fmt(g['unrelated_pick_rate'], 3)} of parsed trials ({g['unrelated_picked_items']} items)"
        notes.append(text)
    notes.extend(probability_notes(s, mixed))
    run = s.get("run", {})
    if run.get("wall_seconds_total"):
        notes.append(f"{name}: {run.get('judged_total')} items judged in {_fmt(run.get('wall_seconds_total'), 0)} s of wall time in total")
    return notes


def probability_notes(s: dict[str, Any], with_model: bool = False) -> list[str]:
    """One line each for a run's verdict-probability calibration and its adaptive-swap comparison."""
    notes = []
    c = s.get("calibration")
    if c:
        parts = [
            f"{label}: coverage {_fmt(c[k]['coverage'], 2)}, accuracy {_fmt(c[k]['accuracy'])}, ECE {_fmt(c[k]['ece'])}, Brier {_fmt(c[k]['brier'])}"
            for k, label in (("single_order", "one order"), ("both_orders", "mean of both orders"))
        ]
        lean = c["single_order"].get("p_first_shown")
        notes.append(
            f"{_label(s, with_model)}: verdict probabilities ({c['bins']}-bin ECE); " + "; ".join(parts)
            + f"; mean probability given to the first-shown answer {_fmt(lean)}"
        )
    a = s.get("adaptive")
    if a:
        notes.append(
            f"{_label(s, with_model)}: swap auto vs swap true on the same {a['judgments']} judgments: calls/judgment "
            f"{_fmt(a['auto']['calls_per_judgment'])} vs {_fmt(a['swap_true']['calls_per_judgment'])}, accuracy "
            f"{_fmt(a['auto']['accuracy'])} vs {_fmt(a['swap_true']['accuracy'])}, pair accuracy {_fmt(a['auto']['pair_accuracy'])} vs "
            f"{_fmt(a['swap_true']['pair_accuracy'])}; second order ran in {_fmt(a['second_order_share'], 2)},"
            f" the one-order verdicts were right in {_fmt(a['one_order_accuracy'])}"
            f"; the plain single-order verdicts: position bias {_fmt(a['single_order']['position_bias'])},"
            f" pair accuracy {_fmt(a['single_order']['pair_accuracy'])}"
        )
    return notes


def render(summaries: list[dict[str, Any]], title: str = "judge-mcp benchmark report", lead: str = "") -> str:
    """The page; `lead`: HTML placed before the datasets' sections (the --compare view)."""
    by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in summaries:
        by_dataset[s.get("dataset", "?")].append(s)
    sections = [dataset_section(d, sorted(runs, key=_label)) for d, runs in sorted(by_dataset.items())]
    machine = next((s.get("run", {}).get("machine") for s in summaries if s.get("run", {}).get("machine")), None)
    intro = (
        "<p class='note'>Pairwise sets: every pair is judged with the chosen answer shown first and shown second. "
        "Pair accuracy = right in both placements (a judge that follows positions scores 0); single-order accuracy = "
        "right on one seeded random placement per item (the LWE paper's Accuracy; chance is 0.5); JudgeBench score = its "
        "official rule (+1 per placement naming the chosen answer, -1 per placement naming the rejected one, right when "
        "> 0); chosen-first acc. = the placement with the chosen answer shown first only, which a judge that always names "
        "the first-shown answer scores 1.0 on: never read it alone. Consistency = both placements name the same answer; "
        "position bias = share of parsed verdicts naming the first-shown answer (dashed tick: a judge without bias, 0.5 "
        "for pairs and 1/n for n options). Response-wise sets (FLIP, pointwise, grade): right when the gold response alone "
        "is best (the columns' accuracies are the same figure). Ties and parse failures count as wrong. When a dataset's "
        "runs used different models, each row names its model. Under each rate, its 95% interval (Wilson; length bias: a "
        "seeded bootstrap over the items); 'n too small' where there are too few items to say.</p>"
    )
    if machine:
        intro += f"<p class='note'>Machine: {_esc(machine.get('platform'))}, {_esc(machine.get('cpus'))} CPUs, Python {_esc(machine.get('python'))}.</p>"
    body = lead + ("\n".join(sections) if sections else "<p>No runs.</p>")
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{_esc(title)}</h1><p class='note'>Generated {generated} from {len(summaries)} run(s).</p>{intro}{body}</body></html>\n"
    )


# ---- Markdown (for docs/benchmarks.md) ----------------------------------------------------------------------------
def _strict_key(figures: dict[str, Any]) -> str:
    return "accuracy" if figures.get("pair_accuracy") is None else "pair_accuracy"


def _strict(figures: dict[str, Any]) -> Any:
    """Pair accuracy where the run has it, else accuracy (they are the same figure for single-verdict methods)."""
    value = figures.get("pair_accuracy")
    return figures.get("accuracy") if value is None else value


def markdown(summaries: list[dict[str, Any]]) -> str:
    """One table per dataset (overall figures of every run), then pair accuracy by category where there are several
    (pair accuracy: right in both placements, so a position-biased judge cannot look good by category either)."""
    by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in summaries:
        by_dataset[s.get("dataset", "?")].append(s)
    out = []
    for dataset, runs in sorted(by_dataset.items()):
        runs = sorted(runs, key=_label)
        mixed = mixes_models(runs)
        out.append(f"#### {dataset}\n")
        if not mixed:
            out.append(f"Judge: {runs[0].get('model', '?')}\n")
        out.append(f"| {'method · model' if mixed else 'method'} | " + " | ".join(title for _, title in metrics.COLUMNS) + " |")
        out.append("|---|" + "---:|" * len(metrics.COLUMNS))
        for s in with_members(runs):
            o = s.get("overall", {})
            out.append(f"| {_label(s, mixed)} | " + " | ".join(_fmt(o.get(key)) for key, _ in metrics.COLUMNS) + " |")
        for s in runs:
            for note in probability_notes(s, mixed):
                out.append(f"\n{note}")
        for s in runs:
            lwe = s.get("lwe") or {}
            if lwe.get("relative_cost") is not None:
                out.append(
                    f"\n{_label(s, mixed)}: relative cost {_fmt(lwe['relative_cost'])}x one vanilla (Figure 9) judgment in characters "
                    f"({_fmt(lwe.get('relative_cost_with_scoring'))}x with the swapped scoring placement)"
                )
        categories = sorted({c for s in runs for c in s.get("categories", {})})
        if len(categories) > 1:
            out.append("\nPair accuracy by category (n):\n")
            out.append("| method | " + " | ".join(categories) + " |")
            out.append("|---|" + "---:|" * len(categories))
            for s in runs:
                cats = s.get("categories", {})
                out.append(f"| {_label(s, mixed)} | " + " | ".join(
                    f"{_fmt(_strict(cats.get(c, {})))} ({cats.get(c, {}).get('n', 0)})" for c in categories) + " |")
        out.append("")
    if out:
        out += ["Legend:\n", *(f"- **{title}**: {meaning}" for title, meaning in metrics.LEGEND), ""]
    return "\n".join(out)
