"""Issue 15, item 3: an HTTP backend's connections live in several small httpx pools (httpcore's pool does
O(connections²) work per request), and still every request the concurrency limit lets through goes out at once on
a connection of its own, kept alive for the next burst."""

from __future__ import annotations

import anyio
import pytest

from judge_mcp.backends.base import user
from judge_mcp.backends.http import POOL_SHARD
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from tests.scripted import Reply


@pytest.mark.parametrize("concurrency", [1, 8, 20])
async def test_every_allowed_request_is_in_flight_at_once_across_the_pools(scripted, concurrency: int) -> None:
    server = scripted(lambda p: Reply(content="ok", delay_s=0.1))
    backend = OpenAICompatBackend("pools", "m", base_url=server.base_url, max_retries=0, concurrency=concurrency)
    try:
        for burst in range(2):
            async with anyio.create_task_group() as tg:
                for k in range(concurrency):
                    tg.start_soon(backend.complete, user(f"burst {burst} call {k}"))
    finally:
        await backend.aclose()
    assert len(server.requests) == 2 * concurrency and server.max_in_flight == concurrency
    assert len(server.connections) == concurrency  # one connection per allowed request, none reopened in the second burst
    assert len(backend._clients) == -(-concurrency // POOL_SHARD)  # pools of at most POOL_SHARD connections
    assert backend._in_flight == [0] * len(backend._clients)
