"""The LC win rate (judge_mcp/bench/alpaca_metrics.py) equals AlpacaEval's own `get_length_controlled_winrate` to
1e-6 on fixed rows, for its three GLMs: tests/bench_fixtures/alpaca_glm.json holds the rows and what AlpacaEval
0.6.6 computed on them (tools/alpaca_glm_reference.py, whose docstring has the commands), its df_gamed.csv input
beside it (alpaca_df_gamed.csv, synthetic, in AlpacaEval's columns)."""

from __future__ import annotations

import json
import sys

import pytest

from judge_mcp.bench import alpaca_metrics, published_options
from tests.bench.datasets import FIXTURES

FIXTURE = json.loads((FIXTURES / "alpaca_glm.json").read_text(encoding="utf-8"))
GAMED = alpaca_metrics.read_gamed(FIXTURES / FIXTURE["df_gamed"])
GLMS = ("length_controlled_minimal", "length_controlled_noreg", "length_controlled_v1")


def _rows(case: str, glm: str) -> list[dict]:
    rows = FIXTURE["cases"][case]
    # AlpacaEval's noreg GLM takes the row at position k's difficulty from df_gamed's row k (its first model's rows)
    difficulty = [g["instruction_difficulty"] for g in GAMED[: len(rows)]] if glm == "length_controlled_noreg" else [None] * len(rows)
    return [dict(r, difficulty=d) for r, d in zip(rows, difficulty)]


@pytest.mark.parametrize("glm", GLMS)
@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_lc_win_rate_equals_alpaca_eval_s_to_1e_6(case, glm):
    expected = FIXTURE["expected"][case][glm]
    got = alpaca_metrics.lc_win_rate(_rows(case, glm), ("reference", "model"), GAMED if glm == "length_controlled_v1" else None)
    assert got["glm"] == glm
    assert got["lc_win_rate"] == pytest.approx(expected["length_controlled_winrate"], abs=1e-6)
    assert got["lc_standard_error"] == pytest.approx(expected["lc_standard_error"], abs=1e-6)
    annotated = [r["preference"] for r in FIXTURE["cases"][case] if r["preference"] is not None]
    assert alpaca_metrics.win_rate(annotated)["win_rate"] == pytest.approx(expected["win_rate"], abs=1e-6)


def test_the_unrounded_lc_differs_from_a_rounded_one():
    """JSON summaries keep every digit: no figure is rounded to 4 decimals."""
    got = alpaca_metrics.lc_win_rate(_rows("length_biased", "length_controlled_v1"), ("reference", "model"), GAMED)
    assert got["lc_win_rate"] != round(got["lc_win_rate"], 4)
    assert alpaca_metrics.win_rate([1.0, 1.3333333])["win_rate"] == pytest.approx(100 * 0.3333333 / 2, abs=1e-12)


def test_without_scikit_learn_the_lc_says_which_extra_to_add(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    got = alpaca_metrics.lc_win_rate(_rows("length_biased", "length_controlled_minimal"), ("reference", "model"))
    assert got["lc_win_rate"] is None and "bench extra" in got["lc_note"] and "scikit-learn" in got["lc_note"]
    assert "bench extra" in (published_options.options_problem("alpaca-eval", None) or "")


def test_a_bad_df_gamed_is_refused_naming_the_line(tmp_path):
    bad = tmp_path / "df_gamed.csv"
    bad.write_text("model,index,instruction_difficulty,preference,std_delta_len,not_gamed_baseline\nm,0,hard,0.5,1.0,False\n")
    with pytest.raises(ValueError, match="line 2"):
        alpaca_metrics.read_gamed(bad)
    bad.write_text("model,index,preference\nm,0,0.5\n")
    assert "no column instruction_difficulty" in (published_options.options_problem("alpaca-eval", bad) or "")
    assert published_options.options_problem("vanilla", bad) == "--alpaca-gamed applies to --method alpaca-eval"
    short = alpaca_metrics.lc_win_rate(_rows("length_biased", "length_controlled_v1"), ("reference", "model"), GAMED[:10])
    assert short["lc_win_rate"] is None and "row position 10" in short["lc_note"]


def test_the_terminal_rounds_for_display_only():
    from judge_mcp.bench import figures
    from judge_mcp.bench.command import _d

    a = {"generators": ["ref", "model"], "win_rate": 100 / 3, "standard_error": 1 / 7, "discrete_win_rate": 50.0, "lc_win_rate": 40 / 3,
         "lc_standard_error": 0.123456789, "glm": "length_controlled_minimal", "n_total": 3, "n_wins": 1, "n_wins_base": 2,
         "n_draws": 0, "unannotated": 0, "identical_outputs": 0}
    line = figures.summary_lines({"alpaca_eval": a})[0]
    assert "win rate 33.3333 (se 0.1429, discrete 50.0000), LC win rate 13.33 (se 0.1235" in line
    assert _d({"ece": 2 / 3, "n": 4}) == "{ece: 0.667, n: 4}"
