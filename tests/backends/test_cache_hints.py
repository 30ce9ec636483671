"""Prompt caching (issue 45) over real HTTP scripted servers: where Anthropic's cache_control breakpoints go (and
only above the model's minimum), the OpenAI prompt_cache_key per judgment and per growing conversation, refusals of
either learned, the warm-up order (the first call answered before the rest are sent, by arrival order), and the
cached and cache-written tokens through a tool to its result and judge_stats."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from judge_mcp.backends.local import LoadedModel, _SlotRoutes
from judge_mcp.backends.prompt_cache import STEP_CHARS, min_cacheable_tokens, step_cuts
from judge_mcp.config.settings import ConfigError, load_settings
from testkit.billing_servers import AnthropicCacheBilling, OpenAICacheBilling
from testkit.scripted_judges import UNIVERSAL_ANSWER
from testkit.scripted_servers import Reply
from tests.helpers import Rendezvous

CRITERIA = [{"name": "correctness"}, {"name": "completeness"}, {"name": "clarity"}]
SENTENCE = "The service retries a failed request with backoff and names the backend in every error it reports. "
LONG = (SENTENCE * 90)[:8000]  # ~2,000 tokens
SHORT = SENTENCE * 5


def answer(payload: dict[str, Any]) -> str:
    return UNIVERSAL_ANSWER


def recorder(seen: list[dict[str, Any]]):
    def respond(payload: dict[str, Any]) -> str:
        seen.append(payload)
        return UNIVERSAL_ANSWER
    return respond


async def call(server, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def trajectory(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n // 2):
        out.append({"role": "assistant", "content": f"Step {k}: " + SENTENCE * 8, "tool_calls": [{"id": f"c{k}", "name": "run", "arguments": {"k": k}}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": SENTENCE * 9})
    return out


# ---- Anthropic: cache_control where the shared part ends ------------------------------------------------------------
async def test_anthropic_breakpoint_ends_exactly_where_the_judgments_calls_stop_sharing(mcp_app) -> None:
    seen: list[dict[str, Any]] = []
    server, _ = mcp_app(recorder(seen), "anthropic", JUDGE_MCP_MODEL="claude-sonnet-4-5")
    await call(server, "score_response", {"instruction": "How does the service handle failures?", "response": LONG, "criteria": CRITERIA})
    assert len(seen) == 3
    prefixes = set()
    for payload in seen:
        blocks = payload["messages"][0]["content"]
        assert isinstance(blocks, list) and all(b["type"] == "text" for b in blocks)
        marked = [k for k, b in enumerate(blocks) if "cache_control" in b]
        assert 1 <= len(marked) <= 4 and all(blocks[k]["cache_control"] == {"type": "ephemeral"} for k in marked)
        shared = "".join(b["text"] for b in blocks[: marked[-1] + 1])
        assert shared.rstrip().endswith("<|The End of AI Answer|>")  # the last breakpoint: the end of the shared part
        assert blocks[marked[-1] + 1]["text"].startswith("<|The Start of Evaluation Criterion|>")
        assert LONG[-200:] in shared and "Evaluation Criterion" not in shared
        prefixes.add(shared)
    assert len(prefixes) == 1  # every call of the judgment marks the same prefix


async def test_anthropic_sends_no_breakpoint_below_the_models_cacheable_minimum(mcp_app) -> None:
    seen: list[dict[str, Any]] = []
    server, _ = mcp_app(recorder(seen), "anthropic", JUDGE_MCP_MODEL="claude-sonnet-4-5")
    await call(server, "score_response", {"instruction": "How does the service handle failures?", "response": SHORT, "criteria": CRITERIA})
    assert seen and all(isinstance(p["messages"][0]["content"], str) for p in seen)  # as before: no blocks, no cache_control
    # ~2,250 tokens shared: enough for Sonnet 4.5 (1,024) above, not for Haiku 4.5 (4,096)
    assert min_cacheable_tokens("claude-haiku-4-5") == 4096 and min_cacheable_tokens("claude-3-5-haiku-latest") == 2048
    haiku: list[dict[str, Any]] = []
    server, _ = mcp_app(recorder(haiku), "anthropic", JUDGE_MCP_MODEL="claude-haiku-4-5")
    await call(server, "score_response", {"instruction": "How does the service handle failures?", "response": LONG, "criteria": CRITERIA})
    assert haiku and not any("cache_control" in json.dumps(p) for p in haiku)


async def test_anthropic_refusing_cache_control_gets_the_request_again_without_and_none_after(mcp_app) -> None:
    seen: list[dict[str, Any]] = []

    def refuse(payload: dict[str, Any]) -> Reply | str:
        seen.append(payload)
        if "cache_control" in json.dumps(payload):
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": "messages.0.content.0.cache_control: Extra inputs are not permitted"}}
            return Reply(status=400, raw_body=json.dumps(body).encode())
        return UNIVERSAL_ANSWER

    server, _ = mcp_app(refuse, "anthropic", JUDGE_MCP_MODEL="claude-sonnet-4-5", JUDGE_MCP_CACHE_WARMUP="off")
    result = await call(server, "score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA[:1]})
    assert result["scores"][0]["parse_ok"] is True
    assert ["cache_control" in json.dumps(p) for p in seen] == [True, False]
    await call(server, "score_response", {"instruction": "another q", "response": LONG, "criteria": CRITERIA[:1]})
    assert len(seen) == 3 and "cache_control" not in json.dumps(seen[2])  # learned: not offered again


def test_step_boundaries_depend_only_on_the_text_before_them() -> None:
    text = ("line of a conversation\n" * 2000)
    shorter, longer = step_cuts(text, 20_000), step_cuts(text, 40_000)
    assert shorter and longer[: len(shorter)] == shorter  # a grown conversation keeps the earlier boundaries
    assert all(text[c - 1] == "\n" for c in longer) and all(b - a >= STEP_CHARS - 256 for a, b in zip(longer, longer[1:]))


# ---- OpenAI-compatible: prompt_cache_key ------------------------------------------------------------------------------
async def test_prompt_cache_key_is_one_per_judgment_and_one_per_growing_conversation(mcp_app) -> None:
    seen: list[dict[str, Any]] = []
    server, _ = mcp_app(recorder(seen), JUDGE_MCP_CACHE_WARMUP="off")
    for n in (10, 20, 30):  # a self-critique loop: the same run, longer each time
        await call(server, "score_response", {"instruction": "Fix the failing build.", "response": trajectory(n), "criteria": CRITERIA})
    await call(server, "score_response", {"instruction": "Write a poem about the sea.", "response": LONG, "criteria": CRITERIA})
    keys = [p.get("prompt_cache_key") for p in seen]
    assert len(keys) == 12 and all(isinstance(k, str) and k for k in keys)
    assert len(set(keys[:9])) == 1  # every call of the three judgments of the conversation: one key
    assert len(set(keys[9:])) == 1 and keys[9] != keys[0]  # another judgment, another key
    assert "build" not in keys[0] and len(keys[0]) <= 64  # a hash, never the text


async def test_a_server_refusing_prompt_cache_key_gets_the_request_again_without_it_and_none_after(mcp_app) -> None:
    seen: list[dict[str, Any]] = []

    def refuse(payload: dict[str, Any]) -> Reply | str:
        seen.append(payload)
        if "prompt_cache_key" in payload:
            return Reply(status=400, raw_body=json.dumps({"error": {"message": "Unrecognized request argument supplied: prompt_cache_key"}}).encode())
        return UNIVERSAL_ANSWER

    server, _ = mcp_app(refuse)
    result = await call(server, "compare_pair", {"prompt": "q", "response_a": "a", "response_b": "b", "swap": False})
    assert result["trials"][0]["parse_ok"] is True
    assert ["prompt_cache_key" in p for p in seen] == [True, False]
    await call(server, "compare_pair", {"prompt": "q2", "response_a": "a", "response_b": "b", "swap": False})
    assert len(seen) == 3 and "prompt_cache_key" not in seen[2]


# ---- the order of sending ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, billing", [("openai", OpenAICacheBilling), ("anthropic", AnthropicCacheBilling)])
async def test_warm_up_sends_the_rest_only_once_the_first_call_has_started_answering(mcp_app, kind, billing) -> None:
    server_billing = billing(answer, latency_s=0.05)
    server, _ = mcp_app(server_billing, kind)  # JUDGE_MCP_CACHE_WARMUP: auto by default
    await call(server, "score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA, "samples": 2})
    arrivals = [b for _, b in server_billing.arrivals]
    assert len(arrivals) == 6 and arrivals[0].answering is not None
    assert all(later.arrived >= arrivals[0].answering for later in arrivals[1:])  # arrival order, not a duration
    assert server_billing.rounds() == 2  # one round trip more than all at once, never more
    assert all(b.read > 0 for b in arrivals[1:])  # ... and each later call read the shared prefix
    assert server_billing.billed() / server_billing.uncached() < 0.4


async def test_warm_up_off_or_below_the_minimum_sends_every_call_at_once(mcp_app) -> None:
    meet = Rendezvous(3, answer)  # answers only once all three are in flight together
    server, _ = mcp_app(meet, JUDGE_MCP_CACHE_WARMUP="off")
    await call(server, "score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA})
    assert (meet.met, meet.broken) == (3, 0)
    short = Rendezvous(3, answer)
    server, _ = mcp_app(short)  # auto, but a short response shares less than a cache keeps
    await call(server, "score_response", {"instruction": "q", "response": SHORT, "criteria": CRITERIA})
    assert (short.met, short.broken) == (3, 0)


async def test_a_failed_first_call_is_the_error_and_the_rest_are_never_sent(mcp_app) -> None:
    seen: list[dict[str, Any]] = []

    def fail(payload: dict[str, Any]) -> Reply:
        seen.append(payload)
        return Reply(status=401)

    server, _ = mcp_app(fail)
    async with Client(server) as client:
        result = await client.call_tool("score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA})
    assert result.is_error and "401" in result.content[0].text
    assert len(seen) == 1


# ---- usage: through the tool to its result and judge_stats --------------------------------------------------------------
async def test_cached_and_written_tokens_reach_the_result_the_verdict_log_and_judge_stats(mcp_app) -> None:
    billing = AnthropicCacheBilling(answer, latency_s=0.02)
    server, _ = mcp_app(billing, "anthropic")
    async with Client(server) as client:  # the official MCP client, end to end
        result = await client.call_tool("score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA})
        assert not result.is_error, result.content[0].text
        usage = result.structured_content["usage"]
        billed = [b for _, b in billing.arrivals]
        assert usage["cached_prompt_tokens"] == sum(b.read for b in billed) > 0
        assert usage["cache_write_tokens"] == sum(b.written for b in billed) > 0
        assert usage["prompt_tokens"] == sum(b.prompt for b in billed)
        stats = (await client.call_tool("judge_stats", {})).structured_content
    group = next(g for g in stats["all_time"]["groups"] if g["tool"] == "score_response")
    cache = group["prompt_cache"]
    assert (cache["read_price"], cache["write_price"]) == (0.1, 1.25)
    assert cache["cached_prompt_tokens"] == {"mean": float(usage["cached_prompt_tokens"]), "of": 1}
    assert cache["billed_input"] == pytest.approx(billing.billed(), abs=0.1)
    assert cache["billed_input"] < cache["prompt_tokens"]["mean"]


async def test_judge_stats_names_the_openai_compatible_price_it_assumed(mcp_app) -> None:
    billing = OpenAICacheBilling(answer, latency_s=0.02, read_price=0.25)
    server, _ = mcp_app(billing, JUDGE_MCP_CACHED_INPUT_PRICE="0.25")
    await call(server, "score_response", {"instruction": "q", "response": LONG, "criteria": CRITERIA})
    stats = await call(server, "judge_stats", {})
    cache = next(g for g in stats["all_time"]["groups"] if g["tool"] == "score_response")["prompt_cache"]
    assert (cache["read_price"], cache["write_price"]) == (0.25, 1.0)
    assert cache["billed_input"] == pytest.approx(billing.billed(write_price=1.0), abs=0.1)


# ---- settings and the embedded model's slots ------------------------------------------------------------------------------
def test_cache_settings_are_checked_and_named(tmp_path) -> None:
    with pytest.raises(ConfigError, match="JUDGE_MCP_CACHE_WARMUP must be one of auto, off"):
        load_settings({"JUDGE_MCP_CACHE_WARMUP": "sometimes"})
    with pytest.raises(ConfigError, match="JUDGE_MCP_CACHED_INPUT_PRICE must be a number from 0 to 1"):
        load_settings({"JUDGE_MCP_CACHED_INPUT_PRICE": "1.5"})
    config = tmp_path / "backends.toml"
    config.write_text('[backends.a]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\ncache_warmup = "off"\n'
                      '[backends.b]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n')
    settings = load_settings({"JUDGE_MCP_CONFIG": str(config), "JUDGE_MCP_CACHE_WARMUP": "auto"})
    assert settings.backend("a").cache_warmup == "off" and settings.backend("b").cache_warmup == "auto"
    assert load_settings({"JUDGE_MCP_CONFIG": str(config), "JUDGE_MCP_CACHE_WARMUP": "off"}).backend("b").cache_warmup == "off"


def test_a_shared_prefix_keeps_its_slot_and_new_prefixes_spread_over_the_least_recently_used() -> None:
    routes = _SlotRoutes()
    model = LoadedModel("m.gguf", None, 3, 4096, 1, 1, 0.0)
    first = [routes.slot_for(key, model) for key in ("a", "b", "c")]
    assert sorted(first) == [0, 1, 2]
    assert routes.slot_for("a", model) == first[0] and routes.slot_for("b", model) == first[1]  # a judgment stays
    assert routes.slot_for("d", model) == first[2]  # the least recently used slot
