"""What JudgeBench's OpenAI client sends for a judge's messages (ScalerLab/JudgeBench @ e2c52c28, `utils/models.py`,
`OpenAIAPI.chat`), shared by the `arena-hard` and `jb-vanilla` baselines.

JudgeBench routes a model whose name starts with "gpt" or "o1" to OpenAI. For a name starting with "o1" (o1-mini,
o1-preview, ... its o1-family judges), its code folds a leading system message into the first user message,
between `<|BEGIN_SYSTEM_MESSAGE|>` markers (`fold_system`: its f-string, character for character), and sends only
`model` and `messages`: none of the judge's temperature, top_p or max_tokens (the server's defaults; here
`ChatRequest.server_defaults`). Every other model gets the judge's own parameters. The rule is JudgeBench's, by the
same test on the model name (case as written), for a judge on the OpenAI-compatible backend.
"""

from __future__ import annotations

from judge_mcp.backends.base import Backend, ChatRequest, Message
from judge_mcp.backends.openai_wire import fold_system

__all__ = ["fold_system", "is_o1_judge", "judge_request"]


def is_o1_judge(backend: Backend) -> bool:
    """JudgeBench's `self.model.startswith("o1")`, for a judge it would send to OpenAI's API."""
    return backend.kind == "openai" and backend.model.startswith("o1")


def judge_request(
    backend: Backend, messages: tuple[Message, ...], system: str | None, *, temperature: float, max_tokens: int,
    top_p: float | None = None, purpose: str = "",
) -> ChatRequest:
    """The request JudgeBench's client makes of `backend` for (system, messages) and the judge's parameters."""
    if not is_o1_judge(backend):
        return ChatRequest(messages=messages, system=system, temperature=temperature, max_tokens=max_tokens, top_p=top_p, purpose=purpose, cache_hints=False)
    if system is not None:
        first = messages[0]
        messages = (Message("user", fold_system(system, first.content), first.images), *messages[1:])
    # max_tokens stays in the request's record (its cache key) but is not sent: server_defaults sends none of them
    return ChatRequest(messages=messages, max_tokens=max_tokens, server_defaults=True, purpose=purpose, cache_hints=False)
