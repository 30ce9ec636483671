"""Backends: build one from a BackendConfig. Imports are lazy so that `local` loads llama.cpp only when used (and
`sampling`, the MCP client's own model, the MCP types only when used), and the HTTP client (aiohttp, ~110 ms to
import at low load: it builds two TLS contexts) only when a remote backend is built, or ahead of that by `preload`
in a thread while the server waits for its first tool call."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion, Message, Usage, user

from judge_mcp.backends.errors import BackendError
from judge_mcp.config.settings import BackendConfig, ConfigError, missing_key

__all__ = ["Backend", "BackendError", "ChatRequest", "Completion", "Message", "Usage", "build_backend", "user"]


# The module each remote kind is built from (what `preload` imports ahead of the first call).
REMOTE_MODULES = {"openai": "judge_mcp.backends.openai_compat", "anthropic": "judge_mcp.backends.anthropic"}
_preloads: dict[str, threading.Thread] = {}
_preload_lock = threading.Lock()


def preload(kind: str) -> threading.Thread | None:
    """Import the module of a remote backend kind (with aiohttp) in a daemon thread, once per process; None for the
    embedded kind (its model loads at the first call, on its own thread). Started by the server once a client has
    finished its handshake, so the import runs while the client thinks about its first tool call, not in that
    call's time. `build_backend` waits for it instead of importing the same modules from a second thread."""
    module = REMOTE_MODULES.get(kind)
    if module is None:
        return None
    with _preload_lock:
        thread = _preloads.get(module)
        if thread is None:
            thread = _preloads[module] = threading.Thread(target=_import_quietly, args=(module,), name=f"preload {kind}", daemon=True)
            thread.start()
    return thread


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # pragma: no cover - build_backend imports it again and reports the error where it counts
        pass


def _await_preload(kind: str) -> None:
    module = REMOTE_MODULES.get(kind)
    thread = _preloads.get(module) if module else None
    if thread is not None:
        thread.join()


def build_backend(cfg: BackendConfig) -> Backend:
    """The backend for `cfg`; ConfigError when it cannot work at all (a provider's public API without a key). With
    `batch = true`, the provider's backend wrapped for its batch API (backends/batch.py)."""
    _await_preload(cfg.kind)
    backend = _build(cfg)
    backend.cache_warmup = cfg.cache_warmup != "off"
    if cfg.batch:
        # lazy: a backend kind's client (aiohttp, xllamacpp, the MCP session) loads when one of that kind is built
        from judge_mcp.backends.batch import BatchBackend
        from judge_mcp.backends.client import HTTPBackend

        assert isinstance(backend, HTTPBackend), "config_values.check_batch allows batch only for openai and anthropic"
        batched = BatchBackend(backend)
        batched.cache_warmup = False  # a batch goes out at once; the provider orders it
        return batched
    return backend


@dataclass(frozen=True)
class BackendKind:
    """One backend kind: the module and class built for it, and the settings it takes besides the common ones."""

    module: str
    cls: str
    options: Callable[[BackendConfig], dict[str, Any]]


def _remote_options(cfg: BackendConfig) -> dict[str, Any]:
    return dict(base_url=cfg.base_url, api_key=cfg.api_key, structured_output=cfg.structured_output,
                reasoning_effort=cfg.reasoning_effort, reasoning_budget_tokens=cfg.reasoning_budget_tokens)


# The backend-kind table: what each `kind` builds (its module is imported when one of that kind is built).
BACKEND_KINDS: dict[str, BackendKind] = {
    "openai": BackendKind(REMOTE_MODULES["openai"], "OpenAICompatBackend", _remote_options),
    "anthropic": BackendKind(REMOTE_MODULES["anthropic"], "AnthropicBackend",
                             lambda cfg: {**_remote_options(cfg), "thinking_budget_tokens": cfg.thinking_budget_tokens}),
    "local": BackendKind("judge_mcp.backends.local", "LocalBackend", lambda cfg: dict(
        n_ctx=cfg.n_ctx, n_threads=cfg.n_threads, n_threads_batch=cfg.n_threads_batch, max_output_tokens=cfg.max_output_tokens,
        mmproj=cfg.mmproj)),
    "sampling": BackendKind("judge_mcp.backends.sampling", "SamplingBackend", lambda cfg: dict(priorities=cfg.priorities)),
}


def _build(cfg: BackendConfig) -> Backend:
    problem = missing_key(cfg)
    if problem:
        raise ConfigError(problem)
    kind = BACKEND_KINDS.get(cfg.kind)
    if kind is None:
        raise ValueError(f"unknown backend kind {cfg.kind!r}")
    common: dict[str, Any] = dict(concurrency=cfg.concurrency, timeout_s=cfg.timeout_s, max_retries=cfg.max_retries)
    # a backend kind's client (aiohttp, xllamacpp, the MCP session) loads when one of that kind is built
    cls = getattr(importlib.import_module(kind.module), kind.cls)
    model = cfg.model if cfg.kind == "local" else cfg.model or ""
    backend = cls(cfg.name, model, **kind.options(cfg), **common)
    if cfg.kind == "local" and cfg.structured_output == "off":  # the embedded grammar is never refused: only `off` matters
        backend.supports_json_schema = False
    return backend
