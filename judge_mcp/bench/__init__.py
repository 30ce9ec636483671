"""`judge-mcp bench`: the benchmark harness (see the contract (docs/tools.md), "Benchmark harness", and docs/benchmarks.md).

data.py reads the JSONL sets, methods.py judges one item or placement per method, stored_runs.py stores every finished
judgment in the bench database, metrics.py turns stored rows into the summary, runner.py runs a benchmark
(concurrent, resumable, with a progress bar), command.py is the command line; the HTML report is judge_mcp/bench/html_report.py.
Published judges reproduced: arena_hard.py, jb_vanilla.py and alpaca_eval.py (bench methods in methods.py and
published.py; AlpacaEval's win rates in alpaca_metrics.py), the strict score and length bias in figures.py, their
data's converters in convert_published.py; testkit/replay.py replays their recorded judgments through the bench.
"""

from judge_mcp.bench.command import add_parser

__all__ = ["add_parser"]
