"""Test doubles for the tests and the perf scripts, never shipped: scripted model servers and judges, launchers, hostile texts."""
