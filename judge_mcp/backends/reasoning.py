"""Reasoning models on every backend: which models reason (known up front from their names), where a reply keeps its
reasoning, and the reasoning taken out of an answer before any parser reads it.

- OpenAI's reasoning families (o1*, o3*, o4*, gpt-5*; OpenAI's reasoning guide and its Chat Completions reference)
  refuse `max_tokens` (they take `max_completion_tokens`) and sampling parameters (`temperature` other than 1,
  `top_p`, `logprobs`). `openai_known(model, effort)` says so before the first call, so it wastes no round trip.
  Exceptions, as OpenAI documents them: the `*-chat-latest` models are chat models (their sampling parameters are
  left to the server to refuse); gpt-5.1 and later take temperature, top_p and logprobs when `reasoning_effort` is
  `none`. Any other model is learned from its server's 400 (backends/learned.py).
- Open-weight servers send reasoning as `message.reasoning_content` (vLLM, SGLang, DeepSeek, llama.cpp's server),
  `message.reasoning` (newer vLLM, OpenRouter, Ollama's OpenAI endpoint) or `message.thinking` (Ollama), or inline
  as a `<think>…</think>` block at the start of the content (closed, or cut off at the token limit), or, for models
  whose chat template opens the block in the prompt (DeepSeek-R1 distills), as content that only closes it.
  `split_think` takes such a block out in one pass (str.find only: linear time on any input).

Reasoning is never parsed as the verdict and never returned as a rationale: the completion's `text` is the answer
only; the reasoning is kept beside it, cut to REASONING_KEEP_CHARS for the call record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judge_mcp.config.values import ANTHROPIC_MIN_THINKING, REASONING_EFFORTS

__all__ = ["ANTHROPIC_MIN_THINKING", "REASONING_EFFORTS", "KnownModel", "openai_known", "message_reasoning", "split_think"]

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")  # message fields holding reasoning, in that order
REASONING_KEEP_CHARS = 4000  # the reasoning a call record keeps (its start); its full length is counted
# the output budget added for reasoning when none is set and the model is known (or learned) to reason: OpenAI
# recommends leaving room of the order of 25,000 tokens for reasoning and answer; an unused budget costs nothing
DEFAULT_REASONING_BUDGET = 16384
ANTHROPIC_MIN_TOP_P = 0.95  # with thinking on, Anthropic takes top_p between 0.95 and 1 only

_OPENAI_FAMILIES = ("o1", "o3", "o4", "gpt-5")


@dataclass(frozen=True)
class KnownModel:
    """What a model's name says before any call: its family reasons; whether it refuses sampling parameters."""

    reasoning: bool
    samples: bool  # takes temperature / top_p / logprobs


def base_name(model: str) -> str:
    """The model's own name: lower-cased, without a router's provider prefix (`openai/o3-mini`)."""
    return model.strip().lower().rsplit("/", 1)[-1]


def _in_family(name: str, family: str) -> bool:
    if not name.startswith(family):
        return False
    rest = name[len(family):]
    return rest == "" or rest[0] in "-."


def openai_known(model: str, effort: str | None = None) -> KnownModel | None:
    """A model of OpenAI's reasoning families, by name (None: not known up front)."""
    name = base_name(model)
    family = next((f for f in _OPENAI_FAMILIES if _in_family(name, f)), None)
    if family is None:
        return None
    if "chat" in name.split("-"):  # gpt-5-chat-latest, gpt-5.1-chat-latest: chat models, not reasoning ones
        return KnownModel(reasoning=False, samples=True)
    newer = family == "gpt-5" and name.startswith("gpt-5.") and not name.startswith("gpt-5.0")
    return KnownModel(reasoning=True, samples=newer and effort == "none")


def message_reasoning(message: dict[str, Any]) -> str | None:
    """The reasoning an OpenAI-compatible reply's message carries in a field of its own, or None."""
    for key in REASONING_FIELDS:
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def split_think(text: str) -> tuple[str | None, str]:
    """(reasoning or None, answer): a `<think>` block opening the text (after whitespace) taken out, nested blocks
    counted, an unclosed one being all reasoning (cut off at the token limit); or, with no opening tag before it,
    everything up to a first `</think>` (a template that opened the block in the prompt). Linear: every search
    starts where the last one ended."""
    start = len(text) - len(text.lstrip())
    if text.startswith(THINK_OPEN, start):
        depth, pos = 1, start + len(THINK_OPEN)
        while depth > 0:  # each closing tag ends one level; the opening tags before it each add one
            close = text.find(THINK_CLOSE, pos)
            if close < 0:
                return text[start + len(THINK_OPEN):].strip(), ""  # cut off inside the block: no answer yet
            depth += text.count(THINK_OPEN, pos, close) - 1
            pos = close + len(THINK_CLOSE)
        return text[start + len(THINK_OPEN):pos - len(THINK_CLOSE)].strip(), text[pos:].lstrip()
    close = text.find(THINK_CLOSE)
    if close >= 0 and text.find(THINK_OPEN, 0, close) < 0:
        return text[:close].strip(), text[close + len(THINK_CLOSE):].lstrip()
    return None, text


def kept(reasoning: str | None) -> str | None:
    """What a record keeps of a reasoning text: its start, at most REASONING_KEEP_CHARS characters."""
    if reasoning is None:
        return None
    return reasoning if len(reasoning) <= REASONING_KEEP_CHARS else reasoning[:REASONING_KEEP_CHARS] + "…"
