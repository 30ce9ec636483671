"""The CA bundles are read only when TLS is spoken: a backend on an http:// URL never builds the TLS context (it
read the system store and certifi's bundle at its first call: ~20-50 ms of a cold start); an https one does."""

from __future__ import annotations

from judge_mcp.backends.base import user
from judge_mcp.backends.client import tls_context
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from tests.helpers import http_backend, start_scripted


async def test_an_http_backend_reads_no_ca_bundle():
    tls_context.cache_clear()
    server = start_scripted(lambda payload: "ok")
    backend = http_backend(server, max_retries=0)
    try:
        completion = await backend.complete(user("hello"))
    finally:
        await backend.aclose()
        server.stop()
    assert completion.text == "ok"
    assert tls_context.cache_info().misses == 0


async def test_an_https_backend_builds_the_tls_context_once():
    tls_context.cache_clear()
    backends = [OpenAICompatBackend(f"tls{k}", "m", base_url="https://api.example.invalid/v1", api_key="k") for k in range(2)]
    try:
        for backend in backends:
            backend.session()
    finally:
        for backend in backends:
            await backend.aclose()
    assert tls_context.cache_info().misses == 1 and tls_context.cache_info().hits == 1
