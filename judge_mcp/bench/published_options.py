"""The published judges' own `judge-mcp bench` options (light: the command's parser imports it): `--alpaca-gamed`
(AlpacaEval's df_gamed.csv, for its default LC GLM) and `--llmbar-strategy` (LLMBar's evaluator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge_mcp.bench import alpaca_metrics
from judge_mcp.bench.alpaca_metrics import read_gamed


def add_options(bench: Any) -> None:
    """The published judges' own bench options."""
    bench.add_argument(
        "--alpaca-gamed", type=Path, metavar="DF_GAMED_CSV",
        help="alpaca-eval: AlpacaEval's df_gamed.csv (its gamed baselines' annotations and instruction difficulties): the LC "
        "win rate then uses AlpacaEval's default GLM, length_controlled_v1",
    )
    bench.add_argument(
        "--llmbar-strategy", choices=LLMBAR_STRATEGIES,
        help="llmbar: LLMBar's evaluator (default Vanilla); stored as llmbar[STRATEGY]",
    )


# LLMBar's evaluators (judge_mcp/bench/llmbar.py STRATEGIES, held equal to this by a test)
LLMBAR_STRATEGIES = ("Vanilla", "Vanilla_NoRules", "Vanilla_1shot", "Vanilla_2shot", "CoT", "Metrics", "Reference", "Metrics_Reference", "Swap", "Swap_CoT")


def options_problem(method: str, gamed: Path | None, strategy: str | None = None) -> str | None:
    """What is wrong with the published judges' options, or None: --alpaca-gamed readable and with alpaca-eval only,
    and scikit-learn present for an alpaca-eval run (its LC win rate)."""
    if strategy is not None and method != "llmbar":
        return "--llmbar-strategy applies to --method llmbar"
    if gamed is not None and method != "alpaca-eval":
        return "--alpaca-gamed applies to --method alpaca-eval"
    if method == "alpaca-eval":
        try:
            alpaca_metrics.sklearn_modules()
            if gamed is not None:
                read_gamed(gamed)
        except alpaca_metrics.MissingExtra as exc:
            return str(exc)
        except (OSError, ValueError) as exc:
            return f"--alpaca-gamed {gamed}: {exc}"
    return None
