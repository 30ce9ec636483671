"""Tool arguments checked the way the methods check them: unknown names are refused, and a wrong type, a missing
argument or a value outside the schema's limits reads like the methods' own errors ("'responses' must be a list
of strings"), not as a pydantic dump with links.

The limits themselves live in the tool signatures (server.py) as schema keywords (`minItems`, `maxLength`,
`enum`, `pattern`, `minimum`/`maximum`), so clients see them in `inputSchema`; `install` swaps each registered
tool for a `CheckedTool` whose argument model forbids extra keys and whose errors are translated here. A new
tool argument needs nothing here: its limits come from its annotation.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from pydantic import ConfigDict, ValidationError

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "float_type": "a number",
    "float_parsing": "a number",
}


def _name(loc: tuple[Any, ...]) -> str:
    head, *rest = loc
    return str(head) + "".join(f"[{part}]" for part in rest)


def _list_item_type(schema: dict[str, Any], field: str) -> str:
    items = schema.get("properties", {}).get(field, {}).get("items", {})
    return {"string": "strings", "integer": "whole numbers"}.get(items.get("type"), "values")


_ALTERNATIVES = {"boolean": "true, false", "null": "null", "string": "a string", "number": "a number", "integer": "a whole number"}


def _union_line(name: str, prop: dict[str, Any], value: Any) -> str:
    """One sentence for a value that fits none of a union's members (`swap`: true, false or "auto")."""
    options = [json.dumps(p["const"]) if "const" in p else _ALTERNATIVES.get(p.get("type"), "another value") for p in prop["anyOf"]]
    options = ", ".join(options).split(", ")
    return f"'{name}' must be {', '.join(options[:-1])} or {options[-1]}, got {value!r}"[:300]


def describe(tool: str, exc: ValidationError, schema: dict[str, Any]) -> str:
    """One readable sentence per problem, unknown arguments first."""
    known = sorted(schema.get("properties", {}))
    unknown = [_name(e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden"]
    lines = []
    if unknown:
        lines.append(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}; {tool} takes {', '.join(known)}")
    for error in exc.errors():
        kind, loc, ctx = error["type"], error["loc"], error.get("ctx") or {}
        if kind == "extra_forbidden" or not loc:
            continue
        prop = schema.get("properties", {}).get(str(loc[0]), {})
        if len(loc) == 2 and isinstance(loc[1], str) and "anyOf" in prop:  # a union member's error (loc: name, member)
            lines.append(_union_line(str(loc[0]), prop, error.get("input")))
            continue
        name, value = _name(loc), error.get("input")
        if kind == "missing":
            lines.append(f"'{name}' is required")
        elif kind == "list_type":
            lines.append(f"'{name}' must be a list of {_list_item_type(schema, str(loc[0]))}, got {type(value).__name__}")
        elif kind in _TYPE_NAMES:
            lines.append(f"'{name}' must be {_TYPE_NAMES[kind]}, got {value!r}"[:300])
        elif kind in ("too_short", "too_long") and isinstance(value, list):
            prop = schema["properties"].get(str(loc[0]), {})
            prop = next((p for p in prop.get("anyOf", []) if "minItems" in p or "maxItems" in p), prop)  # an optional list
            lines.append(f"'{name}' must hold {prop.get('minItems', 0)} to {prop.get('maxItems', '∞')} items, got {len(value)}")
        elif kind == "string_unicode":
            lines.append(f"'{name}' is not valid Unicode (it contains a lone surrogate)")
        elif kind == "string_too_long":
            lines.append(f"'{name}' is {len(value):,} characters; the limit is {ctx.get('max_length', 0):,}")
        elif kind == "string_too_short":
            lines.append(f"'{name}' is empty")
        elif kind == "string_pattern_mismatch":
            lines.append(f"'{name}' must match {ctx.get('pattern')}; got {value!r}"[:300])
        elif kind in ("literal_error", "enum"):
            lines.append(f"'{name}' must be one of {ctx.get('expected')}; got {value!r}"[:300])
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            prop = schema["properties"].get(str(loc[0]), {})
            prop = next((p for p in prop.get("anyOf", []) if "minimum" in p or "maximum" in p), prop)
            lines.append(f"'{name}' must be from {prop.get('minimum', '-∞')} to {prop.get('maximum', '∞')}, got {value!r}")
        else:
            lines.append(f"'{name}': {error['msg']}")
    return "; ".join(dict.fromkeys(lines)) or str(exc.errors()[0]["msg"])


class CheckedTool(Tool):
    """A tool whose arguments are checked strictly and reported readably before the SDK's own validation (which
    then always passes: ours is the same model with extra keys forbidden)."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        strict = self.fn_metadata.arg_model
        try:
            strict.model_validate(self.fn_metadata.pre_parse_json(arguments))
        except ValidationError as exc:
            raise ToolError(f"Error executing tool {self.name}: {describe(self.name, exc, self.parameters)}") from None
        return await super().run(arguments, context, convert_result)


def _strict(model: type) -> type:
    return type(model.__name__, (model,), {"model_config": ConfigDict(**{**model.model_config, "extra": "forbid"}), "__module__": model.__module__})


def reflow(docstring: str) -> str:
    """A docstring as a description: its indentation gone and each paragraph on one line."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def install(server: MCPServer) -> None:
    """Replace every registered tool by a CheckedTool with a strict argument model (and `additionalProperties:
    false` in its input schema), its description without the docstring's indentation."""
    tools = server._tool_manager._tools  # mcp 2.x keeps registered tools here (pinned <3)
    for name, tool in list(tools.items()):
        strict = _strict(tool.fn_metadata.arg_model)
        meta = tool.fn_metadata.model_copy(update={"arg_model": strict})
        fields = {field: getattr(tool, field) for field in Tool.model_fields}
        fields.update(fn_metadata=meta, parameters=strict.model_json_schema(by_alias=True), description=reflow(tool.description))
        tools[name] = CheckedTool(**fields)
