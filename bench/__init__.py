"""Benchmark scripts, run as modules from the checkout's root (`python -m bench.perf`, ...); see docs/performance.md."""
