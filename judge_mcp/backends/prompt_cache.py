"""Cache hints on the wire: where a provider's prompt cache may keep the prefix a judgment's calls share.

A method marks how much of its first message every call of one judgment shares (`ChatRequest.shared_chars`). Here
that becomes each wire format's hint:

- Anthropic caches only up to a `cache_control` breakpoint, at a content-block boundary, and only a prefix of at
  least the model's minimum (Anthropic's prompt-caching documentation: 1,024 tokens for most Sonnet and Opus models,
  2,048 for Haiku 3 and 3.5 and Sonnet 4.6, 4,096 for Haiku 4.5 and Opus 4.5 and later). The first message is split
  into text blocks: at the end of the shared part (breakpoint: the judgment's other calls read it), and along the
  way at fixed steps (`STEP_CHARS`, moved to the next line break), the last of them a breakpoint too. A growing
  conversation's next judgment begins with the same text, so it has the same step boundaries, and Anthropic's
  lookback (about 20 blocks before a breakpoint) finds the earlier judgment's entry there. Two breakpoints of the
  four a request may carry.
- OpenAI-compatible servers get `prompt_cache_key` (backends/base.prompt_cache_key), computed from the prompt's
  start, so a judgment's calls and a conversation's judgments route to the same cache.

Tokens are estimated from characters at CHARS_PER_TOKEN, more characters per token than English text averages,
so the estimate stays below the real count and a breakpoint is never placed on a prefix that is surely too short.
"""

from __future__ import annotations

from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Message

CHARS_PER_TOKEN = 4
STEP_CHARS = 4096  # ~1,000 tokens between block boundaries; 20 of them (the lookback) cover ~80,000 characters
LINE_SEARCH_CHARS = 256  # a step boundary moves to the next line break within this many characters, else stays
MAX_BREAKPOINTS = 4  # Anthropic's limit per request
EPHEMERAL = {"type": "ephemeral"}

# (model name fragment, minimum cacheable prompt in tokens), first match wins; others: DEFAULT_MIN_TOKENS
MIN_TOKENS = (
    ("haiku-4", 4096), ("opus-4-5", 4096), ("opus-4-6", 4096), ("opus-4-7", 4096), ("opus-5", 4096),
    ("sonnet-4-6", 2048), ("3-haiku", 2048), ("3-5-haiku", 2048), ("haiku-3", 2048),
)
DEFAULT_MIN_TOKENS = 1024


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix (tokens) the Anthropic model caches."""
    name = model.lower()
    return next((tokens for fragment, tokens in MIN_TOKENS if fragment in name), DEFAULT_MIN_TOKENS)


def estimated_tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def step_cuts(text: str, end: int) -> list[int]:
    """Block boundaries before `end`: each multiple of STEP_CHARS moved to just after the next line break (within
    LINE_SEARCH_CHARS), so they depend only on the text before them and a longer text with the same start has the
    same ones. Linear in `end`."""
    cuts: list[int] = []
    at = STEP_CHARS
    while at < end:
        newline = text.find("\n", at, min(at + LINE_SEARCH_CHARS, end))
        cut = newline + 1 if newline >= 0 else at
        if cut < end and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
        at += STEP_CHARS
    return cuts


def anthropic_first_blocks(request: ChatRequest, model: str) -> list[dict[str, Any]] | None:
    """The first message's content as Messages API text blocks with cache breakpoints, or None when the request
    marks no shared part or the shared part is below the model's minimum (the content then goes as it always did)."""
    if not request.messages or request.shared_chars <= 0:
        return None
    m: Message = request.messages[0]
    text, shared = m.content, min(request.shared_chars, len(m.content))
    system = len(request.system or "")
    least = min_cacheable_tokens(model)
    if estimated_tokens(system + shared) < least:
        return None
    cuts = [*step_cuts(text, shared), shared]
    pieces = [text[a:b] for a, b in zip([0, *cuts], cuts)]
    if any(not p.strip() for p in pieces):  # Anthropic refuses a whitespace-only text block: one block for all of it
        cuts, pieces = [shared], [text[:shared]]
    marked = {len(cuts) - 1}
    if len(cuts) >= 2 and estimated_tokens(system + cuts[-2]) >= least:
        marked.add(len(cuts) - 2)
    blocks: list[dict[str, Any]] = []
    for k, piece in enumerate(pieces):
        block: dict[str, Any] = {"type": "text", "text": piece}
        if k in marked:
            block["cache_control"] = dict(EPHEMERAL)
        blocks.append(block)
    rest = text[shared:]
    if rest.strip():
        blocks.append({"type": "text", "text": rest})
    elif rest:
        blocks[-1]["text"] += rest
    return blocks


# ---- the order of sending (calls/fanout.run_each's `warm`) ------------------------------------------------------------
OPENAI_MIN_TOKENS = 1024  # OpenAI caches prompts of 1,024 tokens or more (its prompt-caching guide)
LOCAL_MIN_TOKENS = 256  # the embedded model: a slot's prompt cache pays off for any prefix worth a batch of prefill


def cache_min_tokens(backend: Backend) -> int | None:
    """The shortest shared prefix (tokens) this backend's prompt cache serves, or None when it has none to warm (the
    MCP client's model, a provider's batch API)."""
    if backend.kind == "openai":
        return OPENAI_MIN_TOKENS
    if backend.kind == "anthropic":
        return min_cacheable_tokens(backend.model)
    if backend.kind == "local":
        return LOCAL_MIN_TOKENS
    return None


def warm_up(backend: Backend, shared_chars: int) -> bool:
    """Whether a judgment whose calls share `shared_chars` characters of prompt (the system prompt included) sends its
    first call first and the rest once it is answered: the setting allows it and the share reaches the cache's minimum."""
    least = cache_min_tokens(backend) if backend.cache_warmup else None
    return least is not None and estimated_tokens(shared_chars) >= least
