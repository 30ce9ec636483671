"""The OpenAI chat-completions wire format, shared by the OpenAI-compatible backend (over HTTP) and the embedded
backend (llama.cpp in process answers in the same shape): request messages, and reading a reply body."""

from __future__ import annotations

import math
from typing import Any

from judge_mcp.backends.base import MIN_LOGPROB, ChatRequest, Completion, TokenLogprob, Usage
from judge_mcp.backends.errors import RetryableError
from judge_mcp.backends.reasoning import message_reasoning


def token_count(value: Any) -> int:
    """A token count from a usage block; anything unreadable counts as 0 rather than failing the call."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def chat_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request as OpenAI chat messages: the system prompt first, as a system message; a message with images as
    content parts (its text, then each group's caption and its `image_url` parts with data: URIs)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    for m in request.messages:
        if not m.images:
            messages.append({"role": m.role, "content": m.content})
            continue
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
        for caption, group in m.images:
            parts.append({"type": "text", "text": caption})
            parts.extend({"type": "image_url", "image_url": {"url": image.data_uri()}} for image in group)
        messages.append({"role": m.role, "content": parts})
    return messages


def system_in_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A model without a system role: the system text opens the first user message (JudgeBench's markers)."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], messages[1:]
    if not rest or rest[0]["role"] != "user" or not isinstance(rest[0]["content"], str):
        return [{"role": "user", "content": system}, *rest]
    return [{"role": "user", "content": fold_system(system, rest[0]["content"])}, *rest[1:]]


def fold_system(system: str, user_text: str) -> str:
    """JudgeBench's rendering of a system message for o1 models (utils/models.py, OpenAIAPI.chat), exactly."""
    return f"<|BEGIN_SYSTEM_MESSAGE|>\n{system.strip()}\n<|END_SYSTEM_MESSAGE|>\n\n{user_text}"


def logprob_params(request: ChatRequest) -> dict[str, Any]:
    """The request's log-probability parameters in the OpenAI shape (none when it asks for none)."""
    if not request.logprobs:
        return {}
    return {"logprobs": True, "top_logprobs": request.top_logprobs}


def _logprob(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return max(float(value), MIN_LOGPROB)


def parse_logprobs(choice: dict[str, Any]) -> tuple[TokenLogprob, ...] | None:
    """`choices[0].logprobs.content` as TokenLogprobs; None when absent or not in the documented shape (a server
    that sends something else gives no probabilities rather than made-up ones, and the call itself stands)."""
    block = choice.get("logprobs")
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    for entry in content:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            return None
        logprob = _logprob(entry.get("logprob"))
        if logprob is None:
            return None
        top = []
        for alt in entry.get("top_logprobs") or []:
            alt_logprob = _logprob(alt.get("logprob")) if isinstance(alt, dict) else None
            if alt_logprob is not None and isinstance(alt.get("token"), str):
                top.append((alt["token"], alt_logprob))
        tokens.append(TokenLogprob(entry["token"], logprob, tuple(top)))
    return tuple(tokens)


def parse_chat_completion(body: dict[str, Any], default_model: str, payload: dict[str, Any], *, structured: bool) -> Completion:
    """Read an OpenAI chat.completion body. Shared with the embedded backend, which returns the same shape.

    A body without a usable first choice raises RetryableError (bounded by the retry policy)."""
    if "error" in body and not body.get("choices"):
        raise RetryableError(f"error body: {str(body['error'])[:200]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise RetryableError("response has no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise RetryableError(f"response choice is not an object: {str(choice)[:80]!r}")
    message = choice.get("message")
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise RetryableError(f"response message is not an object: {str(message)[:80]!r}")
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    if not content and isinstance(message.get("refusal"), str):  # structured outputs: a refusal instead of content
        content = message["refusal"]  # the model's reason stays visible (and unparsed), not dropped
    if content is None:
        content = ""
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    finish_reason = choice.get("finish_reason")
    completion = Completion(
        text=str(content),
        model=str(body.get("model") or default_model),
        usage=usage_of(usage),
        finish_reason=str(finish_reason) if finish_reason is not None else None,
        structured=structured,
        logprobs=parse_logprobs(choice) if payload.get("logprobs") else None,
        raw={"request": payload, "response": body},
    )
    # reasoning in a field of its own (reasoning_content / reasoning / thinking): kept apart, never the answer
    completion.take_reasoning(message_reasoning(message))
    return completion


def _detail(usage: dict[str, Any], block: str, key: str) -> int | None:
    """A count inside one of the usage block's details objects (`prompt_tokens_details.cached_tokens`), or None when
    the server does not report it."""
    details = usage.get(block)
    if not isinstance(details, dict) or details.get(key) is None:
        return None
    return token_count(details.get(key))


def usage_of(usage: dict[str, Any]) -> Usage:
    """Chat Completions' usage block: prompt and completion tokens, and where the server reports them the hidden
    reasoning (`completion_tokens_details.reasoning_tokens`) and the prompt tokens read from its prompt cache
    (`prompt_tokens_details.cached_tokens`); both are parts of the totals, as OpenAI documents them."""
    return Usage(
        prompt_tokens=token_count(usage.get("prompt_tokens")),
        completion_tokens=token_count(usage.get("completion_tokens")),
        reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
        cached_prompt_tokens=_detail(usage, "prompt_tokens_details", "cached_tokens"),
    )
