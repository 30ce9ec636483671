"""The backend seam: one request shape in, one completion shape out.

A backend implements `_send` (one HTTP call or one in-process generation) and classifies its failures as
`RetryableError` or `FatalError`; `Backend.complete` owns the concurrency limit, the timeout and the retry loop
(see retry.py), so every backend gets the same bounded behaviour.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from collections.abc import Iterable
from typing import Any

import anyio

from judge_mcp.backends.deadline import AttemptClock
from judge_mcp.backends.errors import AttemptTimeout, BackendError, FatalError, RetryableError
from judge_mcp.backends.limiter import OVERLOAD_STATUS, SLOW_START_GRACE_S, AdaptiveLimit
from judge_mcp.backends.reasoning import kept, split_think
from judge_mcp.backends.retry import RetryPolicy, run_with_retries
from judge_mcp.contract.images import Image


@dataclass(frozen=True)
class Message:
    role: str  # "user" | "assistant"
    content: str
    # Images after the text, in groups, each group introduced by its caption ("Images in Assistant A's answer:").
    images: tuple[tuple[str, tuple[Image, ...]], ...] = ()

    def record(self) -> dict[str, Any]:
        """The message for a cache key or a record: an image as its SHA-256, media type and size, never its bytes."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.images:
            out["images"] = [[caption, [image.described() for image in group]] for caption, group in self.images]
        return out


@dataclass(frozen=True)
class ChatRequest:
    """What a method asks of a model. Backends translate it to their wire format.

    `json_schema`, when set, asks for an answer constrained to that JSON schema where the backend supports it
    (`Backend.supports_json_schema`); methods keep a text grammar as the fallback elsewhere.
    """

    messages: tuple[Message, ...]
    system: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    json_schema: dict[str, Any] | None = None
    schema_name: str = "verdict"
    # Token log-probabilities: `logprobs` asks for them (where the backend can give them, `Backend.supports_logprobs`),
    # with the `top_logprobs` most likely alternatives at each generated token.
    logprobs: bool = False
    top_logprobs: int = 0
    # Nucleus sampling, sent only when set (a published judge's request that names it, e.g. JudgeBench's vanilla 1.0)
    top_p: float | None = None
    # Token biases (token id, bias) sent as OpenAI's `logit_bias` where set (a published judge's request that names
    # them, e.g. LLMBar's); other backends have no such field and send none
    logit_bias: tuple[tuple[int, int], ...] | None = None
    # Send no temperature, top_p or output limit at all: the server's own defaults (JudgeBench's request to o1 judges)
    server_defaults: bool = False
    # Free-form tag for logs (e.g. "compare_pair:AB"); not part of the cache key.
    purpose: str = field(default="", compare=False)
    # How many leading characters of the first message's content every call of the judgment shares (0: not marked):
    # where a provider's prompt cache may end its cached prefix (Anthropic's cache_control, the prompt_cache_key).
    # A hint to the wire format, not part of the request's meaning (nor of the call cache's key).
    shared_chars: int = field(default=0, compare=False)
    # False: a published judge's request, sent as its authors sent it (byte for byte: no prompt_cache_key, no
    # cache_control blocks). Like shared_chars, a hint to the wire format only.
    cache_hints: bool = field(default=True, compare=False)

    def to_record(self) -> dict[str, Any]:
        """A JSON-safe description of the request (no secrets exist at this level). Log-probabilities appear only
        when asked for, so the cache keys of requests without them are what they always were."""
        record: dict[str, Any] = {
            "system": self.system,
            "messages": [m.record() for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "json_schema": self.json_schema,
            "schema_name": self.schema_name,
        }
        if self.logprobs:
            record["logprobs"] = True
            record["top_logprobs"] = self.top_logprobs
        if self.top_p is not None:  # only when set: the cache keys of requests without it are unchanged
            record["top_p"] = self.top_p
        if self.logit_bias:  # likewise
            record["logit_bias"] = [list(pair) for pair in self.logit_bias]
        if self.server_defaults:
            record["server_defaults"] = True
        return record

    def summary(self) -> dict[str, Any]:
        """What the verdict log and the cache keep of a request: its shape, not its text. The judged texts are
        stored once, as the tool's inputs; the exact prompt is the templates applied to them (and `cache_key`)."""
        return {
            "system_chars": len(self.system or ""),
            "messages": [
                {"role": m.role, "chars": len(m.content), **({"images": [i.described() for _, g in m.images for i in g]} if m.images else {})}
                for m in self.messages
            ],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "schema_name": self.schema_name if self.json_schema is not None else None,
            **({"top_logprobs": self.top_logprobs} if self.logprobs else {}),
            **({"top_p": self.top_p} if self.top_p is not None else {}),
            **({"logit_bias_tokens": len(self.logit_bias)} if self.logit_bias else {}),
            **({"server_defaults": True} if self.server_defaults else {}),
        }

    def cache_key(self, backend_identity: str) -> str:
        """Hash of the exact request as this backend would send it."""
        payload = json.dumps({"backend": backend_identity, "request": self.to_record()}, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


PROMPT_KEY_CHARS = 2048  # the prompt's start that names its cache route: a judgment's calls, a conversation's judgments


def prompt_cache_key(request: ChatRequest) -> str:
    """A route for the provider's prompt cache (OpenAI's `prompt_cache_key`): a hash of the system prompt and the
    first PROMPT_KEY_CHARS characters of the first message (no more than its shared part, when marked). The calls of
    one judgment share it, and so do the successive judgments of a growing conversation (their prompts begin alike),
    while unrelated judgments spread over other keys. Only a hash leaves: never the text."""
    first = request.messages[0].content if request.messages else ""
    head = first[: min(request.shared_chars, PROMPT_KEY_CHARS) if request.shared_chars else PROMPT_KEY_CHARS]
    digest = hashlib.sha256(json.dumps([request.system or "", head]).encode("utf-8", "replace")).hexdigest()
    return f"judge-mcp-{digest[:32]}"


RESPONSE_SUMMARY_KEYS = ("id", "model", "usage", "stop_reason", "system_fingerprint")


def response_summary(body: Any) -> dict[str, Any] | None:
    """The provider's reply without its text (which the call record keeps once, as `text`)."""
    if not isinstance(body, dict):
        return None
    return {key: body[key] for key in RESPONSE_SUMMARY_KEYS if key in body}


def user(content: str, system: str | None = None, *, images: tuple[tuple[str, tuple[Image, ...]], ...] = (), **kwargs: Any) -> ChatRequest:
    """Shorthand for the common single-user-message request (with its images, if any)."""
    return ChatRequest(messages=(Message("user", content, images),), system=system, **kwargs)


def has_images(request: ChatRequest) -> bool:
    return any(m.images for m in request.messages)


@dataclass
class Usage:
    """One call's token counts as the provider reported them. The three optional counts are None where the provider
    does not report them: hidden reasoning (part of completion_tokens), prompt tokens read from the provider's prompt
    cache and prompt tokens written to it (both part of prompt_tokens)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    reasoning_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    cache_write_tokens: int | None = None


MIN_LOGPROB = -1.0e4  # floor for a log-probability a server reports as -inf (or below): probability 0 either way


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log-probability, and the most likely alternatives at its position
    (token text, log-probability), as the backend reported them (the generated token is usually among them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()

    def to_list(self) -> list[Any]:
        """Compact JSON form for the call cache: [token, logprob, [[alt, logprob], ...]]."""
        return [self.token, self.logprob, [list(alt) for alt in self.top]]

    @classmethod
    def from_list(cls, data: list[Any]) -> "TokenLogprob":
        token, logprob, top = data
        return cls(str(token), float(logprob), tuple((str(t), float(lp)) for t, lp in top))


@dataclass
class Completion:
    text: str
    model: str
    usage: Usage
    finish_reason: str | None = None
    structured: bool = False  # the answer was decoded under the request's JSON schema
    attempts: int = 1
    # Per generated token, when the request asked for log-probabilities and the backend gave them; else None.
    logprobs: tuple[TokenLogprob, ...] | None = None
    # The raw call record: request as sent (minus credentials), response body, attempts and their errors.
    raw: dict[str, Any] = field(default_factory=dict)
    # The model's reasoning, never part of `text` (backends/reasoning.py): its start (reasoning.kept) and its length
    reasoning: str | None = None
    reasoning_chars: int = 0
    # What the judgment's result should say about this answer (warnings: a temperature the model cannot honour)
    notes: list[str] = field(default_factory=list)

    @property
    def cut_in_reasoning(self) -> bool:
        """Stopped at the token limit after reasoning: the answer is missing or partial (never continued or re-asked:
        the same budget would be spent the same way)."""
        return self.finish_reason == "length" and bool(self.usage.reasoning_tokens or self.reasoning_chars)

    def take_reasoning(self, reasoning: str | None) -> None:
        """Keep `reasoning` (what a reply carried apart from its answer) beside the text, bounded."""
        if reasoning:
            self.reasoning_chars += len(reasoning)
            self.reasoning = kept(reasoning if self.reasoning is None else self.reasoning + "\n" + reasoning)


class Backend:
    """Base class. Subclasses set `kind`, capability flags, and implement `_send` (and `aclose` if needed)."""

    kind: str = "base"
    # Whether a per-attempt timeout is worth another attempt. True for servers (a slow answer is often a busy
    # moment); the embedded model sets False (see LocalBackend).
    retry_timeouts: bool = True
    timeout_note = "not retried"  # said after "timed out after Ns" when retry_timeouts is False
    supports_json_schema: bool = False
    # Whether the backend can return token log-probabilities (an instance turns it off when its server refuses them).
    supports_logprobs: bool = False
    # Whether the answers belong to the caller alone (the sampling backend's: the client's own model), never shared
    # across tenants by the call cache, even with JUDGE_MCP_SHARED_CACHE=1 (calls/cache.py).
    private_answers: bool = False
    # JUDGE_MCP_CACHE_WARMUP / cache_warmup: a judgment whose calls share a cacheable prefix sends its first call first
    # and the rest once it is answered (calls/fanout.run_each; build_backend sets it from the backend's settings)
    cache_warmup: bool = True

    def __init__(
        self,
        name: str,
        model: str,
        *,
        concurrency: int = 4,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
    ):
        if concurrency < 1:
            raise ValueError(f"backend '{name}': concurrency must be >= 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"backend '{name}': timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"backend '{name}': max_retries must be >= 0, got {max_retries}")
        self.name = name
        self.model = model
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.policy = RetryPolicy(max_retries=max_retries, base_s=backoff_base_s, max_s=backoff_max_s)
        self._limit: AdaptiveLimit | None = None
        # A server that asked for a wait longer than a retry waits (Retry-After past policy.max_s) is not sent another
        # request while more of it is left than a call may take: (monotonic time it ends, the refusal that asked).
        self._asked_wait: tuple[float, RetryableError] | None = None

    # ---- identity -------------------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """`backend/model` as reported in every tool output."""
        return f"{self.kind}/{self.model}"

    def identity(self) -> str:
        """What distinguishes this backend's answers for the cache: kind, endpoint and model, never the key."""
        return f"{self.kind}|{self.model}"

    def answer_identity(self, completion: Completion, identity: str | None) -> str | None:
        """The identity a new answer is cached under (None: not cached): the lookup's own, for a backend whose model is
        known before the call; the sampling backend's is the model the client reports with the answer."""
        return identity

    def answered_model_id(self, models: Iterable[str]) -> str:
        """`model_id` for a judgment whose answers reported `models` (the sampling backend learns its model so)."""
        return self.model_id

    def self_preference_warning(self, model_id: str) -> str | None:
        """A warning every verdict of this judge carries, whoever wrote the answers (the sampling backend's)."""
        return None

    def describe(self) -> str:
        """Kind, endpoint and model for error messages; never a credential."""
        return f"{self.kind}, model {self.model}"

    # the setting that gives a reasoning model more room, named where an answer was cut off after reasoning
    budget_setting = "reasoning_budget_tokens (JUDGE_MCP_REASONING_BUDGET_TOKENS)"

    @property
    def reasoning_budget(self) -> int:
        """Output tokens added to every answer budget for the model's reasoning (HTTP backends: backends/remote.py)."""
        return 0

    def cut_note(self, completion: Completion) -> str:
        """The result's warning for an answer cut off at the token limit after reasoning: what was spent, what to raise."""
        spent = completion.usage.reasoning_tokens
        what = f"{spent:,} reasoning tokens" if spent else f"{completion.reasoning_chars:,} characters of reasoning"
        return (f"backend '{self.name}' ({self.model_id}) stopped at the token limit after {what}: its answer is cut off "
                f"(unparsed, unless what arrived could be read); raise {self.budget_setting} (now {self.reasoning_budget:,}) "
                "to leave the answer room")

    # ---- calling --------------------------------------------------------------------------------------------
    @property
    def limit(self) -> AdaptiveLimit:
        """The calls in flight: up to `concurrency` (the ceiling), lowered on 429/503/529 and timeouts, grown back while
        calls succeed (limiter.py)."""
        if self._limit is None:
            self._limit = AdaptiveLimit(self.concurrency)
        return self._limit

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        return self.limit.limiter

    @property
    def attempt_limit_s(self) -> float:
        """The longest one attempt may take (HTTP backends add the time to read the reply after its first byte)."""
        return self.timeout_s

    @property
    def call_bound_s(self) -> float:
        """The longest one backend call takes once it has a slot, every attempt and wait included: two attempts'
        worth (a timeout is retried once; faster failures fit more retries in the same time). Enforced."""
        return 2 * self.attempt_limit_s

    async def complete(self, request: ChatRequest) -> Completion:
        """Send one request with the concurrency limit, per-attempt timeout and bounded retries, within
        `call_bound_s` of the first attempt getting its slot.

        Raises BackendError when every attempt failed or the failure is fatal.
        """
        call = _Call()
        self._refuse_while_asked_to_wait()

        def on_retry(exc: Exception, attempt_no: int, delay: float) -> None:
            call.errors.append({"attempt": attempt_no, "error": _describe(exc, self.timeout_s), "retry_in_s": round(delay, 3)})

        try:
            completion, attempts = await run_with_retries(
                lambda: self._attempt(request, call), self.policy, on_retry=on_retry, deadline=lambda: call.deadline
            )
        except BackendError:
            raise
        except Exception as exc:
            raise self._backend_error(exc, len(call.errors) + 1) from exc
        return self._finished(completion, request, attempts, call.errors)

    async def _attempt(self, request: ChatRequest, call: _Call) -> Completion:
        """One attempt, holding a concurrency slot, within its own limit and what is left of the call's bound."""
        async with self.limiter:
            start = time.perf_counter()
            now = anyio.current_time()
            if call.deadline is None:
                call.deadline = now + self.call_bound_s
            limit = min(self.attempt_limit_s, call.deadline - now)
            if limit <= 0:
                raise FatalError(f"no time left for another attempt within the call's bound of {self.call_bound_s:g}s{call.before()}")
            try:
                # one scope for the attempt's limit and the HTTP phases' (deadline.py): the phases narrow its deadline
                with AttemptClock(limit):
                    completion = await (self._send_in_slow_start(request) if self.limit.slow_start else self._send(request))
            except RetryableError as exc:
                if exc.status in OVERLOAD_STATUS:
                    self.limit.overloaded(exc.retry_after, status=exc.status)
                if exc.retry_after is not None and exc.retry_after > self.policy.max_s:
                    self._asked_wait = (time.monotonic() + exc.retry_after, exc)
                raise
            except TimeoutError as exc:
                if limit < self.attempt_limit_s:  # cut by the call's bound, not by this attempt's own limit
                    bound = f"gave up at the call's bound of {self.call_bound_s:g}s (all attempts included)"
                    raise FatalError(f"{bound}{call.before()}{self.timeout_hint()}") from None
                if self.retry_timeouts:
                    self.limit.overloaded(event="timeout")
                    raise
                raise FatalError(f"{_describe(exc, self.timeout_s)} ({self.timeout_note}){self.timeout_hint()}") from None
            self.limit.success()
            if not completion.usage.latency_ms:
                completion.usage.latency_ms = (time.perf_counter() - start) * 1000.0
            return completion

    async def _send_in_slow_start(self, request: ChatRequest) -> Completion:
        """_send, counted once as accepted by the limit's slow start: when it has been in flight SLOW_START_GRACE_S
        without a refusal, or when it succeeds sooner (limiter.py)."""
        limit, counted = self.limit, False

        async def grace() -> None:
            """SLOW_START_GRACE_S in quarters, each on time: a quarter that ends late (the event loop busy, so a
            refusal may have arrived unread) starts the count again."""
            nonlocal counted
            quiet, step = 0.0, SLOW_START_GRACE_S / 4
            while quiet < SLOW_START_GRACE_S:
                before = anyio.current_time()
                await anyio.sleep(step)
                quiet = quiet + step if anyio.current_time() - before < 1.5 * step else 0.0
            counted = True
            limit.accepted()

        completion: Completion | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(grace)
            try:
                completion = await self._send(request)
            except Exception as exc:  # raised below, outside the task group (not as an exception group)
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert completion is not None
        if not counted:
            limit.accepted()
        return completion

    def _refuse_while_asked_to_wait(self) -> None:
        """A BackendError, with nothing sent, while more is left of the wait a server asked for (a Retry-After longer
        than a retry waits) than this call may take (`call_bound_s`): its requests would only be refused again, and
        run_with_retries would not wait that long. A shorter remainder is the retries' to wait out."""
        if self._asked_wait is None:
            return
        until, refusal = self._asked_wait
        left = until - time.monotonic()
        if left <= 0:
            self._asked_wait = None
        if left < self.call_bound_s:
            return
        cause = (f"{refusal.cause}; not sent: the server asked to wait {refusal.retry_after:g}s, {left:.0f}s of it are left, longer than "
                 f"a call may take ({self.call_bound_s:g}s)")
        raise BackendError(self.name, cause, status=refusal.status, attempts=0, where=self.describe())

    def timeout_hint(self) -> str:
        """Said after a timeout: the setting to raise and the value it must exceed (re-running the same call with the
        same setting times out the same way)."""
        setting = "JUDGE_MCP_TIMEOUT_S" if self.name == "default" else f"timeout_s in [backends.{self.name}]"
        return f"; raise {setting} above {self.timeout_s:g} (the limit each attempt ran out of)"

    def _backend_error(self, exc: Exception, attempts: int) -> BackendError:
        """The BackendError a failed call raises, naming the backend and the cause."""
        if isinstance(exc, FatalError):
            return BackendError(self.name, exc.cause, status=exc.status, attempts=attempts, where=self.describe())
        if isinstance(exc, (RetryableError, TimeoutError)):
            hint = self.timeout_hint() if isinstance(exc, TimeoutError) else ""
            return BackendError(
                self.name, _describe(exc, self.timeout_s) + hint, status=getattr(exc, "status", None), attempts=attempts, where=self.describe()
            )
        # an unforeseen failure is still a BackendError naming the backend and the cause
        return BackendError(self.name, f"unexpected {type(exc).__name__}: {exc}", attempts=attempts, where=self.describe())

    @staticmethod
    def _finished(completion: Completion, request: ChatRequest, attempts: int, errors: list[dict[str, Any]]) -> Completion:
        completion.attempts = attempts
        # A model's text may hold lone surrogates (JSON "\ud800" escapes): they cannot be encoded to UTF-8, so they
        # would fail the cache and verdict-log writes; each becomes U+FFFD here, once, for every backend.
        completion.text = valid_text(completion.text)
        thought, completion.text = split_think(completion.text)  # an inline <think> block is reasoning, never the answer
        completion.take_reasoning(thought)
        if "request" not in completion.raw:  # (not setdefault: that would build the record for every call)
            completion.raw["request"] = request.to_record()
        completion.raw["attempts"] = attempts
        if errors:
            completion.raw["retried_errors"] = errors
        return completion

    async def _send(self, request: ChatRequest) -> Completion:  # pragma: no cover - abstract
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections or the loaded model."""


class _Call:
    """One backend call's state across its attempts: the deadline set when the first attempt gets a slot, and the
    errors of the attempts before."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.errors: list[dict[str, Any]] = []

    def before(self) -> str:
        return f"; before that, {self.errors[-1]['error']}" if self.errors else ""


_SURROGATE = re.compile("[\ud800-\udfff]")  # in a Python str every surrogate is a lone one (pairs decode to one character)


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _describe(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):  # an AttemptTimeout says which phase ran out; a bare one is the attempt's limit
        return str(exc) if isinstance(exc, AttemptTimeout) else f"timed out after {timeout_s:g}s"
    return getattr(exc, "cause", None) or f"{type(exc).__name__}: {exc}"
