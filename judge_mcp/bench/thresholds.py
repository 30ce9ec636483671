"""`judge-mcp bench --fail-under METRIC=VALUE`: exit 1 when an overall figure is below its threshold (for CI)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


# the overall figures --fail-under may name (rates, higher is better)
FAIL_UNDER_METRICS = ("accuracy", "first_order_accuracy", "pair_accuracy", "single_order_accuracy", "judgebench_score",
                      "consistency", "strict_score")


def parse_fail_under(specs: list[str] | None) -> list[tuple[str, float]]:
    """`METRIC=VALUE` strings as (metric, threshold); ValueError naming the problem."""
    out = []
    for spec in specs or []:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep or name not in FAIL_UNDER_METRICS:
            raise ValueError(f"--fail-under {spec!r}: expected METRIC=VALUE with METRIC one of {', '.join(FAIL_UNDER_METRICS)}")
        try:
            threshold = float(value)
        except ValueError:
            raise ValueError(f"--fail-under {spec!r}: VALUE must be a number, e.g. {name}=0.7") from None
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"--fail-under {spec!r}: VALUE must be between 0 and 1")
        out.append((name, threshold))
    return out


def fail_under_problem(args: argparse.Namespace) -> str | None:
    try:
        parse_fail_under(getattr(args, "fail_under", None))
    except ValueError as exc:
        return str(exc)
    return None


def below_threshold_status(summary: dict[str, Any], specs: list[str] | None) -> int:
    """1 when an overall figure named by --fail-under is below its threshold or missing (saying which, on stderr)."""
    status = 0
    for name, threshold in parse_fail_under(specs):
        value = (summary.get("overall") or {}).get(name)
        if value is None:
            print(f"judge-mcp bench: --fail-under {name}: this run has no {name}", file=sys.stderr)
            status = 1
        elif value < threshold:
            print(f"judge-mcp bench: {name} {value:.3f} is below --fail-under {threshold}", file=sys.stderr)
            status = 1
    return status
