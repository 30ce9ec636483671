"""The tools' published JSON schemas (each argument model's `inputSchema`, each result model's `outputSchema`),
generated once from the models and shipped beside this module as schemas.json, so a server's start reads them
instead of having pydantic generate them (~20 ms, about a third of what `serve` adds to the SDK's own start before
its first `tools/list`; docs/performance.md, Cold start).

The file is used only when it was generated from exactly these models by exactly this pydantic and SDK: it records
a fingerprint of both (`fingerprint`), and a start whose fingerprint differs (an edited model, another pydantic or
mcp release installed beside this package) generates the schemas instead, as it would without the file.
tests/server/test_tool_schemas.py fails when the file is out of date with this package's sources, naming the
command that rewrites it (a newer pydantic or mcp only turns the file off until it is rewritten):

    make schemas        (.venv/bin/python -m judge_mcp.server.schemas --write)
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import pydantic
from mcp.server.mcpserver.utilities import func_metadata
from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
FILE = HERE / "schemas.json"
# Where the schemas come from: the models and the types they are built from, the tool table (names, models).
SOURCES = ("contract/args.py", "contract/fields.py", "contract/results.py", "contract/images.py", "server/tools.py")
Schemas = dict[str, dict[str, Any]]  # tool name -> {"input": schema, "output": schema}


class Spec(Protocol):
    @property
    def name(self) -> str: ...

    def models(self) -> tuple[Any, type[BaseModel]]: ...


def fingerprint() -> dict[str, str]:
    """What the schemas depend on, hashed in two parts: `sources`, this package's SOURCES, and `environment`,
    pydantic's version and the SDK's func_metadata module (how an output schema is derived from a result model).
    The tests hold the shipped file to the sources; the environment is whatever pip installed beside it."""
    environment = hashlib.sha256(pydantic.VERSION.encode() + b"\0" + Path(func_metadata.__file__).read_bytes())
    sources = hashlib.sha256()
    for name in SOURCES:
        sources.update(name.encode() + b"\0" + (PACKAGE / name).read_bytes())
    return {"sources": sources.hexdigest(), "environment": environment.hexdigest()}


def generate(specs: Iterable[Spec]) -> Schemas:
    """Each tool's schemas as the server publishes them: the argument model's `input_schema()`, and the output
    schema the SDK derives from the result model (FuncMetadata, as it does when given none)."""
    out: Schemas = {}
    for spec in specs:
        args_model, result_model = spec.models()
        derived = func_metadata.FuncMetadata(arg_model=func_metadata.ArgModelBase, output_model=result_model)
        out[spec.name] = {"input": args_model.input_schema(), "output": derived.output_schema}
    return out


def shipped() -> dict[str, Any] | None:
    """The shipped file's content ({"fingerprint", "tools"}), or None when it is missing or unreadable."""
    try:
        data = json.loads(FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("tools"), dict) else None


def schemas(specs: Iterable[Spec]) -> Schemas:
    """The shipped schemas when they were generated from these sources and name these tools; else generated now."""
    specs = list(specs)
    data = shipped()
    if data is None or set(data["tools"]) != {spec.name for spec in specs}:
        return generate(specs)
    try:
        current = data.get("fingerprint") == fingerprint()
    except (OSError, TypeError):  # a source is not on disk (a zipped install): nothing to check the file against
        current = False
    return data["tools"] if current else generate(specs)


def write() -> Path:
    """Regenerate the shipped file from the current models."""
    from judge_mcp.server.tools import TOOLS

    data = {"fingerprint": fingerprint(), "tools": generate(TOOLS)}
    FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return FILE


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        print("usage: python -m judge_mcp.server.schemas --write", file=sys.stderr)
        raise SystemExit(2)
    print(f"wrote {write()}")
