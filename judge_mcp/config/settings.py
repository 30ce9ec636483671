"""Settings from the environment, plus named backends from an optional TOML file (JUDGE_MCP_CONFIG).

Keys are resolved here from environment variables and kept only in memory: a `BackendConfig` never
serialises its key (`api_key` is excluded from `public()` and from repr).
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlparse

from judge_mcp import tenants
from judge_mcp.contract.images import HTTP_BODY_BYTES
from judge_mcp.config.table import (
    KINDS, STRUCTURED_OUTPUT_MODES, TOML_NAMES, did_you_mean, read, read_key, unknown_variables, value_of,
)

from judge_mcp.config.values import (
    ConfigError, DENIED, OtelSettings, check_batch, check_reasoning_kind, check_sampling_keys, check_text,
    check_url as _check_url, flag_value, non_negative_int, otel_settings, path_kind, reasoning_effort, thinking_budget,
)

__all__ = ["KINDS", "STRUCTURED_OUTPUT_MODES"]  # declared in config/table.py, with the settings that take them
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
# Provider-wide keys are only ever sent to the provider's own host.
PROVIDER_KEY_ENV = {"openai": ("OPENAI_API_KEY", "api.openai.com"), "anthropic": ("ANTHROPIC_API_KEY", "api.anthropic.com")}
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
DEFAULT_BACKEND_NAME = "default"
# Requests in flight per backend, by kind: the ceiling of the adaptive limit (backends/limiter.py), which starts
# there, drops on 429/503/529 and timeouts and grows back while calls succeed. A remote API gets 256, so a burst of
# 100 compare_pair calls (200 requests) goes out at once and a backend that takes fewer says so with 429; the
# embedded model gets its slot count (each slot holds a share of n_ctx and of 2 CPU cores); the MCP client (sampling) 8.
DEFAULT_CONCURRENCY = {"local": 4, "openai": 256, "anthropic": 256, "sampling": 8}
# The timeout of a backend whose base URL is on this machine or a private network (Ollama, llama.cpp, vLLM on a
# workstation) when none is set: a 7B-class model on CPU takes minutes to start a long answer, past the 120 s that
# suits a hosted API (issue 49 item 5).
LOCAL_TIMEOUT_S = 600.0
_LOCAL_NAMES = ("localhost", "host.docker.internal")


@dataclass(frozen=True)
class BackendConfig:
    name: str
    kind: str
    model: str | None = None  # None for local: the bundled SmolLM2 GGUF
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = DEFAULT_CONCURRENCY["local"]
    timeout_s: float = value_of("JUDGE_MCP_TIMEOUT_S")
    max_retries: int = value_of("JUDGE_MCP_MAX_RETRIES")
    # auto: a schema, until the server refuses it (then the papers' text grammars); json_schema: always; off: never
    structured_output: str = value_of("JUDGE_MCP_STRUCTURED_OUTPUT")
    # auto: a judgment whose calls share a cacheable prefix sends its first call first, the rest once it is answered
    cache_warmup: str = "auto"
    # local only
    n_ctx: int = value_of("n_ctx")
    n_threads: int | None = None
    n_threads_batch: int | None = None  # local only: threads for batches (prompts, several slots at once); default all cores
    max_output_tokens: int | None = None  # local only: a cap on the answer budget (default none: the method's, as over HTTP)
    mmproj: str | None = None  # local only: the model's multimodal projector (a GGUF file); without it no images
    batch: bool = False  # openai / anthropic: `judge-mcp bench` sends through the provider's batch API (never tool calls)
    # sampling only: ModelPreferences priorities sent with every request, (name, 0..1) pairs; `model` is the hint
    priorities: tuple[tuple[str, float], ...] = ()
    # reasoning models (backends/reasoning.py): openai's reasoning_effort; the output budget added for reasoning
    # (None: DEFAULT_REASONING_BUDGET for a model known or learned to reason, else 0); anthropic's extended thinking
    reasoning_effort: str | None = None
    reasoning_budget_tokens: int | None = None
    thinking_budget_tokens: int | None = None
    # the host of a base URL on this machine or a private network whose timeout is LOCAL_TIMEOUT_S because none was
    # set (serve says so at start); None otherwise
    local_default: str | None = None


@dataclass(frozen=True)
class Settings:
    db_path: Path
    default_backend: BackendConfig
    named_backends: Mapping[str, BackendConfig]
    http_token: str | None = field(default=None, repr=False)
    http_tokens: Mapping[str, str] | None = field(default=None, repr=False)  # every token -> its tenant (tenants.py)
    http_reserved_ok: frozenset[str] = frozenset()  # reserved tenant names the tokens file and OAuth claims may name
    # retention (None: kept for ever): applied when the server starts and by `judge-mcp gc`
    cache_max_age_days: float | None = None
    verdicts_max_age_days: float | None = None
    # Set when the configuration could not be read (`settings_or_error`): the server starts anyway and every call
    # that needs a backend fails with this message, so an MCP client shows it instead of "Failed to connect".
    config_error: str | None = None
    # grade_score_options' unrelated option may come from options stored by earlier calls of any client
    shared_option_pool: bool = False
    # the call cache shares configured backends' deterministic answers across tenants (visible to them: calls/cache.py)
    shared_cache: bool = False
    # the price of a cached prompt token over an uncached one on OpenAI-compatible servers (JUDGE_MCP_CACHED_INPUT_PRICE):
    # judge_stats' and the bench's billed-equivalent input; Anthropic's own ratios are fixed (calls/usage.py)
    cached_input_price: float = 0.5
    # JUDGE_MCP_DB as a postgresql:// URL or libpq keyword DSN (then db_path is unused); its password is never shown
    # (storage/pg_url.py)
    db_url: str | None = field(default=None, repr=False)
    # serve --transport http without sessions (replicas behind a load balancer): JUDGE_MCP_HTTP_STATELESS
    http_stateless: bool = False

    @property
    def database(self) -> str | Path:
        """What the store opens: the PostgreSQL URL, else the SQLite file."""
        return self.db_url or self.db_path
    # the HTTP transport's request-body limit (bytes): by default it fits a call's image limits
    http_max_body_bytes: int = HTTP_BODY_BYTES
    # folders an image argument may name a file in, over stdio only (JUDGE_MCP_IMAGE_DIRS), resolved
    image_dirs: tuple[Path, ...] = ()
    # OpenTelemetry traces of tool and model calls (judge_mcp/telemetry/hooks.py): JUDGE_MCP_OTEL and the standard OTEL_* settings
    otel: OtelSettings = OtelSettings()
    # [backends.NAME] tables that could not be read, by name: a call naming one fails with its message, the rest work
    broken_backends: Mapping[str, str] = field(default_factory=dict)
    # things worth a look that stop nothing (a JUDGE_MCP_* variable judge-mcp does not read): on stderr at start and
    # in every tool result's warnings or error
    warnings: tuple[str, ...] = ()

    def backend_names(self) -> list[str]:
        return [DEFAULT_BACKEND_NAME, *sorted({*self.named_backends, *self.broken_backends})]

    def backend(self, name: str | None) -> BackendConfig:
        if self.config_error is not None:
            raise ConfigError(
                f"judge-mcp's configuration has an error: {self.config_error}. Fix it in the server's environment "
                "(the MCP client's \"env\" block) or its JUDGE_MCP_CONFIG file, then restart the server"
            )
        if name is None or name == DEFAULT_BACKEND_NAME:
            return self.default_backend
        if name in self.broken_backends:
            raise ConfigError(f"{self.broken_backends[name]}. Fix the table, then restart the server")
        try:
            return self.named_backends[name]
        except KeyError:
            known = ", ".join(self.backend_names())
            raise ConfigError(f"unknown backend '{name}'; known backends: {known}") from None


def missing_key(cfg: BackendConfig) -> str | None:
    """Why `cfg` cannot work (a provider's public API without a key), or None. Checked before the first call, so a
    first run fails at once naming the variable to set instead of after a round of retried 401s. A base URL of
    another host (a local vLLM, Ollama or llama.cpp server) may need no key and is left to answer for itself."""
    if cfg.kind not in PROVIDER_KEY_ENV or cfg.api_key:
        return None
    env_name, provider_host = PROVIDER_KEY_ENV[cfg.kind]
    url = cfg.base_url or DEFAULT_BASE_URLS[cfg.kind]
    if _host(url) != provider_host:
        return None
    where = "JUDGE_MCP_API_KEY" if cfg.name == DEFAULT_BACKEND_NAME else f"api_key_env in [backends.{cfg.name}]"
    return (
        f"backend '{cfg.name}' ({cfg.kind} at {url}, model {cfg.model}) has no API key: set {where} or {env_name}, "
        "or set JUDGE_MCP_BASE_URL to a server that needs none"
    )


def _host(url: str) -> str:
    return (urlparse(url).hostname or "").lower()


def local_server(url: str | None) -> str | None:
    """The host of `url` when it is on this machine or a private network (loopback, 10/8, 172.16/12, 192.168/16,
    IPv6 unique-local, localhost, *.local, host.docker.internal), else None."""
    if not url:
        return None
    host = _host(url)
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local")):
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return host if address.is_loopback or (address.is_private and not address.is_link_local and not address.is_unspecified) else None


def local_notes(settings: Settings) -> list[str]:
    """What a start says of each backend whose timeout is the local-server default, with the setting that changes it."""
    if settings.config_error is not None:
        return []
    notes = []
    for cfg in [settings.default_backend, *(settings.named_backends[name] for name in sorted(settings.named_backends))]:
        if cfg.local_default is not None:
            setting = "JUDGE_MCP_TIMEOUT_S" if cfg.name == DEFAULT_BACKEND_NAME else f"timeout_s in [backends.{cfg.name}]"
            notes.append(f"backend '{cfg.name}' is a local server ({cfg.local_default}): timeout {cfg.timeout_s:g} s ({setting})")
    return notes


def _timeout(explicit: Any, url: str | None, read_it: Callable[[], float]) -> tuple[float, str | None]:
    """(timeout, host): the timeout set (`read_it`), or where none is set and the URL is a local server's,
    LOCAL_TIMEOUT_S and that server's host."""
    host = local_server(url)
    if host is not None and (explicit is None or str(explicit).strip() == ""):
        return LOCAL_TIMEOUT_S, host
    return read_it(), None


def _optional(env: Mapping[str, str], name: str) -> Any:
    """A setting without a default: its declared parser's reading, or None when unset."""
    return read(env, name)


def cached_input_price(env: Mapping[str, str]) -> float:
    """JUDGE_MCP_CACHED_INPUT_PRICE (default 0.5), a ConfigError naming it when it is not a number from 0 to 1."""
    return float(read(env, "JUDGE_MCP_CACHED_INPUT_PRICE"))


def _reasoning(kind: str, effort: Any, budget: Any, thinking: Any, name: Callable[[str], str]) -> dict[str, Any]:
    """The three reasoning settings of one backend, each checked (`name(key)`: the variable or key to name)."""
    values = {
        "reasoning_effort": reasoning_effort(effort, name("reasoning_effort")),
        "reasoning_budget_tokens": None if budget is None or str(budget).strip() == "" else non_negative_int(budget, name("reasoning_budget_tokens")),
        "thinking_budget_tokens": thinking_budget(thinking, name("thinking_budget_tokens")),
    }
    check_reasoning_kind(kind, values, name)
    return values


def _env(env: Mapping[str, str], name: str, default: Any) -> Any:
    """An environment value; set-but-empty counts as unset."""
    value = env.get(name)
    return default if value is None or value.strip() == "" else value


def backend_kind(env: Mapping[str, str]) -> str:
    """JUDGE_MCP_BACKEND, or where it is unset the backend that what is set belongs to: a base URL is a server's
    (OpenAI-compatible, or Anthropic's own host), a lone provider key its provider's; nothing set, the embedded model.
    What names no one backend (both provider keys, JUDGE_MCP_API_KEY alone, a model name that is no GGUF file) is an
    error saying which variable to set, never a silent judge of another kind."""
    given = _env(env, "JUDGE_MCP_BACKEND", None)
    if given is not None:
        return str(read(env, "JUDGE_MCP_BACKEND"))
    base_url = _check_url(env.get("JUDGE_MCP_BASE_URL"), "JUDGE_MCP_BASE_URL")  # a malformed one: its own clear error
    model = _env(env, "JUDGE_MCP_MODEL", None)
    if base_url is not None:
        if model is not None and model.strip().lower().endswith(".gguf"):
            raise ConfigError(f"JUDGE_MCP_MODEL={model!r} is a GGUF file (the embedded model) and JUDGE_MCP_BASE_URL names a "
                              "server, and JUDGE_MCP_BACKEND is not set: set JUDGE_MCP_BACKEND=local or JUDGE_MCP_BACKEND=openai")
        return "anthropic" if _host(base_url) == PROVIDER_KEY_ENV["anthropic"][1] else "openai"
    keyed = [kind for kind, (name, _) in PROVIDER_KEY_ENV.items() if _env(env, name, None) is not None]
    if len(keyed) > 1:
        raise ConfigError("OPENAI_API_KEY and ANTHROPIC_API_KEY are both set and JUDGE_MCP_BACKEND is not: set "
                          "JUDGE_MCP_BACKEND=openai or JUDGE_MCP_BACKEND=anthropic (or local, the bundled model)")
    if keyed:
        return keyed[0]
    if _env(env, "JUDGE_MCP_API_KEY", None) is not None:
        raise ConfigError("JUDGE_MCP_API_KEY is set but JUDGE_MCP_BACKEND is not: set JUDGE_MCP_BACKEND=openai (with "
                          "JUDGE_MCP_BASE_URL for a server other than OpenAI's) or JUDGE_MCP_BACKEND=anthropic")
    if model is not None and not model.strip().lower().endswith(".gguf") and path_kind(os.path.expanduser(model)) != "file":
        raise ConfigError(f"JUDGE_MCP_MODEL={model!r} is no GGUF file, and without JUDGE_MCP_BACKEND the judge is the embedded "
                          "llama.cpp model, which reads one. For a model on a server set JUDGE_MCP_BACKEND=openai and "
                          "JUDGE_MCP_BASE_URL (Ollama: http://127.0.0.1:11434/v1); for the embedded model, a .gguf path")
    return "local"


def backend_from_env(env: Mapping[str, str]) -> BackendConfig:
    kind = backend_kind(env)
    base_url = _check_url(env.get("JUDGE_MCP_BASE_URL"), "JUDGE_MCP_BASE_URL")
    model = _env(env, "JUDGE_MCP_MODEL", None) or (DEFAULT_MODELS.get(kind) if kind != "local" else None)
    explicit = _env(env, "JUDGE_MCP_API_KEY", None)
    url = base_url if kind in PROVIDER_KEY_ENV else None
    timeout_s, local_host = _timeout(env.get("JUDGE_MCP_TIMEOUT_S"), url, lambda: read(env, "JUDGE_MCP_TIMEOUT_S"))
    cfg = BackendConfig(
        name=DEFAULT_BACKEND_NAME,
        kind=kind,
        model=model,
        base_url=base_url if kind not in ("local", "sampling") else None,
        api_key=None,
        concurrency=read(env, "JUDGE_MCP_CONCURRENCY", DEFAULT_CONCURRENCY[kind]),
        timeout_s=timeout_s,
        local_default=local_host,
        max_retries=read(env, "JUDGE_MCP_MAX_RETRIES"),
        structured_output=read(env, "JUDGE_MCP_STRUCTURED_OUTPUT"),
        cache_warmup=read(env, "JUDGE_MCP_CACHE_WARMUP"),
        **_reasoning(
            kind, _env(env, "JUDGE_MCP_REASONING_EFFORT", None), _env(env, "JUDGE_MCP_REASONING_BUDGET_TOKENS", None),
            _env(env, "JUDGE_MCP_THINKING_BUDGET_TOKENS", None), lambda key: f"JUDGE_MCP_{key.upper()}",
        ),
        max_output_tokens=_optional(env, "JUDGE_MCP_MAX_OUTPUT_TOKENS") if kind == "local" else None,
        mmproj=_env(env, "JUDGE_MCP_MMPROJ", None) if kind == "local" else None,
    )
    if kind in PROVIDER_KEY_ENV:
        cfg = replace(cfg, api_key=explicit or _provider_key(kind, base_url, env))
    return cfg


def _provider_key(kind: str, base_url: str | None, env: Mapping[str, str]) -> str | None:
    """The provider-wide key (OPENAI_API_KEY / ANTHROPIC_API_KEY), but only for the provider's own host over https:
    a local or third-party base URL never receives it (give those a key with JUDGE_MCP_API_KEY or api_key_env)."""
    env_name, provider_host = PROVIDER_KEY_ENV[kind]
    if base_url is not None:
        parsed = urlparse(base_url)
        if parsed.scheme != "https" or _host(base_url) != provider_host:
            return None
    return _env(env, env_name, None)


_TOML_KEYS = TOML_NAMES  # table.TOML_KEYS: each key's type, default and help


def backends_from_toml(path: Path, env: Mapping[str, str]) -> dict[str, BackendConfig]:
    """Every [backends.NAME] table of the file, or the first table's error (see `read_backends` for one by one)."""
    named, broken = read_backends(path, env)
    for problem in broken.values():
        raise ConfigError(problem)
    return named


def _toml_text(path: Path) -> str:
    """The file's text. A leading byte order mark (what Notepad's "UTF-8 with BOM" writes, invisible in an editor) is
    dropped; bytes that are not UTF-8 (a file saved as Latin-1 or Windows-1252) are a ConfigError naming the line."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"JUDGE_MCP_CONFIG file {str(path)!r} is not UTF-8 text (line {line} holds byte 0x{raw[exc.start]:02x}); "
            "save it as UTF-8"
        ) from None


def read_backends(path: Path, env: Mapping[str, str]) -> tuple[dict[str, BackendConfig], dict[str, str]]:
    """(tables read, {name: error} of the rest): one table's mistake leaves the others working; `path` shown absolute."""
    path = path.expanduser().absolute()
    try:
        data = tomllib.loads(_toml_text(path))
    except FileNotFoundError:
        raise ConfigError(f"JUDGE_MCP_CONFIG points to {str(path)!r}, which does not exist") from None
    except OSError as exc:
        raise ConfigError(f"JUDGE_MCP_CONFIG file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"JUDGE_MCP_CONFIG file {str(path)!r} is not valid TOML: {exc}") from None
    unknown_tables = sorted(set(data) - {"backends"})
    if unknown_tables:
        hint = " (did you mean [backends.NAME]?)" if any(t.lower().startswith("backend") for t in unknown_tables) else ""
        raise ConfigError(f"{path}: unknown table or key {', '.join(map(repr, unknown_tables))}{hint}; the file holds only [backends.NAME] tables")
    tables = data.get("backends", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: [backends] must be a table of [backends.NAME] tables")
    if DEFAULT_BACKEND_NAME in tables:
        raise ConfigError(f"{path}: [backends.{DEFAULT_BACKEND_NAME}]: the name 'default' is reserved for the environment's backend")
    named: dict[str, BackendConfig] = {}
    broken: dict[str, str] = {}  # a table's own problem fails the calls naming it (Settings.backend), not the others
    for name, table in tables.items():
        try:
            named[name] = _backend_from_table(name, table, path, env)
        except ConfigError as exc:
            broken[name] = str(exc)
    return named, broken


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONVENTIONAL_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def _table_key(key_env: str, env: Mapping[str, str], where: str) -> str:
    """The key in the variable a table's api_key_env names. The value is quoted in the error only when it reads as a
    variable's name (MY_CLAUDE_KEY): a user who pasted the key itself there gets an error that does not show it."""
    if not _VARIABLE_NAME.fullmatch(key_env):
        raise ConfigError(
            f"{where}: api_key_env must be the name of an environment variable (such as OPENAI_API_KEY), not the key "
            "itself (the value is not shown): put the key in the server's environment and name that variable here"
        )
    key = _env(env, key_env, None)
    if not key:
        named = repr(key_env) if _CONVENTIONAL_NAME.fullmatch(key_env) else "a variable (its name is not shown, in case it is the key)"
        raise ConfigError(f"{where}: api_key_env names {named}, which is not set in the server's environment")
    return key


def _backend_from_table(name: str, table: Any, path: Path, env: Mapping[str, str]) -> BackendConfig:
    """One [backends.NAME] table as a BackendConfig; a ConfigError naming the table and the problem."""
    where = f"{path}: [backends.{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - _TOML_KEYS - {"api_key"})
    if unknown:
        named = ", ".join(f"{key!r}{did_you_mean(key, _TOML_KEYS)}" for key in unknown)
        raise ConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {named}; allowed: {', '.join(sorted(_TOML_KEYS))}")
    if "api_key" in table:
        raise ConfigError(f"{where}: put the key in an environment variable and name it with api_key_env")
    kind = read_key(table, "kind", where, "")
    base_url = _check_url(table.get("base_url"), f"{where} base_url")
    key_env = check_text(table.get("api_key_env"), f"{where} api_key_env")
    key = _table_key(key_env, env, where) if key_env else _provider_key(kind, base_url, env) if kind in PROVIDER_KEY_ENV else None
    if kind != "local" and table.get("mmproj") is not None:
        raise ConfigError(f"{where}: mmproj (a multimodal projector file) applies to kind = \"local\" only")
    url = base_url if kind in PROVIDER_KEY_ENV else None
    timeout_s, local_host = _timeout(table.get("timeout_s"), url, lambda: read_key(table, "timeout_s", where))
    return BackendConfig(
        name=name,
        kind=kind,
        model=check_text(table.get("model"), f"{where} model") or (DEFAULT_MODELS.get(kind) if kind != "local" else None),
        base_url=base_url,
        api_key=key,
        concurrency=read_key(table, "concurrency", where, DEFAULT_CONCURRENCY[kind]),
        timeout_s=timeout_s,
        local_default=local_host,
        # a table without its own max_retries follows JUDGE_MCP_MAX_RETRIES, as the environment's backend does
        max_retries=read_key(table, "max_retries", where, read(env, "JUDGE_MCP_MAX_RETRIES")),
        structured_output=read_key(table, "structured_output", where),
        # a table without its own cache_warmup follows JUDGE_MCP_CACHE_WARMUP
        cache_warmup=read_key(table, "cache_warmup", where, read(env, "JUDGE_MCP_CACHE_WARMUP")),
        **_reasoning(
            kind, table.get("reasoning_effort"), table.get("reasoning_budget_tokens"), table.get("thinking_budget_tokens"),
            lambda key: f"{where} {key}",
        ),
        n_ctx=read_key(table, "n_ctx", where),
        n_threads=read_key(table, "n_threads", where),
        n_threads_batch=read_key(table, "n_threads_batch", where),
        max_output_tokens=read_key(table, "max_output_tokens", where),
        mmproj=check_text(table.get("mmproj"), f"{where} mmproj"),
        batch=check_batch(table.get("batch", False), kind, f"{where} batch"),
        priorities=check_sampling_keys(table, kind, where),
    )


def default_db_path(env: Mapping[str, str], platform: str | None = None) -> Path:
    """The per-user database, never a path relative to whatever directory a client launches the server in:
    `$XDG_DATA_HOME/judge-mcp/judge.db` (else `~/.local/share/judge-mcp/judge.db`) on Linux and other Unixes,
    `~/Library/Application Support/judge-mcp/judge.db` on macOS, `%LOCALAPPDATA%\\judge-mcp\\judge.db` on Windows."""
    platform = platform or sys.platform
    home = Path(_env(env, "HOME", None) or Path.home())
    if platform.startswith("win"):
        base = Path(_env(env, "LOCALAPPDATA", None) or home / "AppData" / "Local")
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = _env(env, "XDG_DATA_HOME", None)
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".local" / "share"  # the spec ignores relative
    return base / "judge-mcp" / "judge.db"


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    default = backend_from_env(env)
    config_path = _env(env, "JUDGE_MCP_CONFIG", None)
    named, broken = read_backends(Path(config_path), env) if config_path else ({}, {})
    db_path, db_url = _database(env)
    return Settings(
        db_path=db_path,
        default_backend=default,
        named_backends=named,
        http_token=_http_token(env),
        http_tokens=_http_tokens(env),
        http_reserved_ok=_reserved_ok(env),
        cache_max_age_days=_optional(env, "JUDGE_MCP_CACHE_MAX_AGE_DAYS"),
        verdicts_max_age_days=_optional(env, "JUDGE_MCP_VERDICTS_MAX_AGE_DAYS"),
        shared_option_pool=flag_value(env.get("JUDGE_MCP_SHARED_OPTION_POOL"), "JUDGE_MCP_SHARED_OPTION_POOL"),
        shared_cache=flag_value(env.get("JUDGE_MCP_SHARED_CACHE"), "JUDGE_MCP_SHARED_CACHE"),
        cached_input_price=cached_input_price(env),
        db_url=db_url,
        http_stateless=flag_value(env.get("JUDGE_MCP_HTTP_STATELESS"), "JUDGE_MCP_HTTP_STATELESS"),
        http_max_body_bytes=_optional(env, "JUDGE_MCP_HTTP_MAX_BODY_BYTES") or HTTP_BODY_BYTES,
        image_dirs=_image_dirs(env),
        otel=otel_settings(env),
        broken_backends=broken,
        warnings=tuple(unknown_variables(env)),
    )


def load_settings_over(overrides: Mapping[str, str]) -> Settings:
    """`load_settings` from the environment with `overrides` on top (the Python API's keyword settings)."""
    return load_settings({**os.environ, **overrides})


def _image_dirs(env: Mapping[str, str]) -> tuple[Path, ...]:
    """JUDGE_MCP_IMAGE_DIRS: folders separated by os.pathsep, each an existing directory, resolved (symlinks too)."""
    value = _env(env, "JUDGE_MCP_IMAGE_DIRS", None)
    folders = []
    for part in (value or "").split(os.pathsep):
        if not part.strip():
            continue
        folder = Path(part).expanduser().resolve()
        kind = path_kind(folder)
        if kind == "denied":
            raise ConfigError(f"JUDGE_MCP_IMAGE_DIRS lists {part!r}, but {DENIED}")
        if kind != "folder":
            raise ConfigError(f"JUDGE_MCP_IMAGE_DIRS lists {part!r}, which is not a folder")
        folders.append(folder)
    return tuple(folders)


def default_bench_db_path(env: Mapping[str, str] | None = None) -> Path:
    """`judge-mcp bench`'s database: bench.db beside the server's default one, in the per-user data directory."""
    return default_db_path(os.environ if env is None else env).parent / "bench.db"


def _db_path(env: Mapping[str, str]) -> Path:
    # MCP clients pass env from JSON without a shell, so expand ~ here
    explicit_db = _env(env, "JUDGE_MCP_DB", None)
    return Path(explicit_db).expanduser() if explicit_db else default_db_path(env)


def _database(env: Mapping[str, str]) -> tuple[Path, str | None]:
    """(SQLite file, PostgreSQL connection string or None) from JUDGE_MCP_DB: a postgresql:// URL or a libpq keyword
    DSN (its password registered for redaction) leaves the file at its default; one libpq would read otherwise than
    meant, or any other `scheme://`, is an error that shows none of the value's secrets."""
    # lazy: the database URL's reader loads only when JUDGE_MCP_DB is set
    from judge_mcp.storage.pg_url import SCHEMES, check, is_postgres_url, register_secrets, scheme_of

    value = _env(env, "JUDGE_MCP_DB", None)
    if value is not None and value.strip().lower().startswith("file:") and not scheme_of(value):
        # SQLite's URI form (file:/path?mode=ro) read as a path is a folder named "file:" in whatever directory the
        # client started the server in
        raise ConfigError("JUDGE_MCP_DB takes an SQLite file path, not an SQLite URI ('file:...'): give the path itself, e.g. /home/you/judge.db")
    if value is None or not (scheme_of(value) or is_postgres_url(value)):
        return _db_path(env), None
    value = value.strip()
    scheme = scheme_of(value)
    if scheme is not None and scheme not in SCHEMES:
        raise ConfigError(
            f"JUDGE_MCP_DB must be an SQLite file path, a postgresql:// URL or a libpq keyword DSN (host=... dbname=...); "
            f"got a {scheme}:// URL (nothing after the scheme is shown)"
        )
    register_secrets(value)
    problem = check(value)
    if problem:
        raise ConfigError(f"JUDGE_MCP_DB is not a PostgreSQL connection string libpq reads as written: {problem}")
    return default_db_path(env), value


def settings_or_error(env: Mapping[str, str] | None = None) -> Settings:
    """`load_settings`, or, when the configuration has an error, settings that carry it (`config_error`) with the
    database path and the embedded backend in place of the rest: the server then starts and answers each call that
    needs a backend with the error, where a user looks, instead of exiting before the MCP handshake. An unusable
    JUDGE_MCP_DB is raised instead (ConfigError): no tool may use another database in its place."""
    env = os.environ if env is None else env
    try:
        return load_settings(env)
    except ConfigError as exc:
        db_path, db_url = _database(env)  # JUDGE_MCP_DB itself is the error: raised, never another database in its place
        return Settings(
            db_path=db_path, db_url=db_url, default_backend=BackendConfig(DEFAULT_BACKEND_NAME, "local"), named_backends={}, config_error=str(exc),
            warnings=tuple(unknown_variables(env)),
        )
MIN_REMOTE_TOKEN_CHARS = 16  # a shorter token is refused on a non-loopback bind (see transports/http.http_app)


def _http_tokens(env: Mapping[str, str]) -> dict[str, str] | None:
    try:
        return tenants.http_tokens(_http_token(env), _env(env, "JUDGE_MCP_HTTP_TOKENS", None), _reserved_ok(env))
    except tenants.TokenFileError as exc:
        raise ConfigError(str(exc)) from None


def _reserved_ok(env: Mapping[str, str]) -> frozenset[str]:
    """JUDGE_MCP_HTTP_RESERVED_TENANTS: the reserved tenant names (`local`, `default`) the operator lets the tokens
    file and OAuth claims name (tenants.reserved_allowed)."""
    try:
        return tenants.reserved_allowed(env.get("JUDGE_MCP_HTTP_RESERVED_TENANTS", ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _http_token(env: Mapping[str, str]) -> str | None:
    """JUDGE_MCP_HTTP_TOKEN with surrounding whitespace trimmed (a token pasted with its newline still matches what
    clients send); whitespace or control characters inside it could never arrive in a header, so they are refused."""
    token = _env(env, "JUDGE_MCP_HTTP_TOKEN", None)
    if token is None:
        return None
    token = token.strip()
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token) or not token.isascii():
        raise ConfigError("JUDGE_MCP_HTTP_TOKEN must be printable ASCII without spaces (e.g. `openssl rand -hex 32`)")
    return token
