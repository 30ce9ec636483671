"""Scripted servers that bill a prompt cache as each provider documents it, for tests and perf/prompt_cache.py.

Each wraps a scripted judge (a responder from testkit/scripted_judges.py) and answers over the real wire format
(testkit/scripted_servers.py) with the usage block the provider would send:

- `OpenAICacheBilling` (OpenAI's prompt-caching guide): automatic for prompts of 1,024 tokens or more; a request
  reads the longest prefix it shares with an earlier prompt of the same route (its `prompt_cache_key`, else the
  hash of its first 256 tokens), counted from 1,024 tokens in steps of 128; `prompt_tokens_details.cached_tokens`.
- `AnthropicCacheBilling` (Anthropic's prompt-caching documentation): only prefixes ending at a block that carries
  `cache_control` are written, each at least the model's minimum (`min_tokens`); a breakpoint reads the longest entry
  at a block boundary up to 20 blocks before it; at most 4 breakpoints (more is a 400). The reply's usage:
  `input_tokens` (after the last read or write), `cache_read_input_tokens`, `cache_creation_input_tokens`.

Both: a prompt is its text (system, then each message's role and content blocks) cut into tokens of
CHARS_PER_TOKEN characters; an entry becomes readable only once the request that wrote it starts answering (after
`latency_s`), never to requests that arrived before. `arrivals` lists the requests in arrival order with what each
was billed; `billed()` is the billed-equivalent input (reads at `read_price`, Anthropic's writes at 1.25), `uncached()`
the input without any cache.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testkit.scripted_servers import Reply, ScriptedAnthropicServer, ScriptedServer

Responder = Callable[[dict[str, Any]], "Reply | str"]

CHARS_PER_TOKEN = 4
OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS, OPENAI_ROUTE_TOKENS = 1024, 128, 256
ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_MAX_BREAKPOINTS = 20, 4
ANTHROPIC_READ, ANTHROPIC_WRITE = 0.1, 1.25


@dataclass
class Billed:
    """One request as the provider billed it (tokens)."""

    prompt: int
    read: int
    written: int
    cache_key: str | None
    arrived: float = 0.0  # time.monotonic() when it reached the server
    answering: float | None = None  # ... and when it started answering (None: not yet)

    @property
    def uncached(self) -> int:
        return self.prompt - self.read - self.written


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def _blocks(payload: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt as (text, carries cache_control) blocks, system first, each message's role before its content."""
    out: list[tuple[str, bool]] = []
    system = payload.get("system")
    for part in system if isinstance(system, list) else ([{"text": system}] if system else []):
        out.append((str(part.get("text", "")), "cache_control" in part))
    for m in payload.get("messages", []):
        content = m.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        out.append((f"\n{m.get('role')}:\n", False))
        for part in parts:
            text = part.get("text") if part.get("type") == "text" else str(part.get("image_url") or part.get("source") or "")
            out.append((str(text), "cache_control" in part))
    return out


class _Billing:
    """What both providers share: the judge, the latency, the entries and the record of arrivals."""

    server_class: type[ScriptedServer] = ScriptedServer

    def __init__(self, judge: Responder, *, latency_s: float = 0.05, read_price: float = 0.1):
        self.judge, self.latency_s, self.read_price = judge, latency_s, read_price
        self.lock = threading.Lock()
        self.arrivals: list[tuple[dict[str, Any], Billed]] = []

    def __call__(self, payload: dict[str, Any]) -> Reply | str:
        with self.lock:
            billed, commit = self.bill(payload)  # against the entries readable now
            billed.arrived = time.monotonic()
            self.arrivals.append((payload, billed))
        time.sleep(self.latency_s)  # the request is being processed; it starts answering now
        with self.lock:
            commit()
            billed.answering = time.monotonic()
        reply = self.judge(payload)
        reply = reply if isinstance(reply, Reply) else Reply(content=reply)
        return self.usage(reply, billed)

    def bill(self, payload: dict[str, Any]) -> tuple[Billed, Callable[[], None]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def usage(self, reply: Reply, billed: Billed) -> Reply:  # pragma: no cover - abstract
        raise NotImplementedError

    def billed(self, write_price: float = ANTHROPIC_WRITE) -> float:
        return sum(b.uncached + self.read_price * b.read + write_price * b.written for _, b in self.arrivals)

    def uncached(self) -> int:
        return sum(b.prompt for _, b in self.arrivals)

    def rounds(self, first: int = 0) -> int:
        """The round trips one after another among the requests from `first` on: a request is one round after the
        latest of those that had started answering before it arrived (1 when all went at once)."""
        done: list[tuple[float, int]] = []
        deepest = 0
        for _, b in self.arrivals[first:]:
            depth = 1 + max((d for t, d in done if t <= b.arrived), default=0)
            deepest = max(deepest, depth)
            if b.answering is not None:
                done.append((b.answering, depth))
        return deepest

    def reset(self) -> None:
        with self.lock:
            self.arrivals.clear()

    def server(self) -> ScriptedServer:
        return self.server_class(self).start()


class OpenAICacheBilling(_Billing):
    def __init__(self, judge: Responder, **kwargs: Any):
        super().__init__(judge, **kwargs)
        self.entries: dict[str, list[str]] = {}  # route -> prompts that have started answering

    def bill(self, payload: dict[str, Any]) -> tuple[Billed, Callable[[], None]]:
        text = "".join(t for t, _ in _blocks(payload))
        key = payload.get("prompt_cache_key")
        route = str(key) if key else hashlib.sha256(text[: OPENAI_ROUTE_TOKENS * CHARS_PER_TOKEN].encode()).hexdigest()
        common = max((_common(text, earlier) for earlier in self.entries.get(route, ())), default=0)
        matched = common // CHARS_PER_TOKEN
        read = 0 if matched < OPENAI_MIN_TOKENS else OPENAI_MIN_TOKENS + (matched - OPENAI_MIN_TOKENS) // OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS
        prompt = _tokens(len(text))
        billed = Billed(prompt, min(read, prompt), 0, key)
        return billed, lambda: self.entries.setdefault(route, []).append(text) if prompt >= OPENAI_MIN_TOKENS else None

    def usage(self, reply: Reply, billed: Billed) -> Reply:
        reply.prompt_tokens = billed.prompt
        reply.usage = {**(reply.usage or {}), "prompt_tokens_details": {"cached_tokens": billed.read}}
        return reply


def _common(a: str, b: str) -> int:
    """The length of the common prefix of a and b (linear: equal slices first, then the characters of the last)."""
    n, k, step = min(len(a), len(b)), 0, 4096
    while k + step <= n and a[k : k + step] == b[k : k + step]:
        k += step
    while k < n and a[k] == b[k]:
        k += 1
    return k


class AnthropicCacheBilling(_Billing):
    server_class = ScriptedAnthropicServer

    def __init__(self, judge: Responder, *, min_tokens: int = 1024, **kwargs: Any):
        super().__init__(judge, **kwargs)
        self.min_tokens = min_tokens
        self.entries: set[str] = set()  # hashes of prefixes ending at a written breakpoint

    def bill(self, payload: dict[str, Any]) -> tuple[Billed, Callable[[], None]]:
        blocks = _blocks(payload)
        ends, hashes, total, digest = [], [], 0, hashlib.sha256()
        for text, _ in blocks:
            total += len(text)
            digest.update(text.encode("utf-8", "replace") + b"\x00")
            ends.append(total)
            hashes.append(digest.copy().hexdigest())
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if len(marks) > ANTHROPIC_MAX_BREAKPOINTS:
            raise ValueError(f"{len(marks)} cache_control blocks: at most {ANTHROPIC_MAX_BREAKPOINTS}")
        prompt = _tokens(total)
        read_at = 0  # tokens read: the longest hit any breakpoint finds
        for i in marks:
            for j in range(i, max(-1, i - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):
                if hashes[j] in self.entries:
                    read_at = max(read_at, ends[j] // CHARS_PER_TOKEN)
                    break
        writes = [i for i in marks if ends[i] // CHARS_PER_TOKEN >= self.min_tokens]
        written_to = max((ends[i] // CHARS_PER_TOKEN for i in writes), default=0)
        written = max(0, written_to - read_at)
        new = [hashes[i] for i in writes]
        return Billed(prompt, read_at, written, None), lambda: self.entries.update(new)

    def usage(self, reply: Reply, billed: Billed) -> Reply:
        reply.prompt_tokens = billed.uncached  # Anthropic's input_tokens: after the cache's reads and writes
        reply.usage = {**(reply.usage or {}), "cache_read_input_tokens": billed.read, "cache_creation_input_tokens": billed.written}
        return reply
