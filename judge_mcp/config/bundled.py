"""The bundled 135M model's answer cap: a plumbing default's answers kept short. The model writes ~20 tokens/s on 2
cores and sometimes loops until its budget is spent; a method's own budget (4,096 tokens for compare_pair, a
model server's setting) then outlasts the 120 s timeout and the call fails after two minutes. `serve`, `bench` and
`demo` therefore cap every answer of a backend that is the bundled model, with no model or cap of its own, at
BUNDLED_MAX_OUTPUT_TOKENS (the JSON schemas' caps scale down with it, so answers still close), and say so on stderr (backends/local_models.py's start_note).
Other backends keep the method's budget: the cap is about the bundled model's speed, not about any judgment."""

from __future__ import annotations

from dataclasses import replace

from judge_mcp.config.settings import DEFAULT_BACKEND_NAME, BackendConfig, Settings

BUNDLED_MAX_OUTPUT_TOKENS = 128


def is_bundled(cfg: BackendConfig) -> bool:
    """The backend is the bundled model (kind local, no model path of its own), capped or not."""
    return cfg.kind == "local" and cfg.model is None


def bundled_warning(name: str) -> str:
    """What a result judged by the bundled model says in its `warnings` (issue 49 item 1): a start note on stderr is
    seen by no one when an MCP client starts the server."""
    setting = ("JUDGE_MCP_BACKEND (openai with JUDGE_MCP_BASE_URL, or anthropic) for a real judge" if name == DEFAULT_BACKEND_NAME
               else f"model in [backends.{name}], or name another backend, for a real judge")
    return f"judged by the bundled SmolLM2-135M model (backend '{name}'): plumbing, not a judge; set {setting}"


def is_uncapped_bundled(cfg: BackendConfig) -> bool:
    """The backend is the bundled model (kind local, no model path of its own) with no answer cap of its own."""
    return cfg.kind == "local" and cfg.model is None and cfg.max_output_tokens is None


def with_backend(settings: Settings, cfg: BackendConfig) -> Settings:
    """The settings with this backend's configuration in place of the one of the same name."""
    if cfg.name == DEFAULT_BACKEND_NAME:
        return replace(settings, default_backend=cfg)
    return replace(settings, named_backends={**settings.named_backends, cfg.name: cfg})


def cap_bundled(settings: Settings) -> tuple[Settings, list[str]]:
    """Every configured backend that is the uncapped bundled model capped at BUNDLED_MAX_OUTPUT_TOKENS; the names
    capped. Settings with a configuration error are returned as they are (every call reports the error)."""
    if settings.config_error is not None:
        return settings, []
    capped = []
    for name in [DEFAULT_BACKEND_NAME, *sorted(settings.named_backends)]:
        cfg = settings.backend(name)
        if is_uncapped_bundled(cfg):
            settings = with_backend(settings, replace(cfg, max_output_tokens=BUNDLED_MAX_OUTPUT_TOKENS))
            capped.append(name)
    return settings, capped


def cap_note(name: str) -> str:
    """What a start says about a capped backend, with the setting that changes it."""
    setting = "JUDGE_MCP_MAX_OUTPUT_TOKENS" if name == DEFAULT_BACKEND_NAME else f"max_output_tokens in [backends.{name}]"
    return (f"backend '{name}' is the bundled 135M model (plumbing, not a judge): its answers are capped at "
            f"{BUNDLED_MAX_OUTPUT_TOKENS} tokens, since a longer budget outlasts the timeout on a CPU; set {setting} "
            "for another cap")

