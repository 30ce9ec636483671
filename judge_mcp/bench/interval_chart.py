"""The HTML report's interval pictures, inline SVG like the rest of the report (no script): a point per row with its
95% interval as a bar, and a dashed reference line (the ranking: strengths with their intervals around the mean
rating 1000; the compare view: paired differences with their intervals around 0). Also the ranking's HTML section.
"""

from __future__ import annotations

import html
from typing import Any

Row = tuple[str, float | None, Any]  # (label, value, ci: [low, high] or a text or None)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ci_text(ci: Any, digits: int) -> str:
    if isinstance(ci, list) and len(ci) == 2:
        return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return str(ci) if isinstance(ci, str) else "no interval"


def interval_chart(title: str, rows: list[Row], *, reference: float, digits: int = 3, width: int = 560) -> str:
    """One line per row: its value as a dot and its interval as a bar, on a common axis with a dashed line at
    `reference`; a row without an interval shows its dot and says why in its tooltip. "" without any value."""
    spans = [v for _, value, ci in rows for v in ([value] if value is not None else []) + (list(ci) if isinstance(ci, list) else [])]
    if not spans:
        return ""
    low, high = min([*spans, reference]), max([*spans, reference])
    pad = (high - low) * 0.08 or 1.0
    low, high = low - pad, high + pad
    left = max(140, 7 * max(len(label) for label, _, _ in rows) + 12)
    right, line_h = 150, 22
    plot_w = width - right

    def x(v: float) -> float:
        return left + (v - low) / (high - low) * (plot_w - 10)

    parts = [f'<text x="0" y="16" font-size="13" font-weight="600">{_esc(title)}</text>']
    y = 34
    for label, value, ci in rows:
        parts.append(f'<text x="{left - 6}" y="{y + 4}" font-size="11" text-anchor="end">{_esc(label)}</text>')
        if isinstance(ci, list) and len(ci) == 2:
            parts.append(f'<line class="ci" x1="{x(ci[0]):.1f}" y1="{y}" x2="{x(ci[1]):.1f}" y2="{y}" stroke="#4e79a7" stroke-width="3"/>')
        if value is not None:
            tip = f"{label}: {value:.{digits}f} {_ci_text(ci, digits)}"
            parts.append(f'<circle class="point" cx="{x(value):.1f}" cy="{y}" r="4" fill="#222"><title>{_esc(tip)}</title></circle>')
            parts.append(f'<text x="{left + plot_w:.0f}" y="{y + 4}" font-size="10">{value:.{digits}f} {_esc(_ci_text(ci, digits))}</text>')
        else:
            parts.append(f'<text x="{left + 4}" y="{y + 4}" font-size="10" fill="#999">n/a</text>')
        y += line_h
    rx = x(reference)
    parts.append(f'<line x1="{rx:.1f}" y1="24" x2="{rx:.1f}" y2="{y - line_h + 10}" stroke="#999" stroke-dasharray="3,3"/>')
    parts.append(f'<text x="{rx:.1f}" y="{y + 6}" font-size="10" text-anchor="middle" fill="#666">{reference:g}</text>')
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width + left - 140}" height="{y + 14}" role="img"'
            f' aria-label="{_esc(title)}">{"".join(parts)}</svg>')


def _strength(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def ranking_section(label: str, ranking: list[dict[str, Any]]) -> str:
    """A run's ranking of the models its items name: the strengths with their interval bars, and the table."""
    chart = interval_chart(f"{label}: Bradley-Terry strength (95% interval)", [(r["name"], r["strength"], r["ci"]) for r in ranking],
                           reference=1000.0, digits=0)
    head = "<tr><th>model</th><th>strength</th><th>95% interval</th><th>battles</th><th>wins</th><th>losses</th><th>ties</th><th>consistent</th></tr>"
    rows = "".join(
        f"<tr><td>{_esc(r['name'])}</td><td>{_strength(r['strength'])}</td><td>{_esc(_ci_text(r['ci'], 0))}</td>"
        f"<td>{r['battles']}</td><td>{r['wins']}</td><td>{r['losses']}</td><td>{r['ties']}</td><td>{r['consistent']:.2f}</td></tr>"
        for r in ranking
    )
    note = ("<p class='note'>Strength: Arena-Hard-Auto's Bradley-Terry rating (mean 1000; 400 more = 10 times the odds of "
            "winning), from every pair judged in both placements (disagreeing placements as a tie); interval: 2.5th-97.5th "
            "percentile over 100 seeded bootstrap resamples of the pairs. Overlapping intervals: the data do not order the two.</p>")
    return f"<div class='chart'>{chart}</div><table>{head}{rows}</table>{note}"
