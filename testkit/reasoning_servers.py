"""Reasoning models as scripted servers answer (responders for testkit/scripted_servers.py's real HTTP servers).

- `OpenAIReasoner`: answers as OpenAI documents its reasoning models (o1, o3, o4-mini, gpt-5*): a 400 in OpenAI's
  exact error shape for `max_tokens` (`unsupported_parameter`), for `temperature` other than 1 (`unsupported_value`),
  for `top_p` and `logprobs`; hidden reasoning spent first from `max_completion_tokens` (an answer past what is
  left is cut, `finish_reason: length`, an empty one when reasoning took it all); the reasoning counted in
  `usage.completion_tokens_details.reasoning_tokens`.
- `ReasoningField`: an open-weight server's reply with its reasoning in a message field of its own
  (`reasoning_content`: vLLM, SGLang, DeepSeek, llama.cpp; `reasoning`: newer vLLM, OpenRouter, Ollama's OpenAI
  endpoint; `thinking`: Ollama).
- `InlineThink`: reasoning inline, as `<think>…</think>` before the answer (closed, or cut off at the token limit).
- `AnthropicThinker`: Claude with extended thinking: `thinking` blocks before the text, and the 400s Anthropic sends
  for a request that breaks thinking's rules (temperature set, max_tokens not above budget_tokens, a budget < 1024).

The reasoning they write holds the wrong verdict (`MISLEADING`: a judge that prefers the wrong answer), so a parser
that read it would say so. A scripted token is TOKEN_CHARS characters.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from typing import Any

from testkit.scripted_judges import BAD, Responder, UniversalJudge
from testkit.scripted_servers import Reply

TOKEN_CHARS = 4
NO_LIMIT = 100_000  # what a reasoning model may write when the request names no limit
MISLEADING = UniversalJudge(good=BAD.split()[-1].rstrip("."))  # right for "Sydney": wrong for every case of CASES
REASONING_MARK = "Let me reason it through first."  # how every scripted reasoning begins (never in a rationale)


def openai_error(message: str, param: str, code: str) -> Reply:
    """A 400 with OpenAI's exact error body."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return Reply(status=400, raw_body=json.dumps(body).encode())


def _text(answer: Reply | str) -> Reply:
    return answer if isinstance(answer, Reply) else Reply(content=answer)


def reasoning_text(payload: dict[str, Any]) -> str:
    """What the scripted model thinks before answering: the wrong judge's answer, among words."""
    wrong = _text(MISLEADING(payload)).content or ""
    return f"{REASONING_MARK} Perhaps the answer is {wrong}. On reflection, no."


class OpenAIReasoner:
    """OpenAI's reasoning models on the Chat Completions wire. `refused` counts the 400s sent, per parameter;
    `answered` the requests answered. Thread-safe."""

    def __init__(self, judge: Responder | None = None, reasoning_tokens: int = 600):
        self.judge = judge or UniversalJudge()
        self.reasoning_tokens = reasoning_tokens
        self.refused: Counter[str] = Counter()
        self.answered = 0
        self._lock = threading.Lock()

    def refusal(self, payload: dict[str, Any]) -> Reply | None:
        if "max_tokens" in payload:
            return openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                                "max_tokens", "unsupported_parameter")
        if "temperature" in payload and payload["temperature"] != 1:
            return openai_error(f"Unsupported value: 'temperature' does not support {payload['temperature']:g} with this model. Only the "
                                "default (1) value is supported.", "temperature", "unsupported_value")
        for name in ("top_p", "logprobs"):
            if name in payload:
                return openai_error(f"Unsupported parameter: '{name}' is not supported with this model.", name, "unsupported_parameter")
        return None

    def __call__(self, payload: dict[str, Any]) -> Reply:
        refusal = self.refusal(payload)
        with self._lock:
            if refusal is not None:
                self.refused[json.loads(refusal.raw_body or b"{}")["error"]["param"]] += 1
                return refusal
            self.answered += 1
        reply = _text(self.judge(payload))
        return spend(reply, payload.get("max_completion_tokens", NO_LIMIT), self.reasoning_tokens)

    @property
    def refusals(self) -> int:
        return sum(self.refused.values())


def spend(reply: Reply, limit: int, reasoning_tokens: int) -> Reply:
    """`reply` as a model that reasons `reasoning_tokens` first within `limit` output tokens answers it."""
    content = reply.content or ""
    thought = min(reasoning_tokens, limit)
    room = limit - thought
    answer_tokens = math.ceil(len(content) / TOKEN_CHARS)
    if answer_tokens > room:
        content, reply.finish_reason = content[: room * TOKEN_CHARS], "length"
    reply.content = content
    reply.completion_tokens = thought + min(answer_tokens, room)
    reply.usage = {**(reply.usage or {}), "completion_tokens_details": {"reasoning_tokens": thought}}
    return reply


class ReasoningField:
    """An open-weight server whose message carries the reasoning in `field` (and the answer in `content`)."""

    def __init__(self, field: str = "reasoning_content", judge: Responder | None = None):
        self.field = field
        self.judge = judge or UniversalJudge()

    def __call__(self, payload: dict[str, Any]) -> Reply:
        reply = _text(self.judge(payload))
        reply.message = {self.field: reasoning_text(payload)}
        return reply


class InlineThink:
    """A model that writes `<think>…</think>` before its answer. `reasoning_tokens`: how long it thinks; past the
    request's max_tokens the block is cut off (no closing tag, no answer, finish_reason length)."""

    def __init__(self, judge: Responder | None = None, reasoning_tokens: int = 50):
        self.judge = judge or UniversalJudge()
        self.reasoning_tokens = reasoning_tokens

    def __call__(self, payload: dict[str, Any]) -> Reply:
        reply = _text(self.judge(payload))
        thought = reasoning_text(payload)
        thought += " hmm" * max(0, (self.reasoning_tokens * TOKEN_CHARS - len(thought)) // 4)
        limit = payload.get("max_tokens") or payload.get("max_completion_tokens") or NO_LIMIT
        full = f"<think>\n{thought}\n</think>\n\n{reply.content or ''}"
        if len(full) > limit * TOKEN_CHARS:
            full, reply.finish_reason = full[: limit * TOKEN_CHARS], "length"
        reply.content = full
        reply.completion_tokens = math.ceil(len(full) / TOKEN_CHARS)
        return reply


def anthropic_error(message: str) -> Reply:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return Reply(status=400, raw_body=json.dumps(body).encode())


class AnthropicThinker:
    """Claude with extended thinking on the Messages wire: a request with `thinking` must leave temperature unset (or
    1), top_p within 0.95..1, budget_tokens >= 1024 and max_tokens above it, else Anthropic's 400; the reply opens
    with a `thinking` block. `refused` counts the 400s."""

    def __init__(self, judge: Responder | None = None):
        self.judge = judge or UniversalJudge()
        self.refused = 0

    def refusal(self, payload: dict[str, Any]) -> Reply | None:
        thinking = payload.get("thinking")
        if not thinking:
            return None
        budget = thinking.get("budget_tokens", 0)
        if budget < 1024:
            return anthropic_error("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if payload.get("max_tokens", 0) <= budget:
            return anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
        if payload.get("temperature", 1) != 1:
            return anthropic_error("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
        if "top_p" in payload and payload["top_p"] < 0.95:
            return anthropic_error("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.")
        return None

    def __call__(self, payload: dict[str, Any]) -> Reply:
        refusal = self.refusal(payload)
        if refusal is not None:
            self.refused += 1
            return refusal
        reply = _text(self.judge(payload))
        if payload.get("thinking"):
            reply.blocks = [{"type": "thinking", "thinking": reasoning_text(payload), "signature": "c2lnbmF0dXJl"}]
        return reply
