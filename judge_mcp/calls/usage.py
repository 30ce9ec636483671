"""`UsageTotals`: what one judgment's calls cost, counted at the call layer.

The tools' results show it as `UsageOut` (contract/results.py), which reads these attributes by name; the call
layer knows nothing of the result models. The three optional counts stay None until a provider reports them, so a
result says "not reported" rather than 0 for a backend that never counts reasoning or cache reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from judge_mcp.backends.base import Usage

OPTIONAL_COUNTS = ("reasoning_tokens", "cached_prompt_tokens", "cache_write_tokens")
ANTHROPIC_PRICES = (0.1, 1.25)  # a cache read's and a cache write's price over an uncached prompt token (Anthropic's)


def cache_prices(model_id: str, cached_price: float) -> tuple[float, float]:
    """(read, write) price ratios of a prompt token read from / written to the prompt cache of the backend that
    answered as `model_id`: Anthropic's own; elsewhere `cached_price` (JUDGE_MCP_CACHED_INPUT_PRICE) and no write
    charge."""
    return ANTHROPIC_PRICES if model_id.startswith("anthropic/") else (cached_price, 1.0)


def billed_input(prompt: float, cached: float, written: float, prices: tuple[float, float]) -> float:
    """Billed-equivalent input tokens: uncached + read x cached + write x written (cached and written are parts of
    prompt)."""
    read, write = prices
    return prompt - cached - written + read * cached + write * written


def _plus(total: int | None, part: int | None) -> int | None:
    if part is None:
        return total
    return part if total is None else total + part


@dataclass
class UsageTotals:
    calls: int = 0  # requests sent to a backend (retries not counted)
    cached_calls: int = 0  # answered from the call cache or an identical call in flight
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    reasoning_tokens: int | None = None  # hidden reasoning, part of completion_tokens
    cached_prompt_tokens: int | None = None  # read from the provider's prompt cache, part of prompt_tokens
    cache_write_tokens: int | None = None  # written to the provider's prompt cache, part of prompt_tokens

    def add_call(self, usage: Usage) -> None:
        """One request sent: its tokens join the totals."""
        self.calls += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        for name in OPTIONAL_COUNTS:
            setattr(self, name, _plus(getattr(self, name), getattr(usage, name)))

    @classmethod
    def summed(cls, parts: Iterable["UsageTotals"], latency_ms: float) -> "UsageTotals":
        """Several judges' totals (a panel's members) as one; latency is the caller's wall time."""
        out = cls(latency_ms=round(latency_ms, 1))
        for part in parts:
            for f in fields(cls):
                if f.name == "latency_ms":
                    continue
                value = getattr(part, f.name)
                setattr(out, f.name, _plus(getattr(out, f.name), value) if f.name in OPTIONAL_COUNTS else getattr(out, f.name) + value)
        return out
