"""Fitting a bench run to the backend it runs on, and saying so: the bundled model's answers capped as `judge-mcp demo`
caps them (a method's own budget, 4,096 tokens for compare_pair, outlasts the timeout on a CPU), and a warning with
the fix when a server on this machine gets the hosted-API default of requests in flight or refuses connections."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from judge_mcp.config.bundled import BUNDLED_MAX_OUTPUT_TOKENS, is_uncapped_bundled, with_backend
from judge_mcp.config.settings import DEFAULT_BACKEND_NAME, DEFAULT_CONCURRENCY

__all__ = ["BUNDLED_MAX_OUTPUT_TOKENS", "cap_bundled_model", "connection_warning", "local_server_warning"]

# The bundled model's answers are capped as `serve` and `demo` cap them (config/bundled.py); even so, on 2 busy cores
# (load 10), a pairwise prompt's prefill plus 128 tokens took over 120 s per request (llmbar_natural, grp, 4 slots):
# a bench item may take up to this long per request unless its timeout was set.
BUNDLED_TIMEOUT_S = 600.0
DEFAULT_TIMEOUT_S = 120.0  # config's default timeout_s: a backend still at it was not given one
REMOTE_KINDS = ("openai", "anthropic")


def cap_bundled_model(app: Any, names: tuple[str | None, ...]) -> list[str]:
    """Give each of `names` that is the bundled model with no cap of its own the demo's cap, and a timeout that fits a
    CPU when it has the default one (before any backend is built: the App's settings are replaced); one note per
    backend changed, for the run's output."""
    notes = []
    for name in names:
        cfg = app.settings.backend(name)
        if not is_uncapped_bundled(cfg):
            continue
        timeout = BUNDLED_TIMEOUT_S if cfg.timeout_s == DEFAULT_TIMEOUT_S else cfg.timeout_s
        app.settings = with_backend(app.settings, replace(cfg, max_output_tokens=BUNDLED_MAX_OUTPUT_TOKENS, timeout_s=timeout))
        env = cfg.name == DEFAULT_BACKEND_NAME
        budget, wait = ("JUDGE_MCP_MAX_OUTPUT_TOKENS", "JUDGE_MCP_TIMEOUT_S") if env else ("max_output_tokens", "timeout_s")
        notes.append(
            f"backend '{cfg.name}' is the bundled 135M model: its answers are capped at {BUNDLED_MAX_OUTPUT_TOKENS} tokens, "
            f"as `judge-mcp demo` caps them (a method's own budget, 4,096 tokens for compare_pair, outlasts any timeout on "
            f"a CPU), and each request may take {timeout:.0f} s; set {budget} / {wait} for others"
        )
    return notes


def _nearby(url: str | None) -> str | None:
    """The host of `url` when it is this machine or a private network (a server someone runs, not a hosted API)."""
    host = urlparse(url or "").hostname or ""
    if host == "localhost":
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return host if address.is_loopback or address.is_private else None


def local_server_warning(app: Any, names: tuple[str | None, ...], concurrency: int | None) -> str | None:
    """A warning when a backend on this machine or network gets the hosted APIs' default of requests in flight (a
    server with a few slots and a small listen backlog queues them, stalls or refuses connections), or None."""
    if concurrency is not None:
        return None
    for name in names:
        cfg = app.settings.backend(name)
        host = _nearby(cfg.base_url)
        if cfg.kind in REMOTE_KINDS and host and not cfg.batch and cfg.concurrency >= DEFAULT_CONCURRENCY[cfg.kind]:
            return (
                f"backend '{cfg.name}' is a server at {host} and gets up to {cfg.concurrency} requests in flight, the default "
                "for hosted APIs; a local server with a few parallel slots queues them, stalls or refuses connections: pass "
                "--concurrency N (its parallel slots, e.g. 4) or set its concurrency (JUDGE_MCP_CONCURRENCY)"
            )
    return None


CONNECTION_WORDS = ("connection refused", "cannot connect", "connect call failed", "connection reset", "server disconnected")


def connection_warning(cause: str, backend: str | None) -> str | None:
    """A warning and the fix when an item failed because the backend refused or dropped the connection, or None."""
    if not any(word in cause.lower() for word in CONNECTION_WORDS):
        return None
    return (
        f"backend '{backend or DEFAULT_BACKEND_NAME}' refused or dropped a connection ({cause[:160]}): is the server "
        "running at its base URL? A server with a small listen backlog refuses connections beyond it: pass --concurrency N"
    )
