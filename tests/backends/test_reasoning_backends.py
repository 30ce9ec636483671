"""Reasoning models at the backend layer: the inline <think> block taken out, OpenAI's reasoning families known up front,
the reasoning settings checked, Anthropic's extended-thinking request, a refused system role folded into the user
message, and what a backend learned kept as named state per model (backends/learned.py)."""

from __future__ import annotations

import pytest

from judge_mcp.backends.anthropic import AnthropicBackend
from judge_mcp.backends.base import user
from judge_mcp.backends.openai_compat import OpenAICompatBackend
from judge_mcp.backends.reasoning import REASONING_KEEP_CHARS, openai_known, split_think
from judge_mcp.config.settings import ConfigError, load_settings
from testkit.reasoning_servers import AnthropicThinker, OpenAIReasoner, openai_error
from testkit.scripted_servers import Reply


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>A is better: [[A>B]]</think>\n\n[[B>A]]", ("A is better: [[A>B]]", "[[B>A]]")),
        ("\n  <think>x</think>answer", ("x", "answer")),
        ("<think>a <think>b</think> c</think> [[B>A]] </think> tail", ("a <think>b</think> c", "[[B>A]] </think> tail")),
        ("<think>cut off in the middle [[A>B]]", ("cut off in the middle [[A>B]]", "")),  # no answer yet
        ("<think><think>deeper</think>", ("<think>deeper</think>", "")),  # nested and unclosed
        ("reasoning only closed</think>\n[[B>A]]", ("reasoning only closed", "[[B>A]]")),  # template opened it
        ("[[B>A]] and then <think>x</think>", (None, "[[B>A]] and then <think>x</think>")),  # not at the start
        # a closing tag first: the block's start was in the prompt (DeepSeek-R1's template), as vLLM's R1 parser reads it
        ("A quote of </think> after <think> in an answer", ("A quote of", "after <think> in an answer")),
        ("an <think> opened later </think> x", (None, "an <think> opened later </think> x")),
        ("plain answer", (None, "plain answer")),
        ("", (None, "")),
    ],
)
def test_a_think_block_is_taken_out_of_the_answer(text, expected):
    assert split_think(text) == expected


@pytest.mark.parametrize(
    "model, effort, known",
    [
        ("o1", None, (True, False)), ("o1-mini", None, (True, False)), ("o1-preview-2024-09-12", None, (True, False)),
        ("o3", None, (True, False)), ("o3-mini", None, (True, False)), ("o3-pro", None, (True, False)), ("o4-mini", None, (True, False)),
        ("gpt-5", None, (True, False)), ("gpt-5-mini", None, (True, False)), ("gpt-5-nano", None, (True, False)),
        ("gpt-5-pro", None, (True, False)), ("openai/o3-mini", None, (True, False)), ("GPT-5-Mini", None, (True, False)),
        ("gpt-5.1", None, (True, False)), ("gpt-5.1", "none", (True, True)),  # 5.1 and later sample at effort none
        ("gpt-5", "none", (True, False)), ("gpt-5-chat-latest", None, (False, True)), ("gpt-5.1-chat-latest", None, (False, True)),
        ("gpt-4o", None, None), ("gpt-4.1-mini", None, None), ("o10-model", None, None), ("gpt-50", None, None), ("qwen3-8b", None, None),
    ],
)
def test_openai_s_reasoning_families_are_known_by_name(model, effort, known):
    found = openai_known(model, effort)
    assert (found.reasoning, found.samples) == known if known else found is None


def test_a_known_reasoning_model_s_first_request_carries_what_it_takes():
    backend = OpenAICompatBackend("o", "o3-mini", base_url="https://api.openai.com/v1", api_key="k", reasoning_effort="high")
    payload = backend.payload(user("q", system="s", max_tokens=512, top_p=0.5, logprobs=True, top_logprobs=5))
    assert payload["max_completion_tokens"] == 512 + 16384 and payload["reasoning_effort"] == "high"
    assert not {"max_tokens", "temperature", "top_p", "logprobs", "top_logprobs"} & set(payload)
    assert backend.supports_logprobs is False  # methods ask for no token probabilities from it
    plain = OpenAICompatBackend("p", "gpt-4o-mini", base_url="https://api.openai.com/v1", api_key="k", reasoning_budget_tokens=100)
    sent = plain.payload(user("q", max_tokens=512))
    assert sent["max_tokens"] == 612 and sent["temperature"] == 0.0 and "reasoning_effort" not in sent


@pytest.mark.parametrize(
    "env, error",
    [
        ({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_REASONING_EFFORT": "max"},
         "JUDGE_MCP_REASONING_EFFORT must be one of none, minimal, low, medium, high, xhigh; got 'max'"),
        ({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_REASONING_BUDGET_TOKENS": "-1"}, "JUDGE_MCP_REASONING_BUDGET_TOKENS must be >= 0, got -1"),
        ({"JUDGE_MCP_BACKEND": "anthropic", "JUDGE_MCP_THINKING_BUDGET_TOKENS": "500"},
         "JUDGE_MCP_THINKING_BUDGET_TOKENS must be 0 (off) or at least 1024 (Anthropic's minimum budget_tokens), got 500"),
        ({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_THINKING_BUDGET_TOKENS": "2048"},
         "JUDGE_MCP_THINKING_BUDGET_TOKENS applies to the anthropic backends only, not to kind 'openai'"),
        ({"JUDGE_MCP_BACKEND": "anthropic", "JUDGE_MCP_REASONING_EFFORT": "low"},
         "JUDGE_MCP_REASONING_EFFORT applies to the openai backends only, not to kind 'anthropic'"),
        ({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_REASONING_BUDGET_TOKENS": "100"}, "JUDGE_MCP_REASONING_BUDGET_TOKENS applies to the openai and anthropic backends only"),
    ],
)
def test_a_bad_reasoning_setting_is_an_error_naming_it(env, error, tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_settings({"JUDGE_MCP_API_KEY": "k", "JUDGE_MCP_DB": str(tmp_path / "j.db"), **env})
    assert error in str(caught.value)


def test_the_reasoning_settings_are_read_from_the_environment_and_a_table(tmp_path):
    config = tmp_path / "judges.toml"
    config.write_text('[backends.claude]\nkind = "anthropic"\nthinking_budget_tokens = 4096\nreasoning_budget_tokens = 100\n'
                      '[backends.bad]\nkind = "openai"\nthinking_budget_tokens = 4096\n')
    settings = load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_API_KEY": "k", "JUDGE_MCP_REASONING_EFFORT": " Minimal ",
                              "JUDGE_MCP_CONFIG": str(config), "ANTHROPIC_API_KEY": "k", "JUDGE_MCP_DB": str(tmp_path / "j.db")})
    assert settings.default_backend.reasoning_effort == "minimal"
    claude = settings.backend("claude")
    assert (claude.thinking_budget_tokens, claude.reasoning_budget_tokens, claude.reasoning_effort) == (4096, 100, None)
    with pytest.raises(ConfigError, match=r"\[backends.bad\] thinking_budget_tokens applies to the anthropic backends only"):
        settings.backend("bad")


async def test_extended_thinking_sends_what_the_api_requires(make_backend):
    backend, server = make_backend(AnthropicThinker(lambda p: "[[B>A]]"), "anthropic", model="claude-sonnet-4-5", api_key="k",
                                   thinking_budget_tokens=2048)
    done = await backend.complete(user("q", max_tokens=512, top_p=0.9))
    sent = server.requests[0]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048} and sent["max_tokens"] == 512 + 2048
    assert "temperature" not in sent and "top_p" not in sent  # top_p below 0.95 is not taken with thinking on
    assert done.text == "[[B>A]]" and done.reasoning and done.reasoning_chars == len(done.reasoning)
    assert any("temperature 0" in n for n in done.notes) and any("top_p 0.9" in n for n in done.notes)
    await backend.complete(user("q2", max_tokens=512, top_p=0.97))
    assert server.requests[1]["top_p"] == 0.97
    with pytest.raises(ValueError, match="thinking_budget_tokens must be 0 .off. or at least 1024"):
        AnthropicBackend("c", "claude-x", api_key="k", thinking_budget_tokens=1000)


async def test_a_refused_system_role_goes_inside_the_first_user_message_from_then_on(make_backend):
    def o1_mini(payload):
        if any(m["role"] == "system" for m in payload["messages"]):
            return openai_error("Unsupported value: 'messages[0].role' does not support 'system' with this model.", "messages[0].role",
                                "unsupported_value")
        return OpenAIReasoner(lambda p: "[[A>B]]")(payload)

    backend, server = make_backend(o1_mini, model="o1-mini", api_key="k")
    first = await backend.complete(user("the question", system="  be fair  "))
    await backend.complete(user("another", system="be fair"))
    assert first.raw["dropped_parameters"] == ["system"] and len(server.requests) == 3
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "<|BEGIN_SYSTEM_MESSAGE|>\nbe fair\n<|END_SYSTEM_MESSAGE|>\n\nthe question"}]
    assert server.requests[2]["messages"][0]["content"].startswith("<|BEGIN_SYSTEM_MESSAGE|>")


async def test_what_a_backend_learned_is_named_per_model(make_backend):
    model = OpenAIReasoner(lambda p: "ok")
    backend, server = make_backend(model, model="acme-r1", api_key="k")
    assert backend.learned.flags() == []
    completion = await backend.complete(user("q"))
    assert completion.raw["dropped_parameters"] == ["max_tokens", "temperature"]
    assert backend.learned.flags() == ["max_completion_tokens", "no_temperature", "reasoning"]
    await backend.complete(user("q2"))
    assert model.refusals == 2 and len(server.requests) == 4
    backend.model = "acme-r2"  # another model on the same backend starts from what its name says
    assert backend.learned.flags() == []


async def test_a_reasoning_field_is_kept_bounded_beside_the_answer(make_backend):
    long = "step " * 5000
    backend, _ = make_backend(lambda p: Reply(content="[[A>B]]", message={"reasoning_content": long}), api_key="k")
    completion = await backend.complete(user("q"))
    assert completion.text == "[[A>B]]" and completion.reasoning_chars == len(long)
    assert completion.reasoning is not None and len(completion.reasoning) == REASONING_KEEP_CHARS + 1
