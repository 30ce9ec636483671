"""The call layer's usage totals: optional counts stay None until a provider reports one, and sum as counts after."""

from __future__ import annotations

from judge_mcp.backends.base import Usage
from judge_mcp.calls.usage import UsageTotals
from judge_mcp.contract.results import UsageOut


def test_optional_counts_are_none_until_reported_then_summed() -> None:
    totals = UsageTotals()
    totals.add_call(Usage(prompt_tokens=10, completion_tokens=5))
    assert (totals.calls, totals.prompt_tokens, totals.reasoning_tokens, totals.cached_prompt_tokens) == (1, 10, None, None)
    totals.add_call(Usage(prompt_tokens=20, completion_tokens=7, reasoning_tokens=3, cached_prompt_tokens=0))
    totals.add_call(Usage(prompt_tokens=20, completion_tokens=7, reasoning_tokens=4, cache_write_tokens=9))
    assert (totals.calls, totals.prompt_tokens, totals.completion_tokens) == (3, 50, 19)
    assert (totals.reasoning_tokens, totals.cached_prompt_tokens, totals.cache_write_tokens) == (7, 0, 9)


def test_a_panels_sum_keeps_none_where_no_member_reported_and_takes_the_callers_latency() -> None:
    a = UsageTotals(calls=2, cached_calls=1, prompt_tokens=30, completion_tokens=4, latency_ms=900.0, reasoning_tokens=5)
    b = UsageTotals(calls=1, prompt_tokens=10, completion_tokens=2, latency_ms=800.0, cached_prompt_tokens=8)
    total = UsageTotals.summed([a, b], latency_ms=1000.04)
    assert total == UsageTotals(calls=3, cached_calls=1, prompt_tokens=40, completion_tokens=6, latency_ms=1000.0,
                                reasoning_tokens=5, cached_prompt_tokens=8, cache_write_tokens=None)


def test_the_result_model_reads_the_totals_by_attribute() -> None:
    out = UsageOut.model_validate(UsageTotals(calls=2, prompt_tokens=9, reasoning_tokens=1))
    assert out.model_dump() == {"calls": 2, "cached_calls": 0, "prompt_tokens": 9, "completion_tokens": 0, "latency_ms": 0.0,
                                "reasoning_tokens": 1, "cached_prompt_tokens": None, "cache_write_tokens": None}
