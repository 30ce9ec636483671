"""`judge-mcp bench`: the benchmark harness (see CONTRACT.md, "Benchmark harness", and docs/benchmarks.md).

data.py reads the JSONL sets, methods.py judges one item or placement per method, results.py stores every finished
judgment in the bench database, metrics.py turns stored rows into the summary, runner.py runs a benchmark
(concurrent, resumable, with a progress bar), cli.py is the command line; the HTML report is judge_mcp/bench/html_report.py.
"""

from judge_mcp.bench.command import add_parser

__all__ = ["add_parser"]
