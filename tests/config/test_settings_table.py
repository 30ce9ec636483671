"""One table of settings (judge_mcp/config/table.py): every variable and TOML key the code reads is in it, `serve
--help` and the README's and docs' tables come from it, a misspelt name is reported with the nearest known one, and one
broken [backends.NAME] table fails only the calls that name it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from testkit.scripted_servers import ScriptedServer
from testkit.scripted_judges import PAIR, UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.config.values import SAMPLING_PRIORITIES
from judge_mcp.config.table import ENV_NAMES, ENVIRONMENT, TOML_KEYS, TOML_NAMES, markdown_table, unknown_variables

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "judge_mcp"


def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") if p.name != "table.py")


def test_every_variable_the_code_names_is_in_the_table_and_every_one_in_the_table_is_read() -> None:
    named = set(re.findall(r"\bJUDGE_MCP_[A-Z][A-Z_]*[A-Z]\b", _sources()))
    assert sorted(named - ENV_NAMES) == []
    readers = ("config/settings.py", "config/values.py", "server/transports/oauth.py")  # OAuth's are read where it starts
    config = "".join((PACKAGE / name).read_text() for name in readers)
    assert sorted(n for n in ENV_NAMES if f'"{n}"' not in config) == []


def test_every_toml_key_the_reader_reads_is_in_the_table() -> None:
    config = (PACKAGE / "config" / "settings.py").read_text() + (PACKAGE / "config" / "values.py").read_text()
    read = set(re.findall(r'(?:table(?:\.get\(|\[)|read_key\(table, )"([a-z_]+)"', config)) | {"kind"}  # read_key: config/table.py's reader
    assert (read - {"api_key"}) | set(SAMPLING_PRIORITIES) == TOML_NAMES  # the priorities are read by name in a loop


def test_serve_help_is_the_table() -> None:
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--help"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 0
    flat = " ".join(proc.stdout.split())
    for s in ENVIRONMENT:
        assert s.name in proc.stdout and " ".join(s.help.split()) in flat, s.name
    assert "sampling" in proc.stdout.split("JUDGE_MCP_BACKEND", 1)[1].splitlines()[0]  # all four kinds


def test_the_readme_and_docs_tables_are_the_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert markdown_table(ENVIRONMENT) in readme, "README's table is out of date: paste `python -m judge_mcp.config.table`"
    docs = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert markdown_table(TOML_KEYS, "key") in docs


@pytest.mark.parametrize("typed, meant", [
    ("JUDGE_MCP_BACKNED", "JUDGE_MCP_BACKEND"), ("JUDGE_MCP_BASEURL", "JUDGE_MCP_BASE_URL"),
    ("JUDGE_MCP_TIMEOUT", "JUDGE_MCP_TIMEOUT_S"), ("JUDGE_MCP_MODELS", "JUDGE_MCP_MODEL"),
])
def test_an_unknown_variable_is_named_with_the_nearest_known_one(typed: str, meant: str) -> None:
    (warning,) = unknown_variables({typed: "x", "JUDGE_MCP_DB": "j.db", "PATH": "/bin"})
    assert warning.startswith(f"{typed} is not a judge-mcp setting") and f"did you mean {meant}?" in warning
    assert load_settings({typed: "x", "JUDGE_MCP_DB": "/tmp/j.db"}).warnings == (warning,)
    assert unknown_variables({"JUDGE_MCP_ZZZZQQQ": "1"}) == [
        "JUDGE_MCP_ZZZZQQQ is not a judge-mcp setting and is ignored; `judge-mcp serve --help` lists them"
    ]


@pytest.mark.parametrize("setting", [s for s in ENVIRONMENT if s.type.startswith(("whole number", "number", "0 | 1"))], ids=lambda s: s.name)
def test_a_bad_value_of_every_numeric_or_switch_variable_names_the_variable(setting, tmp_path: Path) -> None:
    env = {"JUDGE_MCP_DB": str(tmp_path / "j.db"), "JUDGE_MCP_BACKEND": "local", setting.name: "lots"}
    with pytest.raises(ConfigError) as err:
        load_settings(env)
    assert str(err.value).startswith(setting.name)


@pytest.mark.parametrize("key", [s.name for s in TOML_KEYS if s.type.startswith(("whole number", "number"))])
def test_a_bad_value_of_every_numeric_toml_key_names_the_key_the_table_and_the_full_path(key: str, tmp_path: Path, monkeypatch) -> None:
    kind = "sampling" if key.endswith("_priority") else "local"
    (tmp_path / "judge.toml").write_text(f'[backends.x]\nkind = "{kind}"\n{key} = "lots"\n')
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"JUDGE_MCP_CONFIG": "judge.toml", "JUDGE_MCP_DB": str(tmp_path / "j.db")})  # relative
    with pytest.raises(ConfigError) as err:
        settings.backend("x")
    assert f"{tmp_path / 'judge.toml'}: [backends.x] {key} must be" in str(err.value)


def test_an_unknown_toml_key_is_named_with_the_nearest_known_one(tmp_path: Path) -> None:
    (tmp_path / "judge.toml").write_text('[backends.x]\nkind = "openai"\nmodle = "m"\nbaseurl = "http://h/v1"\n')
    settings = load_settings({"JUDGE_MCP_CONFIG": str(tmp_path / "judge.toml"), "JUDGE_MCP_DB": str(tmp_path / "j.db")})
    with pytest.raises(ConfigError) as err:
        settings.backend("x")
    assert "unknown keys 'baseurl' (did you mean base_url?), 'modle' (did you mean model?)" in str(err.value)


BROKEN_TABLE = '''
[backends.good]
kind = "openai"
base_url = "{url}"
model = "scripted-model"

[backends.claude]
kind = "anthropic"
api_key_env = "JUDGE_TEST_UNSET_KEY"
'''


async def test_one_broken_table_fails_only_its_calls_and_a_misspelt_variable_shows_in_results_and_errors(tmp_path: Path) -> None:
    with ScriptedServer(UniversalJudge()) as backend:
        (tmp_path / "judge.toml").write_text(BROKEN_TABLE.format(url=backend.base_url))
        env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model",
                        JUDGE_MCP_DB=str(tmp_path / "judge.db"), JUDGE_MCP_CONFIG="judge.toml", JUDGE_MCP_TIMEOUT="5")
        params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env, cwd=tmp_path)
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                default = await client.call_tool("compare_pair", PAIR)
                good = await client.call_tool("compare_pair", {**PAIR, "backend": "good"})
                broken = await client.call_tool("compare_pair", {**PAIR, "backend": "claude"})
    typo = "JUDGE_MCP_TIMEOUT is not a judge-mcp setting and is ignored (did you mean JUDGE_MCP_TIMEOUT_S?)"
    assert not default.is_error and not good.is_error, (default.content, good.content)
    assert any(typo in w for w in default.structured_content["warnings"])
    assert broken.is_error
    message = broken.content[0].text
    assert f"{tmp_path / 'judge.toml'}: [backends.claude]: api_key_env names 'JUDGE_TEST_UNSET_KEY', which is not set" in message
    assert typo in message
    stderr = (tmp_path / "stderr.txt").read_text()
    assert f"judge-mcp: warning: {typo}" in stderr and "judge-mcp: warning: backend 'claude' cannot be used" in stderr


async def test_a_misspelt_variable_shows_in_the_results_of_the_tools_without_a_warnings_field(mcp_app) -> None:
    """The README: an unknown name is reported "in every tool's result or error". judge_stats, lwe_session,
    lwe_session_show and record_label have no `warnings` field: it follows their JSON as a text block of its own."""
    server, _ = mcp_app(UniversalJudge(), JUDGE_MCP_TIMEOUT="5")
    typo = "JUDGE_MCP_TIMEOUT is not a judge-mcp setting and is ignored (did you mean JUDGE_MCP_TIMEOUT_S?)"
    async with Client(server) as client:
        judged = await client.call_tool("compare_pair", PAIR)
        assert not (await client.call_tool("lwe_judge", {**PAIR, "session": "s"})).is_error
        results = [await client.call_tool(name, args) for name, args in (
            ("judge_stats", {}), ("lwe_session", {"action": "show", "session": "s"}), ("lwe_session_show", {"session": "s"}),
            ("record_label", {"verdict_id": judged.structured_content["verdict_id"], "label": "B"}),
        )]
    assert [w for w in judged.structured_content["warnings"] if typo in w] and len(judged.content) == 1  # in its field, said once
    for result in results:
        assert not result.is_error, result.content
        assert json.loads(result.content[0].text) == result.structured_content  # the JSON block stays first and whole
        assert typo in result.content[-1].text and result.content[-1].text.startswith("judge-mcp settings: ")
