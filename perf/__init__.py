"""Benchmark scripts, run as modules from the checkout's root (`python -m perf.ratios`, ...); see docs/performance.md."""
