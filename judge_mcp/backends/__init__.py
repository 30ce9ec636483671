"""Backends: build one from a BackendConfig. Imports are lazy so that `local` loads llama.cpp only when used."""

from __future__ import annotations

from typing import Any

from judge_mcp.backends.base import Backend, ChatRequest, Completion, Message, Usage, user

from judge_mcp.backends.errors import BackendError
from judge_mcp.config import BackendConfig, ConfigError, missing_key

__all__ = ["Backend", "BackendError", "ChatRequest", "Completion", "Message", "Usage", "build_backend", "user"]


def build_backend(cfg: BackendConfig) -> Backend:
    """The backend for `cfg`; ConfigError when it cannot work at all (a provider's public API without a key)."""
    problem = missing_key(cfg)
    if problem:
        raise ConfigError(problem)
    common: dict[str, Any] = dict(concurrency=cfg.concurrency, timeout_s=cfg.timeout_s, max_retries=cfg.max_retries)
    if cfg.kind == "openai":
        from judge_mcp.backends.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(
            cfg.name, cfg.model or "", base_url=cfg.base_url, api_key=cfg.api_key, structured_output=cfg.structured_output, **common
        )
    if cfg.kind == "anthropic":
        from judge_mcp.backends.anthropic import AnthropicBackend

        return AnthropicBackend(
            cfg.name, cfg.model or "", base_url=cfg.base_url, api_key=cfg.api_key, structured_output=cfg.structured_output, **common
        )
    if cfg.kind == "local":
        from judge_mcp.backends.local import LocalBackend

        backend = LocalBackend(cfg.name, cfg.model, n_ctx=cfg.n_ctx, n_threads=cfg.n_threads, n_threads_batch=cfg.n_threads_batch,
                               max_output_tokens=cfg.max_output_tokens, mmproj=cfg.mmproj, **common)
        if cfg.structured_output == "off":  # the embedded grammar is never refused, so only `off` changes anything
            backend.supports_json_schema = False
        return backend
    raise ValueError(f"unknown backend kind {cfg.kind!r}")
