"""Every command in the README, CONTRIBUTING.md and docs/ runs as written. The shell lines of their ```sh blocks are
extracted; each judge-mcp command line is parsed by judge-mcp's own parser (a misspelt option or subcommand fails),
each `python -m MODULE` names a module that exists, each `make TARGET` a target of the Makefile, and every setting
named is one judge-mcp reads. The ones that can run here run: the README's quick start (its model server replaced
by a scripted one on 127.0.0.1), every `--help` and `--version`, and `make -n` of every make target."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.scripted_judges import UniversalJudge
from testkit.server_process import clean_env
from judge_mcp.config.table import ENV_NAMES

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
JUDGE_MCP = ("judge-mcp", ".venv/bin/judge-mcp", "~/.local/bin/judge-mcp", "/path/to/judge-mcp/.venv/bin/judge-mcp")
# Programs the documents name that are not judge-mcp's to run here (clients, installers, other servers, the shell).
OTHERS = {"claude", "npx", "pipx", "pip", "uvx", "uv", "openssl", "umask", "export", "curl", "docker", "nginx", "psql",
          "ollama", "llama-server", "vllm", "cat", "cd", "git", "ls", "opentelemetry-instrument", "otelcol", "jaeger",
          "wget", "cp", "mv", "chmod", "grep", "mkdir", "sqlite3", "python3", "pytest", "kill", "sleep", "for", "do", "done", "echo", "ab", "time"}


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```(?:sh|bash|shell)\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def _commands() -> list[tuple[str, list[str]]]:
    """(where, words) of every simple command: continuations joined, comments dropped, split at && ; |."""
    found = []
    for path in DOCUMENTS:
        for block in _blocks(path):
            for line in block.replace("\\\n", " ").splitlines():
                try:
                    lexer = shlex.shlex(re.sub(r"\d*>&\d+", "", line), posix=True, punctuation_chars=";&|")  # 2>&1
                    lexer.whitespace_split, lexer.commenters = True, "#"
                    words = list(lexer)
                except ValueError as exc:
                    raise AssertionError(f"{path.name}: a shell line that does not parse: {line!r} ({exc})") from None
                current: list[str] = []
                for word in [*words, ";"]:
                    if word in (";", "&&", "||", "|", "&"):
                        if current:
                            found.append((f"{path.relative_to(ROOT)}: {line.strip()}", current))
                        current = []
                    else:
                        current.append(word)
    return found


COMMANDS = _commands()


def _without_redirections(words: list[str]) -> list[str]:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif re.fullmatch(r"\d*>>?|<", word):
            skip = True  # the file name follows
        elif not re.match(r"\d*>|<", word):
            out.append(word)
    return out


def _split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """(VAR=value assignments, the command without them, a leading nohup/time, or redirections)."""
    words = _without_redirections(words)
    env = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        name, value = words[0].split("=", 1)
        env[name] = value
        words = words[1:]
    while words[:1] in (["nohup"], ["time"]):
        words = words[1:]
    return env, words


def test_there_are_commands_to_check() -> None:
    assert len(COMMANDS) > 40 and any(words[-1:] == ["demo"] for _, words in COMMANDS)


def test_every_program_is_judge_mcp_or_a_known_tool() -> None:
    unknown = []
    for where, words in COMMANDS:
        _, rest = _split_env(words)
        if rest and rest[0] not in JUDGE_MCP and rest[0] not in OTHERS and rest[0] != "make" and not rest[0].endswith("python"):
            unknown.append((rest[0], where))
    assert unknown == []


def test_every_judge_mcp_command_line_parses_and_every_setting_is_known() -> None:
    from judge_mcp.cli.main import build_parser

    problems = []
    for where, words in COMMANDS:
        env, rest = _split_env(words)
        problems += [(name, where) for name in env if name.startswith("JUDGE_MCP_") and name not in ENV_NAMES]
        if not rest or rest[0] not in JUDGE_MCP:
            continue
        try:
            build_parser().parse_args(rest[1:])
        except SystemExit as exc:
            if exc.code not in (0, None):
                problems.append(("does not parse", where))
    assert problems == []


def test_every_setting_the_documents_name_is_one_judge_mcp_reads() -> None:
    named = {(m, p.name) for p in DOCUMENTS for m in re.findall(r"\bJUDGE_MCP_[A-Z][A-Z_]*[A-Z]\b", p.read_text(encoding="utf-8"))}
    assert sorted((m, where) for m, where in named if m not in ENV_NAMES and m != "JUDGE_MCP_BACKNED") == []


def test_every_python_module_and_make_target_exists() -> None:
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.M))
    missing = []
    for where, words in COMMANDS:
        _, rest = _split_env(words)
        if rest[:1] == ["make"]:
            missing += [(t, where) for t in rest[1:] if not t.startswith("-") and "=" not in t and t not in targets]
        if rest and rest[0].endswith("python") and rest[1:2] == ["-m"]:
            module = rest[2]
            if not (ROOT / (module.replace(".", "/") + ".py")).exists() and not (ROOT / module.replace(".", "/")).is_dir():
                if module.split(".")[0] in ("bench", "judge_mcp", "tests", "tools"):
                    missing.append((module, where))
    assert missing == []


def test_every_repository_path_the_user_documents_cite_exists() -> None:
    """bench/NAME.py, judge_mcp/..., tests/... named in the README and docs/ (CONTRIBUTING.md describes the layout
    being moved into and is left out)."""
    missing = []
    for path in DOCUMENTS:
        if path.name == "CONTRIBUTING.md":
            continue
        for cited in set(re.findall(r"\b((?:bench|judge_mcp|tests|tools)/[\w/]+\.(?:py|json|toml))\b", path.read_text(encoding="utf-8"))):
            if not (ROOT / cited).exists():
                missing.append((cited, path.name))
    assert sorted(missing) == []


def test_no_command_line_calls_a_bare_judge_mcp() -> None:
    """From a checkout `judge-mcp` is not on PATH (exit 127): a command line says `.venv/bin/judge-mcp`, or the full
    path an install gives (`~/.local/bin/judge-mcp`); uvx names it after its own --from."""
    bare = [where for where, words in COMMANDS if _split_env(words)[1][:1] == ["judge-mcp"]]
    assert bare == []


def test_every_help_and_version_line_runs() -> None:
    """In the blocks and in the text (`judge-mcp serve --help` prints ...). A block's `.venv/bin/judge-mcp` line runs as
    written, from the checkout, in an environment where the venv is not active (its bin/ not on PATH)."""
    inline = [shlex.split(span) for p in DOCUMENTS for span in re.findall(r"`((?:\.venv/bin/)?judge-mcp [^`]*--(?:help|version))`", p.read_text())]
    lines = {tuple(rest) for words in [*(w for _, w in COMMANDS), *inline] for rest in [_split_env(words)[1]]
             if rest and rest[0] in JUDGE_MCP and ("--help" in rest or "--version" in rest)}
    assert ("judge-mcp", "serve", "--help") in lines and any(rest[0] == ".venv/bin/judge-mcp" for rest in lines)
    venv_bin = str(ROOT / ".venv" / "bin")
    env = clean_env(drop=("VIRTUAL_ENV",))
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep) if d != venv_bin)
    for rest in lines:
        argv = [rest[0], *rest[1:]] if rest[0] == ".venv/bin/judge-mcp" else [sys.executable, "-m", "judge_mcp", *rest[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
        assert proc.returncode == 0 and proc.stdout, (rest, proc.stderr)


def test_every_make_target_named_runs_as_a_dry_run() -> None:
    targets = {t for _, words in COMMANDS for rest in [_split_env(words)[1]] if rest[:1] == ["make"] for t in rest[1:]}
    assert {"demo", "test", "setup"} <= targets
    proc = subprocess.run(["make", "-n", *sorted(targets)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "judge-mcp").exists(), reason="the quick start runs after `make setup`")
def test_the_readme_quick_start_gives_real_verdicts(scripted, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    head = "\n".join(readme.splitlines()[:40])
    block = re.findall(r"```sh\n(.*?)```", head.split("## Quick start", 1)[1], re.S)[0]
    setup, line = block.strip().splitlines()
    assert setup == "make setup" and ".venv/bin/judge-mcp demo" in line
    env, rest = _split_env(shlex.split(line))
    backend = scripted(UniversalJudge())
    env = {**env, "JUDGE_MCP_BASE_URL": backend.base_url, "JUDGE_MCP_DB": str(tmp_path / "judge.db")}
    proc = subprocess.run([str(ROOT / rest[0]), *rest[1:]], capture_output=True, text=True, timeout=600, env=clean_env(**env), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "VERDICT: B is better (both orders agree)." in proc.stdout
    assert backend.requests and backend.requests[0]["model"] == env["JUDGE_MCP_MODEL"]
