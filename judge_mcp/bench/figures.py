"""Figures for comparing against published judges, beside metrics.py's (which computes them per summary row).

- strict_score (`--metric strict` prints it beside the JudgeBench score): the goal-reversed paper's rule for its
  † rows (JudgeBench's recorded judges re-scored, the goal-reversed prompting paper §3): a pair is right
  only when the judge names the chosen response in both placements; an inconsistent pair, a tie ([[A=B]]) or an
  unparsed verdict in either placement makes it wrong. Its denominator is the JudgeBench score's (`judgebench_n`:
  every judged pair plus the degenerate ones, which count wrong as they do there), so on a file without degenerate
  pairs it equals pair_accuracy. JudgeBench's own score counts right + tie right; the strict one does not.
- length_preference: of the verdicts naming a response, on pairs whose responses differ in length, the share naming
  the longer one (pairwise methods; null when none; `judge-mcp stats` reports the same for the verdict log);
  length_gold_share: of the same verdicts, the share whose pair's gold (chosen) response is the longer one, i.e.
  what a judge that is always right would score as length_preference; length_bias = length_preference -
  length_gold_share: the judge's preference for length beyond what the gold labels justify (0: none; > 0: it
  picks the longer answer more often than the labels do). Both over the same verdicts, so an always-right judge
  scores 0 exactly and an always-longer judge scores 1 - length_gold_share.
"""

from __future__ import annotations

import argparse
from typing import Any

METRICS = ("judgebench", "strict")
# the published judges' bench methods (published.py), named here so the CLI starts without importing them
METHOD_NAMES = ("jb-vanilla", "alpaca-eval", "llmbar")
METHOD_HELP = ("; jb-vanilla: JudgeBench's vanilla judge ('Output (a)' / 'Output (b)', as JudgeBench sends it); alpaca-eval: "
               "AlpacaEval 2.0's annotator over head-to-head rows (bench-convert alpaca-eval), win rate and LC win rate; llmbar: "
               "LLMBar's evaluators (--llmbar-strategy), its statistics.json")
STRICT_COLUMN = ("strict_score", "strict score")


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None  # unrounded: rounding is for display


def length_figures(longer_picks: int, longer_gold: int, decided: int) -> dict[str, Any]:
    """length_preference, length_gold_share and length_bias from the counts over decided verdicts on pairs whose
    responses differ in length: verdicts naming the longer response, verdicts whose pair's gold is the longer."""
    preference, gold = _ratio(longer_picks, decided), _ratio(longer_gold, decided)
    bias = (longer_picks - longer_gold) / decided if decided else None
    return {"length_preference": preference, "length_gold_share": gold, "length_bias": bias}


def add_options(bench: argparse.ArgumentParser) -> None:
    """The bench's options for comparing against published judges."""
    bench.add_argument(
        "--metric",
        choices=METRICS,
        default="judgebench",
        help="strict: also print the goal-reversed paper's strict score beside JudgeBench's (a pair is right only when "
        "both placements are right; a tie, an inconsistent or unparsed placement, a degenerate pair: wrong). The JSON "
        "summary always holds strict_score",
    )


def _shown(value: Any) -> str:
    """A figure as the terminal shows it: 4 decimals (the JSON summary keeps every digit)."""
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The terminal lines of a published judge's own figures (AlpacaEval's win rates)."""
    h = s.get("head_to_head")
    if h:
        lc = "-" if h.get("lc_win_rate") is None else f"{h['lc_win_rate']:.2f} ({h.get('glm')})"
        return [f"head to head, {h.get('model')} over {h.get('baseline')}: win rate {_shown(h.get('win_rate'))}, LC win rate {lc}"
                + (f"; {h['lc_note']}" if h.get("lc_note") else "")]
    a = s.get("alpaca_eval")
    if not a:
        return _llmbar_lines(s.get("llmbar"))
    lc = "-" if a.get("lc_win_rate") is None else f"{a['lc_win_rate']:.2f} (se {_shown(a.get('lc_standard_error'))}, {a.get('glm')})"
    lines = [
        f"AlpacaEval {' vs '.join(reversed(a['generators'])) if len(a['generators']) == 2 else a['generators']}: "
        f"win rate {_shown(a['win_rate'])} (se {_shown(a['standard_error'])}, discrete {_shown(a['discrete_win_rate'])}), LC win rate {lc}; "
        f"{a['n_total']} annotated rows ({a['n_wins']} won, {a['n_wins_base']} lost, {a['n_draws']} draws), "
        f"{a['unannotated']} unannotated (left out, as AlpacaEval does), {a['identical_outputs']} identical outputs (1.5, no call)"
    ]
    if a.get("recorded_preferences_matched"):
        lines.append(f"replayed: preferences equal to AlpacaEval's recorded ones in {a['recorded_preferences_matched']} rows")
    if a.get("lc_note"):
        lines.append(f"LC win rate: {a['lc_note']}")
    return lines



def _llmbar_lines(block: dict[str, Any] | None) -> list[str]:
    """The terminal line of LLMBar's statistics.json figures (overall), or none."""
    o = (block or {}).get("overall")
    if not o:
        return []
    n = o["n"]
    return [f"LLMBar statistics: correct_False {o['correct_False']} / {n}, correct_True {o['correct_True']} / {n}, correct_average "
            f"{o['correct_average_percent']:.2f}%, correct_both {o['correct_both']} / {n}, equal {o['equal']} / {n}, kappa_average "
            f"{_shown(o['kappa_average'])}"]
