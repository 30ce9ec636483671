"""One backend's outcome of a method: what runtime/run.py collects from each judge it runs (a panel member, or the
one judge) and what the panel's combine functions (methods/panel.py) read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judge_mcp.calls.usage import UsageTotals


@dataclass
class Member:
    """One backend's outcome of a method, as runtime/run.py collects it (a panel member, or the one judge)."""

    backend: str
    model: str
    result: Any = None  # the method's result (ComparePairResult / GradeScoreResult); None when failed or excluded
    error: str | None = None
    excluded: bool = False
    usage: UsageTotals | None = None

    @property
    def status(self) -> str:
        return "excluded" if self.excluded else "failed" if self.result is None else "ok"
