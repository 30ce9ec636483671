"""The calls tests' backend: a remote backend (either wire format) on a scripted server, with an API key configured
(`api_key`), so that every test can also check where the key goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from judge_mcp.backends.base import Backend


@pytest.fixture
def api_key() -> str:
    return "sk-cache-test-0d15ea5e-never-stored"


@pytest.fixture
def http(make_backend, api_key: str) -> Callable[..., tuple[Backend, Any]]:
    """http(responder, kind="openai", **backend_kwargs) -> (backend, server): named "cache-<kind>", model "cache-model",
    one retry, `api_key` configured."""

    def make(responder: Any, kind: str = "openai", model: str = "cache-model", **kwargs: Any) -> tuple[Backend, Any]:
        defaults = {"max_retries": 1, "backoff_base_s": 0.01, "api_key": api_key}
        return make_backend(responder, kind, name=f"cache-{kind}", model=model, **{**defaults, **kwargs})

    return make
