"""config/table.py drives the readers: each setting's one default and one parser are its row's, so what `serve
--help` and the README say is what the readers do."""

from __future__ import annotations

import dataclasses

import pytest

from judge_mcp.config import table
from judge_mcp.config.settings import ConfigError, load_settings


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("setting", [s for s in (*table.ENVIRONMENT, *table.TOML_KEYS) if s.value is not None], ids=lambda s: s.name)
def test_a_typed_default_is_the_default_the_table_shows(setting):
    assert setting.default == _shown(setting.value) and setting.parse is not None
    assert setting.parse(setting.value, setting.name) == setting.value  # the default is a value its parser takes


def test_the_readers_take_their_defaults_from_the_table(monkeypatch, tmp_path):
    env = {"HOME": str(tmp_path), "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "https://judge.example/v1"}
    cfg = load_settings(env).default_backend
    assert (cfg.kind, cfg.timeout_s, cfg.max_retries, cfg.structured_output) == ("openai", 120.0, 3, "auto")
    for name, value in (("JUDGE_MCP_TIMEOUT_S", 77.0), ("JUDGE_MCP_MAX_RETRIES", 5), ("JUDGE_MCP_STRUCTURED_OUTPUT", "off")):
        monkeypatch.setitem(table._BY_NAME, name, dataclasses.replace(table._BY_NAME[name], value=value))
    cfg = load_settings(env).default_backend
    assert (cfg.timeout_s, cfg.max_retries, cfg.structured_output) == (77.0, 5, "off")


def test_a_toml_table_reads_its_keys_with_their_declared_parsers(tmp_path):
    path = tmp_path / "judge.toml"
    path.write_text('[backends.a]\nkind = "OpenAI"\nbase_url = "https://judge.example/v1"\nn_threads = 2\n\n'
                    '[backends.b]\nkind = "local"\nn_ctx = 0\n\n[backends.c]\nbase_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    settings = load_settings({"HOME": str(tmp_path), "JUDGE_MCP_CONFIG": str(path), "JUDGE_MCP_MAX_RETRIES": "7"})
    a = settings.backend("a")
    assert (a.kind, a.n_threads, a.n_ctx, a.timeout_s, a.max_retries, a.structured_output) == ("openai", 2, 32768, 120.0, 7, "auto")
    with pytest.raises(ConfigError, match=r"\[backends\.b\] n_ctx"):
        settings.backend("b")
    with pytest.raises(ConfigError, match=r"\[backends\.c\] kind must be one of local, openai, anthropic, sampling; got ''"):
        settings.backend("c")
