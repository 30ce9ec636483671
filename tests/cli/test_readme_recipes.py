"""The README's client recipes work literally. Every JSON block parses; every server entry sets a
real backend (not the 135M default) whose configuration loads without a missing key; the uvx, pipx and checkout
forms are all there, for JSON clients and for Claude Code; the HTTP form sends the token. The checkout recipe is
then run as written (only the placeholder path and the model server's URL replaced) through the official client."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.config.settings import load_settings, missing_key

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", README, re.S)
SHELL_LINES = [line for block in re.findall(r"```sh\n(.*?)```", README, re.S) for line in block.splitlines()]


def _servers() -> list[dict]:
    servers = []
    for block in JSON_BLOCKS:
        data = json.loads(block)  # every JSON block in the README parses
        servers += list(data.get("mcpServers", {}).values())
    return servers


def _form(command: str) -> str:
    if command == "uvx":
        return "uvx"
    if command.endswith("/.venv/bin/judge-mcp"):
        return "checkout"
    if command.endswith("/.local/bin/judge-mcp"):
        return "pipx"
    return "unknown"


def test_json_recipes_cover_uvx_pipx_and_the_checkout_each_with_a_real_backend() -> None:
    servers = _servers()
    assert {_form(s["command"]) for s in servers} == {"uvx", "pipx", "checkout"}
    for server in servers:
        assert server["args"][-1] == "serve"
        env = server["env"]
        assert env["JUDGE_MCP_BACKEND"] in ("openai", "anthropic"), server  # never the embedded 135M plumbing model
        cfg = load_settings(env).default_backend
        assert missing_key(cfg) is None, server  # a provider URL comes with its key
        assert "JUDGE_MCP_DB" not in env  # the per-user default is right for clients; no relative path to go wrong


def test_claude_code_recipes_cover_the_three_forms_and_http_with_the_token() -> None:
    adds = [shlex.split(line) for line in SHELL_LINES if line.startswith("claude mcp add")]
    stdio = [words for words in adds if "--" in words]
    forms = set()
    for words in stdio:
        command = words[words.index("--") + 1 :]
        assert command[-1] == "serve"
        forms.add(_form("uvx" if command[0] == "uvx" else command[0].replace("~", "/home/you")))
        env = dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "-e")
        assert env["JUDGE_MCP_BACKEND"] in ("openai", "anthropic")
        assert missing_key(load_settings(env).default_backend) is None, words
    assert forms == {"uvx", "pipx", "checkout"}
    http = [words for words in adds if "--transport" in words]
    assert http, "no HTTP recipe for Claude Code"
    words = http[0]
    assert words[words.index("--transport") + 1] == "http" and any(w.endswith("/mcp") for w in words)
    assert words[words.index("--header") + 1] == "Authorization: Bearer $JUDGE_MCP_HTTP_TOKEN"
    inspector = [line for line in SHELL_LINES if "@modelcontextprotocol/inspector" in line]
    assert inspector and '--header "Authorization: Bearer $JUDGE_MCP_HTTP_TOKEN"' in inspector[0]
    # 0.15 has no --header; 2.x needs Node >= 22.19 and answers a 401 with an OAuth flow; 1.0.3 runs on the Node LTS lines
    assert "'@modelcontextprotocol/inspector@1.0.3'" in inspector[0]
    assert any("openssl rand -hex" in line for line in SHELL_LINES) and any(line.startswith("export JUDGE_MCP_HTTP_TOKEN=") for line in SHELL_LINES)


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "judge-mcp").exists(), reason="the checkout recipe needs `make setup`")
async def test_the_checkout_recipe_runs_as_written(scripted, tmp_path: Path) -> None:
    recipe = next(s for s in _servers() if _form(s["command"]) == "checkout")
    backend = scripted(UniversalJudge())
    env = clean_env(drop=("PYTHONPATH",), **{**recipe["env"], "JUDGE_MCP_BASE_URL": backend.base_url, "XDG_DATA_HOME": str(tmp_path / "data")})
    command = recipe["command"].replace("/path/to/judge-mcp", str(ROOT))
    params = StdioServerParameters(command=command, args=recipe["args"], env=env, cwd=tmp_path)
    async with Client(params, read_timeout_seconds=60) as client:
        result = await client.call_tool("compare_pair", {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD})
    assert not result.is_error and result.structured_content["winner"] == "B"
    assert backend.requests[0]["model"] == recipe["env"]["JUDGE_MCP_MODEL"]
    assert (tmp_path / "data" / "judge-mcp" / "judge.db").is_file()


def test_no_recipe_leads_with_a_registry_form_that_fails_until_the_package_is_published() -> None:
    """`uvx judge-mcp`, `pipx install judge-mcp` and `pip install 'judge-mcp[local]'` fail today ("not found in the
    package registry"): every runnable recipe installs from a checkout or a built wheel instead."""
    for server in _servers():
        if server["command"] == "uvx":
            assert server["args"][:2] == ["--from", "/path/to/judge-mcp"], server
    for line in SHELL_LINES:
        words = shlex.split(line.split("#", 1)[0]) if not line.startswith("#") else []
        if "uvx" in words:
            assert words[words.index("uvx") + 1] == "--from", line
        for tool in ("pip", "pipx"):
            if words[:2] == [tool, "install"]:
                assert words[2].startswith(("/path/to/judge-mcp", "dist/")), line
