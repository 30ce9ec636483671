"""What one tool call writes: one transaction holding its verdict row and its new cache rows (a cache hit writes no
cache row), call records in the verdict log's JSON shape (calls/record.py), and, for a tool call that fails after
some answers came back, those answers cached all the same."""

from __future__ import annotations

import anyio
from mcp import Client

from testkit.scripted_judges import GOOD, PAIR, PAIR_A, UniversalJudge
from testkit.scripted_servers import Reply, prompt_text
from judge_mcp.storage.verdict_log import VerdictLog


FRESH_KEYS = {"attempts", "cache_key", "cached", "completion_chars", "finish_reason", "latency_ms", "prompt_chars", "purpose",
              "request", "response", "structured", "text"}


def traced(store) -> list[str]:
    """Every SQL statement the store's writing connection runs from now on."""
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    return statements


def count(statements: list[str], prefix: str) -> int:
    return sum(1 for s in statements if s.lstrip().upper().startswith(prefix))


def test_one_tool_call_is_one_transaction_and_a_cache_hit_writes_no_cache_row(mcp_app) -> None:
    server, backend = mcp_app(UniversalJudge())
    store = server.app.store

    async def main() -> tuple[list[str], list[str], dict, dict]:
        async with Client(server) as client:
            first_sql = traced(store)
            first = await client.call_tool("compare_pair", PAIR)
            again_sql = traced(store)
            again = await client.call_tool("compare_pair", PAIR)
            store.conn.set_trace_callback(None)
        return first_sql, again_sql, first.structured_content, again.structured_content

    first_sql, again_sql, first, again = anyio.run(main)
    assert first["winner"] == "B" and first["usage"]["calls"] == 2
    # the first call: one BEGIN ... COMMIT holding both orders' cache rows and the verdict
    assert (count(first_sql, "BEGIN"), count(first_sql, "COMMIT")) == (1, 1)
    assert sum("INTO CALL_CACHE" in s.upper() for s in first_sql) == 2 and sum("INTO VERDICTS" in s.upper() for s in first_sql) == 1
    # the repeat is answered from the cache: its one transaction writes the verdict and no cache row
    assert again["winner"] == "B" and (again["usage"]["calls"], again["usage"]["cached_calls"]) == (0, 2)
    assert (count(again_sql, "BEGIN"), count(again_sql, "COMMIT")) == (1, 1)
    assert not any("CALL_CACHE" in s.upper() for s in again_sql)
    assert len(backend.requests) == 2
    assert store.query("SELECT COUNT(*) AS n FROM call_cache")[0]["n"] == 2
    rows = VerdictLog(store).recent("compare_pair")
    assert len(rows) == 2
    # the typed call record keeps the log's JSON shape: a sent call, and a cached one (no attempt, no reply metadata)
    for call in rows[1]["calls"]:
        assert set(call) == FRESH_KEYS and call["cached"] is False and call["attempts"] == 1
        assert call["response"]["model"] == "scripted-model" and call["request"]["messages"][0]["role"] == "user"
        assert call["text"] and call["completion_chars"] == len(call["text"]) and call["purpose"].startswith("compare_pair:")
    for call in rows[0]["calls"]:
        assert set(call) == FRESH_KEYS - {"attempts"} and call["cached"] is True and call["response"] is None
    assert sorted(c["cache_key"] for c in rows[0]["calls"]) == sorted(c["cache_key"] for c in rows[1]["calls"])


def test_a_failed_tool_call_still_caches_the_answers_that_came_back(mcp_app) -> None:
    judge = UniversalJudge()

    def responder(payload: dict):
        shown_first = PAIR_A.search(prompt_text(payload))
        if shown_first and GOOD in shown_first.group(1):
            return Reply(status=400, delay_s=0.5)  # the BA order fails for good (a 4xx is not retried), after AB answered
        return judge(payload)

    server, backend = mcp_app(responder)
    store = server.app.store

    async def main():
        async with Client(server) as client:
            return await client.call_tool("compare_pair", PAIR)

    result = anyio.run(main)
    assert result.is_error and "HTTP 400" in result.content[0].text
    assert VerdictLog(store).recent() == []
    rows = store.query("SELECT response FROM call_cache")
    assert len(rows) == 1 and "[[" in rows[0]["response"]  # the AB order's answer, whole
