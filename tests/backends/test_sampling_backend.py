"""The `sampling` backend's configuration and what it sends, without a client: as the environment's backend and as
a [backends.NAME] table (the model a hint, the priorities checked), its createMessage parameters, and a clear error
outside an MCP tool call (the bench, the CLI). End to end with the official client: tests/server/test_sampling.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_mcp.backends import BackendError, build_backend, user
from judge_mcp.backends.base import ChatRequest, Message
from judge_mcp.backends.sampling import SamplingBackend
from judge_mcp.config.settings import ConfigError, load_settings

pytestmark = pytest.mark.anyio


def toml_settings(tmp_path: Path, text: str):
    path = tmp_path / "backends.toml"
    path.write_text(text)
    return load_settings({"JUDGE_MCP_CONFIG": str(path), "OPENAI_API_KEY": "sk-test-not-sent"})


def test_the_environments_backend_may_be_the_clients_model() -> None:
    cfg = load_settings({"JUDGE_MCP_BACKEND": "sampling", "JUDGE_MCP_MODEL": "sonnet", "OPENAI_API_KEY": "sk-x"}).default_backend
    assert (cfg.kind, cfg.model, cfg.api_key, cfg.base_url, cfg.concurrency) == ("sampling", "sonnet", None, None, 8)
    backend = build_backend(cfg)
    assert isinstance(backend, SamplingBackend) and backend.model_id == "sampling/sonnet"
    bare = build_backend(load_settings({"JUDGE_MCP_BACKEND": "sampling"}).default_backend)
    assert bare.model_id == "sampling/client" and bare.params(user("hi")).model_preferences is None


def test_a_named_sampling_backend_with_hint_and_priorities(tmp_path: Path) -> None:
    s = toml_settings(tmp_path, '[backends.me]\nkind = "sampling"\nmodel = "claude"\nspeed_priority = 0.2\nintelligence_priority = 1\ntimeout_s = 300\n')
    cfg = s.backend("me")
    assert cfg.priorities == (("speed_priority", 0.2), ("intelligence_priority", 1.0)) and cfg.timeout_s == 300
    params = build_backend(cfg).params(user("Which is worse?", system="You are a judge.", max_tokens=77, temperature=0.0))
    assert params.model_preferences.hints[0].name == "claude"
    assert (params.model_preferences.speed_priority, params.model_preferences.intelligence_priority) == (0.2, 1.0)
    assert params.model_preferences.cost_priority is None
    assert (params.system_prompt, params.max_tokens, params.temperature) == ("You are a judge.", 77, 0.0)
    assert [(m.role, m.content.text) for m in params.messages] == [("user", "Which is worse?")]


def test_a_system_message_joins_the_system_prompt() -> None:
    request = ChatRequest(messages=(Message("system", "Be strict."), Message("user", "q"), Message("assistant", "a"), Message("user", "again")),
                          system="You are a judge.")
    params = SamplingBackend("s", "").params(request)
    assert params.system_prompt == "You are a judge.\n\nBe strict."
    assert [m.role for m in params.messages] == ["user", "assistant", "user"]


@pytest.mark.parametrize(
    "toml, needle",
    [
        ('[backends.me]\nkind = "sampling"\nbase_url = "http://127.0.0.1:1/v1"\n', "has no base_url"),
        ('[backends.me]\nkind = "sampling"\napi_key_env = "OPENAI_API_KEY"\n', "has no api_key_env"),
        ('[backends.me]\nkind = "sampling"\nspeed_priority = 2\n', "[backends.me] speed_priority must be a number from 0 to 1"),
        ('[backends.me]\nkind = "sampling"\ncost_priority = "low"\n', "[backends.me] cost_priority must be a number from 0 to 1"),
        ('[backends.me]\nkind = "openai"\nintelligence_priority = 0.5\n', "apply to kind = \"sampling\" only"),
    ],
)
def test_bad_sampling_tables_name_the_problem(tmp_path: Path, toml: str, needle: str) -> None:
    settings = toml_settings(tmp_path, toml)  # a broken table fails the calls naming it, not the others
    with pytest.raises(ConfigError) as info:
        settings.backend("me")
    assert needle in str(info.value)


async def test_outside_a_tool_call_there_is_no_client_to_ask() -> None:
    backend = SamplingBackend("me", "", max_retries=3)
    with pytest.raises(BackendError) as info:
        await backend.complete(user("Which is worse?"))
    message = str(info.value)
    assert "no tool call" in message and "JUDGE_MCP_BACKEND" in message and info.value.attempts == 1


async def test_the_bench_refuses_the_clients_model_naming_it(tmp_path: Path) -> None:
    import io

    from judge_mcp.runtime.app import App
    from judge_mcp.bench.runner import BenchError, RunSpec, run
    from judge_mcp.storage.sqlite import SqliteEngine
    from tests.bench.datasets import PAIRS

    app = App(load_settings({"JUDGE_MCP_BACKEND": "sampling", "JUDGE_MCP_DB": str(tmp_path / "x.db")}), store=SqliteEngine(tmp_path / "bench.db"))
    try:
        with pytest.raises(BenchError) as info:
            await run(app, RunSpec(dataset=PAIRS, method="grp"), progress_stream=io.StringIO())
    finally:
        await app.aclose()
    assert "MCP client's own model" in str(info.value) and "bench a configured backend" in str(info.value)
