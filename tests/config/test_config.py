"""Settings from the environment and the TOML file of named backends (CONTRACT: Configuration), including the
key-safety rule: provider-wide keys only ever go to the provider's own host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_mcp.backends import build_backend
from judge_mcp.backends.base import user
from judge_mcp.config.settings import ConfigError, default_db_path, load_settings
from tests.helpers import Rendezvous

OPENAI_KEY = "sk-openai-provider-key-111"
ANTHROPIC_KEY = "sk-ant-provider-key-222"
EXPLICIT_KEY = "sk-explicit-judge-key-333"
CUSTOM_KEY = "sk-custom-env-key-444"


def write_toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "judge.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---- environment ----------------------------------------------------------------------------------------------


def test_defaults_with_an_empty_environment():
    s = load_settings({})
    cfg = s.default_backend
    assert (cfg.name, cfg.kind, cfg.model, cfg.base_url, cfg.api_key) == ("default", "local", None, None, None)
    assert s.db_path == Path.home() / ".local" / "share" / "judge-mcp" / "judge.db"  # per user, never cwd-relative
    assert s.db_path.is_absolute()
    assert s.http_token is None and dict(s.named_backends) == {}
    assert s.backend(None) is cfg and s.backend("default") is cfg
    assert s.backend_names() == ["default"]


@pytest.mark.parametrize(
    "platform, env, expected",
    [
        ("linux", {"HOME": "/home/u"}, "/home/u/.local/share/judge-mcp/judge.db"),
        ("linux", {"HOME": "/home/u", "XDG_DATA_HOME": "/data/u"}, "/data/u/judge-mcp/judge.db"),
        ("linux", {"HOME": "/home/u", "XDG_DATA_HOME": "relative/dir"}, "/home/u/.local/share/judge-mcp/judge.db"),
        ("freebsd14", {"HOME": "/home/u", "XDG_DATA_HOME": " "}, "/home/u/.local/share/judge-mcp/judge.db"),
        ("darwin", {"HOME": "/Users/u", "XDG_DATA_HOME": "/x"}, "/Users/u/Library/Application Support/judge-mcp/judge.db"),
        ("win32", {"HOME": "/h", "LOCALAPPDATA": "/appdata"}, "/appdata/judge-mcp/judge.db"),
    ],
)
def test_default_database_is_in_the_per_user_data_directory(platform, env, expected):
    assert default_db_path(env, platform) == Path(expected)


def test_judge_mcp_db_overrides_the_per_user_default(tmp_path):
    assert load_settings({"JUDGE_MCP_DB": str(tmp_path / "x.db"), "XDG_DATA_HOME": "/data"}).db_path == tmp_path / "x.db"
    assert load_settings({"HOME": str(tmp_path), "XDG_DATA_HOME": "/data/u"}).db_path == Path("/data/u/judge-mcp/judge.db")


@pytest.mark.parametrize("raw, kept", [("  abcdefghijklmnopqrstuv\n", "abcdefghijklmnopqrstuv"), ("tok", "tok")])
def test_http_token_is_trimmed(raw, kept):
    assert load_settings({"JUDGE_MCP_HTTP_TOKEN": raw}).http_token == kept


@pytest.mark.parametrize("raw", ["two words", "tab\there", "caf\u00e9-token-0123456789"])
def test_http_token_with_inner_space_or_non_ascii_is_refused(raw):
    with pytest.raises(ConfigError, match="JUDGE_MCP_HTTP_TOKEN must be printable ASCII"):
        load_settings({"JUDGE_MCP_HTTP_TOKEN": raw})


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"JUDGE_MCP_BACKEND": "openai"}, "set JUDGE_MCP_API_KEY or OPENAI_API_KEY"),
        ({"JUDGE_MCP_BACKEND": "anthropic"}, "set JUDGE_MCP_API_KEY or ANTHROPIC_API_KEY"),
        ({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "https://api.openai.com/v1"}, "OPENAI_API_KEY"),
    ],
)
def test_a_provider_url_without_a_key_fails_at_once_naming_the_variable(env, fragment):
    from judge_mcp.backends import build_backend

    cfg = load_settings(env).default_backend
    with pytest.raises(ConfigError, match=fragment) as err:
        build_backend(cfg)
    assert "https://api." in str(err.value) and str(cfg.model) in str(err.value)


def test_a_local_server_without_a_key_is_built():
    from judge_mcp.backends import build_backend

    cfg = load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:8000/v1"}).default_backend
    assert build_backend(cfg).base_url == "http://127.0.0.1:8000/v1"


def test_every_contract_variable_is_read(tmp_path):
    toml = write_toml(tmp_path, '[backends.fast]\nkind = "openai"\nbase_url = "http://127.0.0.1:9000/v1"\nmodel = "m2"\n')
    s = load_settings({
        "JUDGE_MCP_BACKEND": " OpenAI ",
        "JUDGE_MCP_MODEL": "qwen2.5-7b",
        "JUDGE_MCP_BASE_URL": "http://127.0.0.1:8000/v1/",
        "JUDGE_MCP_API_KEY": EXPLICIT_KEY,
        "JUDGE_MCP_DB": str(tmp_path / "x" / "j.db"),
        "JUDGE_MCP_CONFIG": toml,
        "JUDGE_MCP_HTTP_TOKEN": "tok-123",
    })
    cfg = s.default_backend
    assert (cfg.kind, cfg.model, cfg.base_url, cfg.api_key) == ("openai", "qwen2.5-7b", "http://127.0.0.1:8000/v1", EXPLICIT_KEY)
    assert s.db_path == tmp_path / "x" / "j.db"
    assert s.http_token == "tok-123"
    assert s.backend_names() == ["default", "fast"]
    assert s.backend("fast").model == "m2"


@pytest.mark.parametrize("kind, model", [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-5")])
def test_provider_default_models(kind, model):
    cfg = load_settings({"JUDGE_MCP_BACKEND": kind}).default_backend
    assert cfg.kind == kind and cfg.model == model and cfg.base_url is None


def test_local_model_is_a_path_and_ignores_url_and_key():
    cfg = load_settings({"JUDGE_MCP_BACKEND": "local", "JUDGE_MCP_MODEL": "/models/x.gguf", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:1",
                         "JUDGE_MCP_API_KEY": EXPLICIT_KEY}).default_backend
    assert cfg.kind == "local" and cfg.model == "/models/x.gguf"
    assert cfg.base_url is None and cfg.api_key is None


@pytest.mark.parametrize(
    "env, kind",
    [
        ({"JUDGE_MCP_BASE_URL": "http://127.0.0.1:11434/v1", "JUDGE_MCP_MODEL": "qwen2.5:7b-instruct"}, "openai"),
        ({"JUDGE_MCP_BASE_URL": "https://api.anthropic.com"}, "anthropic"),
        ({"OPENAI_API_KEY": OPENAI_KEY}, "openai"),
        ({"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "JUDGE_MCP_MODEL": "claude-sonnet-4-5"}, "anthropic"),
        ({"JUDGE_MCP_MODEL": "/models/x.gguf"}, "local"),
        ({}, "local"),
    ],
)
def test_without_judge_mcp_backend_the_backend_follows_from_what_is_set(env, kind):
    cfg = load_settings(env).default_backend
    assert cfg.kind == kind
    if "OPENAI_API_KEY" in env:
        assert cfg.api_key == OPENAI_KEY and cfg.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}, "set JUDGE_MCP_BACKEND=openai or JUDGE_MCP_BACKEND=anthropic"),
        ({"JUDGE_MCP_API_KEY": EXPLICIT_KEY}, "JUDGE_MCP_API_KEY is set but JUDGE_MCP_BACKEND is not"),
        ({"JUDGE_MCP_MODEL": "qwen2.5:7b-instruct"}, "set JUDGE_MCP_BACKEND=openai and JUDGE_MCP_BASE_URL"),
        ({"JUDGE_MCP_MODEL": "/m/x.gguf", "JUDGE_MCP_BASE_URL": "http://127.0.0.1:1/v1"}, "set JUDGE_MCP_BACKEND=local or JUDGE_MCP_BACKEND=openai"),
    ],
)
def test_what_names_no_one_backend_is_an_error_saying_which_variable_to_set(env, fragment):
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert fragment in str(caught.value) and EXPLICIT_KEY not in str(caught.value)


def test_empty_variables_count_as_unset():
    s = load_settings({"JUDGE_MCP_BACKEND": "", "JUDGE_MCP_DB": "", "JUDGE_MCP_HTTP_TOKEN": "  ", "JUDGE_MCP_CONFIG": "",
                       "JUDGE_MCP_MAX_RETRIES": ""})
    assert s.default_backend.kind == "local" and s.db_path == default_db_path({})
    assert s.http_token is None and s.default_backend.max_retries == 3


def test_home_is_expanded_in_paths():
    s = load_settings({"JUDGE_MCP_DB": "~/judge/j.db"})
    assert s.db_path == Path.home() / "judge" / "j.db"


def test_tuning_variables():
    cfg = load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_CONCURRENCY": "8", "JUDGE_MCP_TIMEOUT_S": "2.5",
                         "JUDGE_MCP_MAX_RETRIES": "0"}).default_backend
    assert (cfg.concurrency, cfg.timeout_s, cfg.max_retries) == (8, 2.5, 0)


@pytest.mark.parametrize(
    "name, value",
    [
        ("JUDGE_MCP_BACKEND", "gpt"),
        ("JUDGE_MCP_BASE_URL", "localhost:8000/v1"),
        ("JUDGE_MCP_BASE_URL", "ftp://127.0.0.1/v1"),
        ("JUDGE_MCP_CONCURRENCY", "0"),
        ("JUDGE_MCP_CONCURRENCY", "two"),
        ("JUDGE_MCP_CONCURRENCY", "1.5"),
        ("JUDGE_MCP_TIMEOUT_S", "-1"),
        ("JUDGE_MCP_TIMEOUT_S", "nan"),
        ("JUDGE_MCP_TIMEOUT_S", "soon"),
        ("JUDGE_MCP_MAX_RETRIES", "-1"),
        ("JUDGE_MCP_MAX_RETRIES", "many"),
    ],
)
def test_bad_values_name_the_variable(name, value):
    env = {"JUDGE_MCP_BACKEND": "openai", name: value}
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert name in str(info.value) and value.strip() in str(info.value)


def test_missing_config_file_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="JUDGE_MCP_CONFIG .* does not exist"):
        load_settings({"JUDGE_MCP_CONFIG": str(tmp_path / "nope.toml")})


# ---- the key-safety rule --------------------------------------------------------------------------------------

PROVIDER_KEYS = {"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}


@pytest.mark.parametrize(
    "kind, base_url, expected",
    [
        ("openai", None, OPENAI_KEY),
        ("openai", "https://api.openai.com/v1", OPENAI_KEY),
        ("openai", "https://API.OpenAI.com/v1/", OPENAI_KEY),
        ("openai", "http://127.0.0.1:8000/v1", None),
        ("openai", "http://localhost:11434/v1", None),
        ("openai", "https://api.openai.com.attacker.example/v1", None),
        ("openai", "https://proxy.example/api.openai.com/v1", None),
        ("openai", "http://api.openai.com/v1", None),  # never in clear text
        ("openai", "https://api.anthropic.com/v1", None),  # the other provider's key is not this one's either
        ("anthropic", None, ANTHROPIC_KEY),
        ("anthropic", "https://api.anthropic.com", ANTHROPIC_KEY),
        ("anthropic", "http://127.0.0.1:8080", None),
        ("anthropic", "https://api.openai.com/v1", None),
    ],
)
def test_provider_keys_only_reach_the_provider(kind, base_url, expected):
    env = {"JUDGE_MCP_BACKEND": kind, **PROVIDER_KEYS}
    if base_url:
        env["JUDGE_MCP_BASE_URL"] = base_url
    assert load_settings(env).default_backend.api_key == expected


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_wrong_provider_key_is_never_used(kind):
    other = {"openai": {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, "anthropic": {"OPENAI_API_KEY": OPENAI_KEY}}[kind]
    assert load_settings({"JUDGE_MCP_BACKEND": kind, **other}).default_backend.api_key is None


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1"])
def test_explicit_key_is_used_anywhere_and_wins(base_url):
    env = {"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": base_url, "JUDGE_MCP_API_KEY": EXPLICIT_KEY, **PROVIDER_KEYS}
    assert load_settings(env).default_backend.api_key == EXPLICIT_KEY


@pytest.mark.parametrize(
    "kind, header, sent",
    [
        ("openai", "authorization", f"Bearer {EXPLICIT_KEY}"),
        ("anthropic", "x-api-key", EXPLICIT_KEY),
    ],
)
async def test_on_the_wire_a_local_server_never_gets_the_provider_key(scripted, kind, header, sent):
    server = scripted(lambda p: "ok", kind)
    for extra, expected in (({}, None), ({"JUDGE_MCP_API_KEY": EXPLICIT_KEY}, sent)):
        env = {"JUDGE_MCP_BACKEND": kind, "JUDGE_MCP_BASE_URL": server.base_url, "JUDGE_MCP_MODEL": "m", **PROVIDER_KEYS, **extra}
        backend = build_backend(load_settings(env).default_backend)
        try:
            assert (await backend.complete(user("q"))).text == "ok"
        finally:
            await backend.aclose()
        assert server.headers[-1].get(header) == expected
    seen = " ".join(str(h) for h in server.headers)
    assert OPENAI_KEY not in seen and ANTHROPIC_KEY not in seen


def test_keys_never_appear_in_repr_or_str():
    s = load_settings({"JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_API_KEY": EXPLICIT_KEY, "JUDGE_MCP_HTTP_TOKEN": "tok-secret-9"})
    cfg = s.default_backend
    assert cfg.api_key == EXPLICIT_KEY
    assert EXPLICIT_KEY not in repr(cfg) and EXPLICIT_KEY not in str(cfg)
    assert EXPLICIT_KEY not in repr(s) and "tok-secret-9" not in repr(s)


# ---- TOML named backends --------------------------------------------------------------------------------------

TOML = """
[backends.vllm]
kind = "openai"
model = "qwen"
base_url = "http://127.0.0.1:8000/v1"
concurrency = 16
timeout_s = 30.5
max_retries = 1

[backends.claude]
kind = "anthropic"
model = "claude-haiku-4-5"
api_key_env = "MY_CLAUDE_KEY"

[backends.gpt]
kind = "openai"

[backends.tiny]
kind = "local"
model = "/models/tiny.gguf"
n_ctx = 2048
n_threads = 2
"""


def test_named_backends_from_toml(tmp_path):
    env = {"JUDGE_MCP_CONFIG": write_toml(tmp_path, TOML), "MY_CLAUDE_KEY": CUSTOM_KEY, "JUDGE_MCP_BACKEND": "local", **PROVIDER_KEYS}
    s = load_settings(env)
    assert s.backend_names() == ["default", "claude", "gpt", "tiny", "vllm"]
    vllm = s.backend("vllm")
    assert (vllm.kind, vllm.model, vllm.base_url, vllm.concurrency, vllm.timeout_s, vllm.max_retries) == (
        "openai", "qwen", "http://127.0.0.1:8000/v1", 16, 30.5, 1)
    assert vllm.api_key is None  # local endpoint: OPENAI_API_KEY withheld
    assert s.backend("claude").api_key == CUSTOM_KEY  # named by api_key_env, used as given
    gpt = s.backend("gpt")
    assert gpt.api_key == OPENAI_KEY and gpt.model == "gpt-4o-mini"  # provider's own host (the default URL)
    tiny = s.backend("tiny")
    assert (tiny.kind, tiny.model, tiny.n_ctx, tiny.n_threads, tiny.api_key) == ("local", "/models/tiny.gguf", 2048, 2, None)
    assert s.default_backend.kind == "local"  # the environment's backend is unchanged


def test_api_key_env_sends_a_key_to_a_local_endpoint(tmp_path):
    toml = '[backends.proxy]\nkind = "openai"\nbase_url = "http://127.0.0.1:4000/v1"\napi_key_env = "PROXY_KEY"\n'
    s = load_settings({"JUDGE_MCP_CONFIG": write_toml(tmp_path, toml), "PROXY_KEY": CUSTOM_KEY, "JUDGE_MCP_BACKEND": "local", **PROVIDER_KEYS})
    assert s.backend("proxy").api_key == CUSTOM_KEY


def test_unknown_backend_name_lists_the_known_ones(tmp_path):
    s = load_settings({"JUDGE_MCP_CONFIG": write_toml(tmp_path, TOML), "MY_CLAUDE_KEY": CUSTOM_KEY})
    with pytest.raises(ConfigError) as info:
        s.backend("gemini")
    message = str(info.value)
    assert "gemini" in message
    for name in ("default", "claude", "gpt", "tiny", "vllm"):
        assert name in message


@pytest.mark.parametrize(
    "toml, needle",
    [
        ('[backends.x]\nkind = "openai"\napi_key = "sk-literal"\n', "api_key_env"),
        ('[backends.x]\nkind = "openai"\napi_key_env = "UNSET_VAR_FOR_TEST"\n', "UNSET_VAR_FOR_TEST"),
        # the key pasted where its variable's name goes: refused without being echoed (the test below checks)
        ('[backends.x]\nkind = "openai"\napi_key_env = "sk-literal"\n', "api_key_env must be the name of an environment variable"),
        ('[backends.x]\nkind = "openai"\napi_key_env = "sk-literal"\n', "not the key itself (the value is not shown)"),
        ('[backends.x]\nkind = "openai"\napi_key_env = "gsk_sk-literal"\n', "api_key_env must be the name"),
        ('[backends.x]\nkind = "gemini"\n', "[backends.x] kind"),
        ('[backends.x]\nmodel = "m"\n', "[backends.x] kind"),
        ("[backends.x]\nkind = 3\n", "[backends.x] kind"),
        ('[backends.x]\nkind = "openai"\nbase_url = "127.0.0.1:8000"\n', "[backends.x] base_url"),
        ('[backends.x]\nkind = "openai"\nconcurrency = 0\n', "[backends.x] concurrency"),
        ('[backends.x]\nkind = "openai"\ntimeout_s = "fast"\n', "[backends.x] timeout_s"),
        ('[backends.x]\nkind = "openai"\nmax_retries = -2\n', "[backends.x] max_retries"),
        ('[backends.x]\nkind = "local"\nn_threads = 0\n', "[backends.x] n_threads"),
        ('[backends.x]\nkind = "openai"\nmodel = 5\n', "[backends.x] model"),
        ('[backends.x]\nkind = "openai"\ntemperature = 0.2\n', "unknown key 'temperature'"),
        ('[backends.default]\nkind = "openai"\n', "reserved"),
        ('backends = 3\n', "[backends]"),
        ("[backends.x\nkind = 'openai'\n", "not valid TOML"),
    ],
)
def test_bad_toml_gives_a_config_error_naming_the_place(tmp_path, toml, needle):
    with pytest.raises(ConfigError) as info:  # a table's own problem when it is used; the file's at once
        load_settings({"JUDGE_MCP_CONFIG": write_toml(tmp_path, toml)}).backend("x")
    assert needle in str(info.value)
    assert "sk-literal" not in str(info.value)


@pytest.mark.parametrize("kind, expected", [("openai", 256), ("anthropic", 256), ("local", 4)])
def test_default_concurrency_by_kind(kind, expected, tmp_path):
    env = {"JUDGE_MCP_BACKEND": kind, "JUDGE_MCP_API_KEY": "k"}
    assert load_settings(env).default_backend.concurrency == expected
    toml = write_toml(tmp_path, f'[backends.x]\nkind = "{kind}"\n')
    assert load_settings({**env, "JUDGE_MCP_CONFIG": toml}).backend("x").concurrency == expected
    assert load_settings({**env, "JUDGE_MCP_CONCURRENCY": "3"}).default_backend.concurrency == 3


async def test_the_largest_flip_call_goes_out_at_once_at_the_default_concurrency(mcp_app):
    """16 responses, 16 requests in flight together: each waits at a barrier that opens only when all 16 arrived
    (with fewer in flight it breaks after its timeout, which the test counts)."""
    from mcp import Client

    together = Rendezvous(16, lambda p: '{"instruction": "Name the capital of Australia.", "explanation": "it answers that"}')
    server, backend = mcp_app(together, JUDGE_MCP_MAX_RETRIES="0")
    responses = [f"Answer {k}: Canberra is the capital of Australia." for k in range(16)]
    async with Client(server) as client:
        result = await client.call_tool("infer_instruction_reward", {"instruction": "Name the capital of Australia.", "responses": responses})
    assert not result.is_error, result.content[0].text
    assert len(backend.requests) == 16 and (together.met, together.broken) == (16, 0)


# ---- the file's bytes: what an editor on another system writes --------------------------------------------------
def test_a_toml_file_that_is_not_utf8_is_a_config_error_naming_the_byte(tmp_path):
    """A file saved as Latin-1 or Windows-1252 ("ANSI"): a ConfigError saying so, not a UnicodeDecodeError that
    ends the server with a traceback."""
    path = tmp_path / "judge.toml"
    path.write_bytes(b'# caf\xe9\n[backends.x]\nkind = "openai"\n')
    with pytest.raises(ConfigError) as info:
        load_settings({"JUDGE_MCP_CONFIG": str(path)})
    message = str(info.value)
    assert f"JUDGE_MCP_CONFIG file {str(path)!r} is not UTF-8 text" in message
    assert "line 1" in message and "byte 0xe9" in message and "save it as UTF-8" in message


def test_a_toml_file_starting_with_a_byte_order_mark_is_read(tmp_path):
    """Notepad's "UTF-8 with BOM": the mark is invisible, so tomllib's "Invalid statement (at line 1, column 1)"
    names nothing the user can see; the file is read as the text it shows."""
    path = tmp_path / "judge.toml"
    path.write_bytes('\ufeff[backends.x]\nkind = "openai"\nbase_url = "http://127.0.0.1:9000/v1"\n'.encode("utf-8"))
    assert load_settings({"JUDGE_MCP_CONFIG": str(path)}).backend("x").base_url == "http://127.0.0.1:9000/v1"


def test_an_unset_api_key_env_is_named_only_when_it_reads_as_a_variable_name(tmp_path):
    """A typo'd variable (MY_CLAUDE_KEY) is named so it can be found; a value shaped like a name but not written as
    one (a Groq key is gsk_ and letters and digits) may be the key itself, so it is not shown."""
    for value, shown in (("MY_CLAUDE_KEYY", True), ("gsk_4f9Qz81LmXc0Tt7KpRw2", False)):
        toml = write_toml(tmp_path, f'[backends.x]\nkind = "openai"\napi_key_env = "{value}"\n')
        with pytest.raises(ConfigError) as info:
            load_settings({"JUDGE_MCP_CONFIG": toml}).backend("x")
        assert "which is not set in the server's environment" in str(info.value)
        assert (value in str(info.value)) is shown


@pytest.mark.parametrize("value", ["file:/tmp/judge.db", "file:judge.db?mode=rwc", "FILE:/tmp/judge.db"])
def test_an_sqlite_uri_as_the_database_is_an_error_not_a_folder_named_file(tmp_path, monkeypatch, value):
    """Read as a path, `file:/tmp/judge.db` was a relative one: a folder "file:" made in the server's working directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"JUDGE_MCP_DB takes an SQLite file path, not an SQLite URI \('file:...'\)"):
        load_settings({"JUDGE_MCP_DB": value})
    assert load_settings({"JUDGE_MCP_DB": "files/judge.db"}).database == Path("files/judge.db")  # a folder named file... is a path


# ---- local servers get local defaults (issue 49 item 5) --------------------------------------------------------------
@pytest.mark.parametrize("url", [
    "http://127.0.0.1:11434/v1", "http://localhost:8080/v1", "http://[::1]:8000/v1", "http://10.1.2.3/v1",
    "http://172.20.0.5:8000/v1", "http://192.168.1.9:11434/v1", "http://gpu-box.local:8000/v1",
    "http://host.docker.internal:11434/v1",
])
def test_a_base_url_on_this_machine_or_a_private_network_gets_the_local_timeout(tmp_path, url: str) -> None:
    from judge_mcp.config.settings import LOCAL_TIMEOUT_S

    env = {"HOME": str(tmp_path), "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": url}
    cfg = load_settings(env).default_backend
    assert cfg.timeout_s == LOCAL_TIMEOUT_S == 600.0 and cfg.local_default
    set_by_hand = load_settings({**env, "JUDGE_MCP_TIMEOUT_S": "45"}).default_backend
    assert set_by_hand.timeout_s == 45.0 and set_by_hand.local_default is None


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "https://judge.example/v1", "http://8.8.8.8/v1", "http://172.32.0.1/v1"])
def test_a_hosted_base_url_keeps_the_hosted_timeout(tmp_path, url: str) -> None:
    cfg = load_settings({"HOME": str(tmp_path), "JUDGE_MCP_BACKEND": "openai", "JUDGE_MCP_BASE_URL": url, "JUDGE_MCP_API_KEY": "k"}).default_backend
    assert cfg.timeout_s == 120.0 and cfg.local_default is None


def test_a_toml_backend_on_a_local_server_gets_the_local_timeout_unless_it_sets_one(tmp_path) -> None:
    from judge_mcp.config.settings import local_notes

    path = tmp_path / "judge.toml"
    path.write_text('[backends.ollama]\nkind = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n\n'
                    '[backends.set]\nkind = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\ntimeout_s = 30\n\n'
                    '[backends.embedded]\nkind = "local"\n', encoding="utf-8")
    settings = load_settings({"HOME": str(tmp_path), "JUDGE_MCP_CONFIG": str(path), "JUDGE_MCP_BACKEND": "openai",
                              "JUDGE_MCP_BASE_URL": "http://localhost:11434/v1"})
    assert [settings.backend(n).timeout_s for n in ("ollama", "set", "embedded")] == [600.0, 30.0, 120.0]
    assert local_notes(settings) == [
        "backend 'default' is a local server (localhost): timeout 600 s (JUDGE_MCP_TIMEOUT_S)",
        "backend 'ollama' is a local server (127.0.0.1): timeout 600 s (timeout_s in [backends.ollama])",
    ]


def test_serve_says_at_start_that_a_local_server_gets_the_local_timeout(tmp_path, monkeypatch, capsys) -> None:
    from judge_mcp.cli import main as cli

    for key in [k for k in os.environ if k.startswith("JUDGE_MCP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("JUDGE_MCP_DB", str(tmp_path / "j.db"))
    monkeypatch.setenv("JUDGE_MCP_BACKEND", "openai")
    monkeypatch.setenv("JUDGE_MCP_BASE_URL", "http://127.0.0.1:11434/v1")
    cli._serve_settings()
    assert "judge-mcp: backend 'default' is a local server (127.0.0.1): timeout 600 s (JUDGE_MCP_TIMEOUT_S)" in capsys.readouterr().err
    monkeypatch.setenv("JUDGE_MCP_TIMEOUT_S", "90")
    cli._serve_settings()
    assert "local server" not in capsys.readouterr().err
