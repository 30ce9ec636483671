"""The tools' published JSON schemas (each argument model's `inputSchema`, each result model's `outputSchema`),
generated once from the models and shipped beside this module as schemas.json, so a server's start reads them
instead of having pydantic generate them (~20 ms, about a third of what `serve` adds to the SDK's own start before
its first `tools/list`; docs/performance.md, Cold start).

The file is used only when it was generated from exactly these models by exactly this pydantic and SDK: it records
a fingerprint of both (`fingerprint`), and a start whose fingerprint differs (an edited model, another pydantic or
mcp release installed beside this package) generates the schemas instead, as it would without the file.
tests/server/test_tool_schemas.py fails when the file is out of date with this package's sources, naming the
command that rewrites it (a newer pydantic or mcp only turns the file off until it is rewritten):

    make schemas        (.venv/bin/python tools/write_schemas.py)
"""

from __future__ import annotations

import hashlib
import json
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
SOURCES = (
    "contract/args.py", "contract/fields.py", "contract/results.py", "contract/images.py", "contract/messages.py", "contract/rubric.py",
    "server/tools.py", "server/schemas.py",
)
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


def input_schema(args_model: Any) -> dict[str, Any]:
    """The input schema a client lists: the argument model's `input_schema()`, compacted."""
    return compact(args_model.input_schema(), output=False)


def output_schema(result_model: type[BaseModel]) -> dict[str, Any]:
    """The output schema a client lists: the one the SDK derives from the result model (FuncMetadata, as it does
    when given none), compacted."""
    derived = func_metadata.FuncMetadata(arg_model=func_metadata.ArgModelBase, output_model=result_model)
    return compact(derived.output_schema, output=True)


def generate(specs: Iterable[Spec]) -> Schemas:
    """Each tool's schemas as the server publishes them (`input_schema`, `output_schema`)."""
    out: Schemas = {}
    for spec in specs:
        args_model, result_model = spec.models()
        out[spec.name] = {"input": input_schema(args_model), "output": output_schema(result_model)}
    return out


# ---- compacting: what a client pays for in every session's tools/list, without what tells it nothing ------------
# Keywords whose value is one schema, a list of schemas, or a map of names to schemas (JSON Schema 2020-12).
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "patternProperties", "dependentSchemas")
_NULL = {"type": "null"}
# (an output schema?, inside its $defs?) -> the keywords left out
_DROPPED = {
    (False, False): ("title",), (False, True): ("title", "pattern", "maxLength"),
    (True, False): ("title", "default", "required"), (True, True): ("title", "default", "required", "description"),
}
_ABSENT = object()


def compact(schema: Any, *, output: bool) -> Any:
    """`schema` as published, accepting and refusing exactly what it did apart from what is said below:
    - no `title` (pydantic's, made from the field or model name the client already reads);
    - `X or null` written without `anyOf`: an input field whose default is null as just X, its `default` left out
      (an argument a client leaves out is absent: the argument model still reads an explicit null as absent); an
      output field (results carry the null) as X with "null" among its types (`"type": ["integer", "null"]`, or
      null among the `enum`); a reference or a union stays an `anyOf`; an output's enum of strings without its `type`;
    - an output schema without `default` and `required`: every field of a result is always present (the SDK dumps
      the whole result model), so neither tells a client anything the structured content does not;
    - an output schema's nested objects (a trial, a panel member, a stats group) with their fields' names only
      (`_names_only`): their types and descriptions stay in the source for readers of the code, while the tool's
      description, the field names and the structured content say what an agent needs.
    Applied to every tool's schemas by `generate`, so a model added later is compacted the same way."""
    out = _compact(schema, output, nested=False)
    if output and isinstance(out, dict) and "$defs" in out:
        out = _names_only(out)
    if not output and isinstance(out, dict):
        for name, sub in out.get("$defs", {}).items():
            if name != "Message" and isinstance(sub, dict):
                sub.pop("description", None)  # the Message's says what its parts need
    return out


def _names_only(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema whose nested objects (a trial, a panel member, a stats group) list their fields' names only:
    the result's own fields keep their types and descriptions; what a nested field holds, the structured content
    shows. Definitions that only other definitions used go."""
    defs = {
        name: {"type": "object", "properties": {field: {} for field in sub.get("properties", {})}}
        for name, sub in schema["$defs"].items()
    }
    text = json.dumps({k: v for k, v in schema.items() if k != "$defs"})
    used = {name: d for name, d in defs.items() if f'"#/$defs/{name}"' in text}
    return {**{k: v for k, v in schema.items() if k != "$defs"}, **({"$defs": used} if used else {})}


def _compact(schema: Any, output: bool, nested: bool) -> Any:
    if isinstance(schema, list):
        return [_compact(s, output, nested) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    dropped = _DROPPED[output, nested]
    for key, value in schema.items():
        if key in dropped:
            continue
        if key in _ONE or key in _LIST:
            out[key] = _compact(value, output, nested)
        elif key in _MAP and isinstance(value, dict):
            out[key] = {name: _compact(sub, output, nested or key == "$defs") for name, sub in value.items()}
        else:
            out[key] = value
    if output and out.get("type") == "string" and "enum" in out and all(isinstance(v, str) for v in out["enum"]):
        del out["type"]  # an enum of strings: the type says nothing more (kept in input schemas: some clients need it)
    return _without_null_pair(out, output)


def _without_null_pair(schema: dict[str, Any], output: bool) -> dict[str, Any]:
    members = schema.get("anyOf")
    if not output and isinstance(members, list) and len(members) > 2 and _NULL in members and schema.get("default", _ABSENT) is None:
        # an optional argument of several shapes (a string or a conversation): the shapes without the null
        return {**{k: v for k, v in schema.items() if k not in ("anyOf", "default")}, "anyOf": [m for m in members if m != _NULL]}
    if not isinstance(members, list) or len(members) != 2 or _NULL not in members or members[0] == members[1]:
        return schema
    other = members[1] if members[0] == _NULL else members[0]
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    if not output and rest.get("default", _ABSENT) is None:  # an optional argument: absent when left out
        del rest["default"]
        return {**other, **rest}
    if set(other) <= {"enum", "type"} and "enum" in other and None not in other["enum"]:
        return {"enum": [*other["enum"], None], **rest}
    if isinstance(other.get("type"), str) and not other.keys() & {"enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not"}:
        return {**other, "type": [other["type"], "null"], **rest}
    return schema


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


def write(specs: Iterable[Spec]) -> Path:
    """Regenerate the shipped file from the current models (tools/write_schemas.py, `make schemas`)."""
    data = {"fingerprint": fingerprint(), "tools": generate(specs)}
    FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return FILE
