"""Every setting declared once: the `JUDGE_MCP_*` environment variables and the keys of a `[backends.NAME]` table in the
JUDGE_MCP_CONFIG file, each with its type, default and one line of help.

The readers (config/settings.py) take each setting's default and parser from here where the setting has one typed
default (`value`, shown as its `default`) and one parser (`parse`, from config/values.py): `read` and `read_key`.
`serve --help` prints ENVIRONMENT from here (`serve_help`), the README's configuration table and docs/configuration.md's
TOML table are `markdown_table(...)` (a test holds them to it: `python -m judge_mcp.config.table` prints both), the
config reader takes its allowed TOML keys from TOML_KEYS, and `unknown_variables` names a misspelt `JUDGE_MCP_*`
variable with the nearest known one.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_mcp.config.values import non_negative_int, one_of, positive_float, positive_int, unit_ratio

PREFIX = "JUDGE_MCP_"
_WINDOWS_SEP = "':' (';' on Windows)"  # serve --help shows this platform's separator


KINDS = ("local", "openai", "anthropic", "sampling")  # sampling: the MCP client's own model (backends/sampling.py)
STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "off")
CACHE_WARMUP_MODES = ("auto", "off")


@dataclass(frozen=True)
class Setting:
    name: str  # the variable (JUDGE_MCP_...) or the TOML key, as the user writes it
    type: str  # what it takes, in words a user reads: "whole number >= 1", "local | openai | ..."
    default: str
    help: str  # one line
    value: Any = None  # the default the readers use, when it is one value (then `default` shows it: a test holds them equal)
    parse: Callable[[Any, str], Any] | None = None  # the one parser of its values (config/values.py), where the readers use one


ENVIRONMENT: tuple[Setting, ...] = (
    Setting("JUDGE_MCP_BACKEND", " | ".join(KINDS), "from what is set, else local",
            "the judge: the embedded model, any OpenAI-compatible server, Anthropic, or the MCP client's own model; "
            "unset, JUDGE_MCP_BASE_URL or a lone provider key selects its backend",
            parse=one_of(KINDS)),  # no one default: settings.backend_kind reads what else is set
    Setting("JUDGE_MCP_MODEL", "text", "SmolLM2-135M (local), gpt-4o-mini, claude-sonnet-4-5",
            "the model name; for local, a path to a GGUF file; for sampling, a hint to the client"),
    Setting("JUDGE_MCP_BASE_URL", "http(s) URL", "the provider's public URL", "where the backend answers, e.g. http://127.0.0.1:8000/v1"),
    Setting("JUDGE_MCP_API_KEY", "text", "OPENAI_API_KEY / ANTHROPIC_API_KEY, for the provider's own host only", "the backend's key"),
    Setting("JUDGE_MCP_DB", "file path or postgresql:// URL", "the per-user data directory",
            "the SQLite file holding all state, or a PostgreSQL database shared by replicas"),
    Setting("JUDGE_MCP_CONFIG", "file path", "none", "a TOML file of [backends.NAME] tables (docs/configuration.md)"),
    Setting("JUDGE_MCP_HTTP_TOKEN", "printable ASCII", "none (HTTP binds loopback only)", "the bearer token --transport http requires (tenant `default`)"),
    Setting("JUDGE_MCP_HTTP_TOKENS", "file path", "none", "a file of `TOKEN TENANT` lines: one bearer token per tenant (docs/http.md)"),
    Setting("JUDGE_MCP_HTTP_RESERVED_TENANTS", "local, default or both", "none",
            "tenant names the tokens file and OAuth claims may name too (reserved for stdio and JUDGE_MCP_HTTP_TOKEN)"),
    Setting("JUDGE_MCP_OAUTH_ISSUER", "https URL", "none", "accept OAuth JWT access tokens from this issuer too (docs/http.md)"),
    Setting("JUDGE_MCP_OAUTH_AUDIENCE", "text", "none (required with an issuer)", "this server's name in the tokens' `aud`"),
    Setting("JUDGE_MCP_OAUTH_JWKS_URL", "http(s) URL", "ISSUER/.well-known/jwks.json", "where the issuer publishes its signing keys"),
    Setting("JUDGE_MCP_OAUTH_TENANT_CLAIM", "text", "tenant", "the token claim naming the caller's tenant"),
    Setting("JUDGE_MCP_HTTP_STATELESS", "0 | 1", "0", "1: as serve --stateless (HTTP without sessions, for replicas)"),
    Setting("JUDGE_MCP_HTTP_MAX_BODY_BYTES", "whole number >= 1", "about 29 MiB (one call's images)", "the HTTP transport's request-body limit",
            parse=positive_int),
    Setting("JUDGE_MCP_IMAGE_DIRS", "folders separated by ':' (';' on Windows)", "none (data: URIs only)",
            "folders an image argument may name a file in; stdio only"),
    Setting("JUDGE_MCP_CONCURRENCY", "whole number >= 1", "256 (openai, anthropic), 4 (local), 8 (sampling)",
            "the most requests in flight per backend; the limit adapts below it on 429/503", parse=positive_int),
    Setting("JUDGE_MCP_TIMEOUT_S", "number > 0", "120",
            "seconds a backend may take to start its reply; unset, 600 for a base URL on this machine or a private network",
            value=120.0, parse=positive_float),
    Setting("JUDGE_MCP_MAX_RETRIES", "whole number >= 0", "3", "retries of a refused call (429, 5xx, connection errors)",
            value=3, parse=non_negative_int),
    Setting(
        "JUDGE_MCP_MAX_OUTPUT_TOKENS", "whole number >= 1", "128 for the bundled model, else none (the method's budget)",
        "local only: a cap on every answer's token budget", parse=positive_int,
    ),
    Setting("JUDGE_MCP_MMPROJ", "file path", "none (no images on local)", "local only: the model's multimodal projector (mmproj GGUF)"),
    Setting("JUDGE_MCP_STRUCTURED_OUTPUT", " | ".join(STRUCTURED_OUTPUT_MODES), "auto",
            "auto: a JSON schema until the server refuses it, then text grammars; json_schema: always; off: never",
            value="auto", parse=one_of(STRUCTURED_OUTPUT_MODES)),
    Setting("JUDGE_MCP_CACHE_WARMUP", " | ".join(CACHE_WARMUP_MODES), "auto",
            "auto: where a judgment's calls share a cacheable prefix, the first goes first and the rest once it is answered; off: all at once",
            value="auto", parse=one_of(CACHE_WARMUP_MODES)),
    Setting("JUDGE_MCP_CACHED_INPUT_PRICE", "number 0..1", "0.5",
            "the price of a cached prompt token over an uncached one on OpenAI-compatible servers (billed-equivalent input)",
            value=0.5, parse=unit_ratio),
    Setting("JUDGE_MCP_REASONING_EFFORT", "none | minimal | low | medium | high | xhigh", "the model's own",
            "openai only: reasoning_effort sent to every request (which values a model takes, its server says)"),
    Setting("JUDGE_MCP_REASONING_BUDGET_TOKENS", "whole number >= 0", "16384 for a model known or learned to reason, else 0",
            "openai / anthropic: output tokens added to every method's answer budget for hidden reasoning"),
    Setting("JUDGE_MCP_THINKING_BUDGET_TOKENS", "0 or whole number >= 1024", "0 (off)",
            "anthropic only: extended thinking on, with this budget_tokens (added to the output budget)"),
    Setting("JUDGE_MCP_CACHE_MAX_AGE_DAYS", "number > 0", "kept", "cached answers older than this are deleted at start", parse=positive_float),
    Setting("JUDGE_MCP_VERDICTS_MAX_AGE_DAYS", "number > 0", "kept", "verdict-log rows older than this are deleted at start", parse=positive_float),
    Setting("JUDGE_MCP_SHARED_OPTION_POOL", "0 | 1", "0", "1: grade_score_options' unrelated option may come from other clients' stored options"),
    Setting("JUDGE_MCP_SHARED_CACHE", "0 | 1", "0",
            "1: tenants share the cached answers of configured backends (a hit tells one what another sent)"),
    Setting("JUDGE_MCP_OTEL", "0 | 1", "on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER is set",
            "1: OpenTelemetry traces (the otel extra); 0: none, whatever OTEL_* says"),
    Setting("JUDGE_MCP_OTEL_CAPTURE_TEXT", "0 | 1", "0", "1: spans may carry judged text and the model's text"),
)

TOML_KEYS: tuple[Setting, ...] = (
    Setting("kind", " | ".join(KINDS), "(required)", "the backend's kind, as JUDGE_MCP_BACKEND", parse=one_of(KINDS)),
    Setting("model", "text", "as JUDGE_MCP_MODEL", "the model name; for local, a path to a GGUF file"),
    Setting("base_url", "http(s) URL", "the provider's public URL", "where the backend answers"),
    Setting("api_key_env", "variable name", "OPENAI_API_KEY / ANTHROPIC_API_KEY, for the provider's own host only",
            "the environment variable holding the key (never the key itself)"),
    Setting("concurrency", "whole number >= 1", "as JUDGE_MCP_CONCURRENCY", "the most requests in flight", parse=positive_int),
    Setting("timeout_s", "number > 0", "120",
            "seconds the backend may take to start its reply; unset, 600 for a base_url on this machine or a private network",
            value=120.0, parse=positive_float),
    Setting("max_retries", "whole number >= 0", "JUDGE_MCP_MAX_RETRIES, else 3", "retries of a refused call", parse=non_negative_int),
    Setting("structured_output", " | ".join(STRUCTURED_OUTPUT_MODES), "auto", "as JUDGE_MCP_STRUCTURED_OUTPUT",
            value="auto", parse=one_of(STRUCTURED_OUTPUT_MODES)),
    Setting("cache_warmup", " | ".join(CACHE_WARMUP_MODES), "JUDGE_MCP_CACHE_WARMUP, else auto", "as JUDGE_MCP_CACHE_WARMUP, for this backend",
            parse=one_of(CACHE_WARMUP_MODES)),
    Setting("reasoning_effort", "none | minimal | low | medium | high | xhigh", "the model's own", "as JUDGE_MCP_REASONING_EFFORT"),
    Setting("reasoning_budget_tokens", "whole number >= 0", "16384 for a model known or learned to reason, else 0",
            "as JUDGE_MCP_REASONING_BUDGET_TOKENS"),
    Setting("thinking_budget_tokens", "0 or whole number >= 1024", "0 (off)", "as JUDGE_MCP_THINKING_BUDGET_TOKENS"),
    Setting("n_ctx", "whole number >= 1", "32768", "local only: the KV cache's tokens, shared by the slots", value=32768, parse=positive_int),
    Setting("n_threads", "whole number >= 1", "half the cores", "local only: threads for one slot's next token", parse=positive_int),
    Setting("n_threads_batch", "whole number >= 1", "every core", "local only: threads for prompts and several slots at once", parse=positive_int),
    Setting(
        "max_output_tokens", "whole number >= 1", "128 for the bundled model, else none (the method's budget)", "local only: a cap on every answer's budget",
        parse=positive_int,
    ),
    Setting("mmproj", "file path", "none", "local only: the model's multimodal projector"),
    Setting("batch", "true | false", "false", "openai / anthropic: `judge-mcp bench` sends through the provider's batch API"),
    Setting("cost_priority", "number 0..1", "none", "sampling only: ModelPreferences sent to the client"),
    Setting("speed_priority", "number 0..1", "none", "sampling only: ModelPreferences sent to the client"),
    Setting("intelligence_priority", "number 0..1", "none", "sampling only: ModelPreferences sent to the client"),
)

ENV_NAMES = frozenset(s.name for s in ENVIRONMENT)
TOML_NAMES = frozenset(s.name for s in TOML_KEYS)
_BY_NAME = {s.name: s for s in ENVIRONMENT}
_BY_KEY = {s.name: s for s in TOML_KEYS}


def env_value(env: Mapping[str, str], name: str) -> str | None:
    """A variable's value as written; set-but-empty counts as unset."""
    value = env.get(name)
    return None if value is None or value.strip() == "" else value


def _parsed(setting: Setting, raw: Any, what: str, default: Any) -> Any:
    """The value written (else the default, else nothing: None) through the setting's one parser."""
    if raw is None:
        raw = setting.value if default is None else default
        if raw is None:
            return None
    assert setting.parse is not None, f"{setting.name} is declared without a parser"
    return setting.parse(raw, what)


def read(env: Mapping[str, str], name: str, default: Any = None) -> Any:
    """The variable `name` read by its declared parser, or its declared default (`default` in its place, where the
    default depends on another setting) when unset."""
    return _parsed(_BY_NAME[name], env_value(env, name), name, default)


def read_key(table: Mapping[str, Any], key: str, where: str, default: Any = None) -> Any:
    """A [backends.NAME] table's `key` read by its declared parser, or its declared default (or `default`)."""
    return _parsed(_BY_KEY[key], table.get(key), f"{where} {key}", default)


def value_of(name: str) -> Any:
    """A setting's declared default (a variable's, else a TOML key's)."""
    return (_BY_NAME.get(name) or _BY_KEY[name]).value


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to `name` (difflib), or None when none is close."""
    def bare(text: str) -> str:  # JUDGE_MCP_ is common to every variable: compared, it would make any two look alike
        return text[len(PREFIX):] if text.startswith(PREFIX) else text

    import difflib  # lazy: only when a name is unknown, not on every start

    by_bare = {bare(k).lower(): k for k in known}
    found = difflib.get_close_matches(bare(name).lower(), sorted(by_bare), n=1, cutoff=0.6)
    return by_bare[found[0]] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    guess = nearest(name, known)
    return f" (did you mean {guess}?)" if guess else ""


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """One sentence per `JUDGE_MCP_*` variable that judge-mcp does not read, naming the nearest known one."""
    return [
        f"{name} is not a judge-mcp setting and is ignored{did_you_mean(name, ENV_NAMES)}; `judge-mcp serve --help` lists them"
        for name in sorted(env)
        if name.startswith(PREFIX) and name not in ENV_NAMES
    ]


def serve_help(db: str, sep: str) -> str:
    """The environment section of `serve --help`."""
    lines = ['environment (set by the MCP client\'s "env" block or the shell):']
    for s in ENVIRONMENT:
        default = s.default.replace("the per-user data directory", db)
        lines.append(f"  {s.name}  ({s.type.replace(_WINDOWS_SEP, repr(sep))})  [default: {default}]")
        lines += textwrap.wrap(s.help, 110, initial_indent=" " * 6, subsequent_indent=" " * 6)
    lines.append("A JUDGE_MCP_* variable not listed here is reported at start (and in every tool result) with the nearest name.")
    return "\n".join(lines) + "\n"


def markdown_table(settings: Iterable[Setting], heading: str = "variable") -> str:
    """A Markdown table of `settings` (the README's and docs/configuration.md's, kept equal to this by a test)."""
    rows = [f"| {heading} | takes | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.type.replace('|', '/')} | {s.default.replace('|', '/')} | {s.help.replace('|', '/')} |" for s in settings]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - prints the tables to paste
    print(markdown_table(ENVIRONMENT))
    print(markdown_table(TOML_KEYS, "key"))
