"""What a new user meets first when something is set wrong: a mistyped setting reaches the MCP client as a tool
error (the server still completes the handshake), the CLI prints it and exits 2, a TOML table name typo is an
error, a database path that cannot work says why, and a tool against a hung backend fails within its bound."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from testkit.scripted_servers import Reply
from testkit.scripted_judges import PAIR
from testkit.server_process import clean_env, free_port
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.storage.sqlite import SqliteEngine, StoreError

TYPOS = {
    "JUDGE_MCP_BACKEND": ("opneai", "JUDGE_MCP_BACKEND must be one of local, openai, anthropic, sampling; got 'opneai'"),
    "JUDGE_MCP_TIMEOUT_S": ("12O", "JUDGE_MCP_TIMEOUT_S must be a number, got '12O'"),
    "JUDGE_MCP_BASE_URL": ("htp://127.0.0.1:8000/v1", "JUDGE_MCP_BASE_URL must be an http(s) URL, got 'htp://127.0.0.1:8000/v1'"),
}


def _serve(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "judge_mcp", "serve", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("variable", list(TYPOS))
async def test_a_mistyped_setting_reaches_the_client_as_the_tool_error(variable, tmp_path: Path) -> None:
    value, message = TYPOS[variable]
    env = clean_env(**{"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_MODEL": "m", "JUDGE_MCP_DB": str(tmp_path / "judge.db"), variable: value})
    params = StdioServerParameters(command=sys.executable, args=["-m", "judge_mcp", "serve"], env=env, cwd=tmp_path)
    with open(tmp_path / "stderr.txt", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:  # the handshake succeeds
            tools = {tool.name for tool in (await client.list_tools()).tools}
            results = [await client.call_tool(name, args) for name, args in (
                ("compare_pair", PAIR),
                ("infer_instruction_reward", {"instruction": "Say hi.", "responses": ["hi"]}),
                ("grade_score_options", {"instruction": "Pick.", "options": ["a", "b"]}),
                ("lwe_judge", PAIR),
            )]
            stats = await client.call_tool("judge_stats", {})  # needs no backend: still answers
    assert {"compare_pair", "lwe_judge", "judge_stats"} <= tools
    for result in results:
        assert result.is_error
        text = result.content[0].text
        assert message in text and "configuration has an error" in text and "restart" in text
    assert not stats.is_error
    stderr = (tmp_path / "stderr.txt").read_text()
    assert f"judge-mcp: configuration error: {message}" in stderr and "serving anyway" in stderr


def test_the_cli_prints_a_configuration_error_and_exits_2_without_a_traceback(tmp_path: Path) -> None:
    env = clean_env(JUDGE_MCP_TIMEOUT_S="12O", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    for command in (["sessions", "list"], ["gc", "--vacuum"], ["demo"]):
        proc = subprocess.run([sys.executable, "-m", "judge_mcp", *command], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2, (command, proc.stderr)
        assert "configuration error: JUDGE_MCP_TIMEOUT_S must be a number, got '12O'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_http_with_a_configuration_error_exits_2(tmp_path: Path) -> None:
    env = clean_env(JUDGE_MCP_BACKEND="opneai", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = _serve(env, "--transport", "http", "--port", str(free_port()))
    assert proc.returncode == 2 and "configuration error: JUDGE_MCP_BACKEND" in proc.stderr


def test_a_refused_http_bind_exits_2_like_any_configuration_error(tmp_path: Path) -> None:
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = _serve(env, "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port()))
    assert proc.returncode == 2, proc.stderr
    assert "refusing to serve HTTP on non-loopback address '0.0.0.0' without JUDGE_MCP_HTTP_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_port_in_use_exits_2_with_a_message(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
        proc = _serve(env, "--transport", "http", "--port", str(port))
    assert proc.returncode == 2, proc.stderr  # uvicorn's own exit code is 3
    assert "address already in use" in proc.stderr and f"could not serve HTTP on 127.0.0.1:{port}" in proc.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_a_usage_error_not_a_traceback(tmp_path: Path, port: str) -> None:
    env = clean_env(JUDGE_MCP_BACKEND="openai", JUDGE_MCP_BASE_URL="http://127.0.0.1:9/v1", JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    proc = _serve(env, "--transport", "http", "--port", port)
    assert proc.returncode == 2, proc.stderr
    assert f"argument --port: a port is a whole number from 0 to 65535 (0: any free port), got {port!r}" in proc.stderr
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr


@pytest.mark.parametrize("argv", [["sessions", "list"], ["sessions", "show", "default"], ["sessions", "export", "default"]])
def test_sessions_never_create_a_database_a_wrong_path_is_named(tmp_path: Path, monkeypatch, capsys, argv: list[str]) -> None:
    """As `stats`: JUDGE_MCP_DB set in the MCP client's env but not in this shell must not read as "no LWE sessions
    yet" from an empty database made on the spot (and left behind)."""
    from judge_mcp.cli import main as cli

    for key in [k for k in os.environ if k.startswith("JUDGE_MCP_")]:
        monkeypatch.delenv(key)
    db = tmp_path / "elsewhere" / "judge.db"
    monkeypatch.setenv("JUDGE_MCP_DB", str(db))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"judge-mcp sessions: no database at {str(db)!r} (no LWE session stored there yet, or JUDGE_MCP_DB names another" in err
    assert not db.parent.exists()


# ---- the TOML file ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ('[backend.ollama]\nkind = "openai"\n', "unknown table or key 'backend' (did you mean [backends.NAME]?)"),
    ('timeout_s = 60\n[backends.ollama]\nkind = "openai"\n', "unknown table or key 'timeout_s'"),
    ('[server]\nport = 1\n', "unknown table or key 'server'"),
    ('[backends.ollama]\nkind = "openai"\ntimeout = 60\n', "unknown key 'timeout' (did you mean timeout_s?)"),
])
def test_unknown_tables_and_keys_in_the_toml_file_are_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "judge.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings({"JUDGE_MCP_CONFIG": str(path), "JUDGE_MCP_DB": str(tmp_path / "j.db")}).backend("ollama")
    assert expected in str(err.value)


# ---- the database path --------------------------------------------------------------------------------------------
def test_a_file_where_the_database_folder_should_be_is_named(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a folder")
    for db in (tmp_path / "state" / "judge.db", tmp_path / "state" / "deeper" / "judge.db"):
        with pytest.raises(StoreError) as err:
            SqliteEngine(db)
        message = str(err.value)
        assert f"{str(tmp_path / 'state')!r} is a file, so it cannot hold the folder the database goes in" in message
        assert "FileExistsError" not in message and "NotADirectoryError" not in message


def test_a_folder_at_the_database_path_is_named(tmp_path: Path) -> None:
    (tmp_path / "judge.db").mkdir()
    with pytest.raises(StoreError) as err:
        SqliteEngine(tmp_path / "judge.db")
    assert "that path is a folder, not a file" in str(err.value) and "unable to open" not in str(err.value)


@pytest.fixture
def closed_folder(tmp_path: Path, monkeypatch) -> Path:
    """A folder this user may not enter (another user's home, a 0700 folder): every stat, mkdir or open below it fails
    with EACCES. Root may enter any folder, so the denial is what the kernel gives another user: os.stat, os.mkdir
    and sqlite3.connect refused below the folder, os.access saying it cannot be searched."""
    import sqlite3

    closed = tmp_path / "closed"
    closed.mkdir()

    def below(p: object) -> bool:
        return isinstance(p, (str, os.PathLike)) and Path(p) != closed and Path(p).is_relative_to(closed)

    def refuse(real):
        def call(p, *args, **kwargs):
            if below(p):
                raise PermissionError(13, "Permission denied", str(p))
            return real(p, *args, **kwargs)
        return call

    def connect(p, *args, **kwargs):
        if below(p):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(p, *args, **kwargs)

    real_connect, real_access = sqlite3.connect, os.access
    monkeypatch.setattr(os, "stat", refuse(os.stat))
    monkeypatch.setattr(os, "mkdir", refuse(os.mkdir))
    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == closed and mode & os.X_OK else real_access(p, mode, **kw))
    return closed


def test_a_database_below_a_folder_this_user_may_not_enter_is_named_not_a_traceback(closed_folder: Path) -> None:
    """The path check itself hit the EACCES (a PermissionError traceback from `judge-mcp serve`)."""
    for db in (closed_folder / "judge.db", closed_folder / "sub" / "judge.db"):
        with pytest.raises(StoreError) as err:
            SqliteEngine(db)
        assert f"this user may not enter the folder {str(closed_folder)!r} (no permission)" in str(err.value)
        assert "set JUDGE_MCP_DB to a place this user can write" in str(err.value)


def test_paths_below_a_folder_this_user_may_not_enter_are_errors_naming_them(closed_folder: Path, tmp_path: Path, capsys) -> None:
    """JUDGE_MCP_IMAGE_DIRS (read at start: a traceback instead of the configuration error), `stats --db` and
    `bench-report --db` looked with pathlib, which raises PermissionError there."""
    from judge_mcp.cli import main as cli
    from judge_mcp.config.values import path_kind

    assert [path_kind(p) for p in (closed_folder / "x", tmp_path / "nope", tmp_path)] == ["denied", "missing", "folder"]
    with pytest.raises(ConfigError, match=f"JUDGE_MCP_IMAGE_DIRS lists '{closed_folder}/pics', but this user may not look there"):
        load_settings({"JUDGE_MCP_DB": str(tmp_path / "j.db"), "JUDGE_MCP_IMAGE_DIRS": str(closed_folder / "pics")})
    assert cli.main(["stats", "--db", str(closed_folder / "judge.db")]) == 2
    assert f"judge-mcp stats: cannot read the database '{closed_folder}/judge.db': this user may not look there" in capsys.readouterr().err
    from judge_mcp.backends.local_models import ModelNotFoundError, resolve_model_path

    with pytest.raises(ModelNotFoundError, match=f"GGUF model file '{closed_folder}/m.gguf' \\(JUDGE_MCP_MODEL\\) cannot be read: this user may not"):
        resolve_model_path(str(closed_folder / "m.gguf"))  # a tool error "unexpected PermissionError" before
    out = tmp_path / "report.html"
    assert cli.main(["bench-report", "--db", str(closed_folder / "bench.db"), "--out", str(out)]) == 2
    assert f"{closed_folder}/bench.db cannot be read: this user may not look there" in capsys.readouterr().err


READ_ONLY_PROBE = """
import sys
from judge_mcp.storage.sqlite import SqliteEngine, StoreError
try:
    SqliteEngine(sys.argv[1])
except StoreError as exc:
    print(exc)
"""


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("mount") is None, reason="needs unshare and mount (util-linux)")
@pytest.mark.parametrize("existing", [False, True])
def test_a_read_only_filesystem_is_named(tmp_path: Path, existing: bool) -> None:
    """A read-only tmpfs mounted in a private mount namespace (it goes away with the process)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if existing:
        SqliteEngine(mnt / "judge.db").close()
    db = mnt / "judge.db" if existing else mnt / "sub" / "judge.db"
    remount = f"mount -o remount,bind,ro {mnt} {mnt}" if existing else f"mount -t tmpfs -o ro,size=64k tmpfs {mnt}"
    setup = f"mount --bind {mnt} {mnt} && {remount}" if existing else remount
    prefix = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    script = f"{setup} && exec {sys.executable} -c \"$PROBE\" {db}"
    proc = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PROBE": READ_ONLY_PROBE})
    if proc.returncode != 0 and "mount" in proc.stderr:
        pytest.skip(f"cannot mount a read-only filesystem here: {proc.stderr.strip()[:200]}")
    assert "is on a read-only filesystem; set JUDGE_MCP_DB to a writable place" in proc.stdout, proc.stdout + proc.stderr
    assert "unable to open database file" not in proc.stdout


# ---- a hung backend, through the MCP client -------------------------------------------------------------------------
async def test_a_tool_on_a_hung_backend_fails_within_its_documented_bound(mcp_app) -> None:
    server, backend = mcp_app(lambda p: Reply(content="late", delay_s=10.0), JUDGE_MCP_TIMEOUT_S="0.4", JUDGE_MCP_MAX_RETRIES="3")
    bound = server.app.backend(None).call_bound_s  # 2 x (0.4 to the first byte + 0.4 for the rest)
    async with Client(server) as client:
        start = time.perf_counter()
        result = await client.call_tool("compare_pair", PAIR)
        elapsed = time.perf_counter() - start
    assert result.is_error and "timed out after 0.4s waiting for the reply to start" in result.content[0].text
    assert "failed after 2 attempts" in result.content[0].text
    assert elapsed < bound + 1.5  # the two orders run at once; 4 attempts each took 4 x 0.4 s + backoff before
    assert len(backend.requests) == 4  # two orders, each tried twice


# ---- smaller ------------------------------------------------------------------------------------------------------
def test_serve_help_lists_every_variable_of_the_readme_configuration_table() -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    variables = set(re.findall(r"`(JUDGE_MCP_[A-Z_]+)`", table))
    proc = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--help"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert "JUDGE_MCP_SHARED_OPTION_POOL" in variables and "JUDGE_MCP_MAX_OUTPUT_TOKENS" in variables
    assert sorted(v for v in variables if v not in proc.stdout) == []


def test_the_embedded_models_answer_cap_has_an_environment_variable(tmp_path: Path) -> None:
    env = {"JUDGE_MCP_DB": str(tmp_path / "j.db")}
    assert load_settings({**env, "JUDGE_MCP_MAX_OUTPUT_TOKENS": "128"}).default_backend.max_output_tokens == 128
    assert load_settings(env).default_backend.max_output_tokens is None  # no cap: the method's budget
    assert load_settings({**env, "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:1/v1",
                          "JUDGE_MCP_MAX_OUTPUT_TOKENS": "128"}).default_backend.max_output_tokens is None  # local only
    with pytest.raises(ConfigError, match="JUDGE_MCP_MAX_OUTPUT_TOKENS must be a whole number"):
        load_settings({**env, "JUDGE_MCP_MAX_OUTPUT_TOKENS": "lots"})


def test_lwe_schemas_cap_every_free_text_field() -> None:
    """Like every other method's: a looping model must close the JSON (the embedded model scales the caps down)."""
    from judge_mcp.methods.lwe import text

    for schema in (text.verdict_schema(), text.feedback_schema()):
        free = {name: spec for name, spec in schema["properties"].items() if spec.get("type") == "string" and "enum" not in spec}
        assert free and all(isinstance(spec.get("maxLength"), int) for spec in free.values()), schema
