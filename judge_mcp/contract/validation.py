"""A failed validation of a tool's argument model (args.py) as plain sentences: unknown arguments first, then one
sentence per problem naming the argument ("'responses' must be a list of strings, got str"; "'max_tokens' must be
a whole number from 1 to 32768, got True"), never a pydantic dump with links. The limits quoted come from the
tool's input schema, so a message always says what the schema says."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

MAX_SENTENCE = 300  # a sentence quoting the caller's value is cut here


def describe(tool: str, exc: ValidationError, schema: dict[str, Any]) -> str:
    """One readable sentence per problem, unknown arguments first, joined with "; "."""
    errors = exc.errors()
    lines = [_unknown(tool, errors, schema)]
    lines += [_unknown_field(error, schema) if error["type"] == "extra_forbidden" else _sentence(error, schema) for error in errors]
    return "; ".join(dict.fromkeys(line for line in lines if line)) or str(errors[0]["msg"])


def _unknown(tool: str, errors: list[ErrorDetails], schema: dict[str, Any]) -> str:
    """The unknown arguments of the call itself (an unknown field inside one argument's object: _unknown_field)."""
    unknown = [_name(e["loc"]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if not unknown:
        return ""
    known = ", ".join(sorted(schema.get("properties", {})))
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}; {tool} takes {known}"


def _unknown_field(error: ErrorDetails, schema: dict[str, Any]) -> str:
    """An unknown field inside an argument's object ('criteria[0]' with "desc"): the fields that object takes."""
    loc = error["loc"]
    if len(loc) == 1:
        return ""  # said by _unknown
    known = ", ".join(schema_at(schema, loc[:-1]).get("properties", {}))
    return f"'{_name(loc[:-1])}' has an unknown field {str(loc[-1])!r}" + (f"; it takes {known}" if known else "")


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
    return node


def schema_at(schema: dict[str, Any], loc: tuple[Any, ...]) -> dict[str, Any]:
    """The schema of the value at `loc` inside the arguments (through objects, lists, unions and $defs); {} when a
    part of `loc` is not in the schema (a union member's tag)."""
    defs = schema.get("$defs", {})
    node = schema
    for part in loc:
        key = "items" if isinstance(part, int) else "properties"
        node = _resolve(node, defs)
        holder = next((m for m in (_resolve(m, defs) for m in node.get("anyOf", [node])) if key in m), None)
        if holder is None:
            return {}
        node = holder["items"] if isinstance(part, int) else holder["properties"].get(str(part), {})
    return _resolve(node, defs)


def _name(loc: tuple[Any, ...]) -> str:
    head, *rest = loc
    return str(head) + "".join(f"[{part}]" for part in rest)


def _sentence(error: ErrorDetails, schema: dict[str, Any]) -> str:
    loc = error["loc"]
    if not loc:  # a check of the whole call: its message is the sentence
        return error["msg"]
    prop = schema.get("properties", {}).get(str(loc[0]), {})
    if len(loc) == 2 and isinstance(loc[1], str) and "anyOf" in prop:  # a union member's error (loc: name, member)
        return _union(str(loc[0]), prop, error.get("input"))[:MAX_SENTENCE]
    if len(loc) > 1:  # inside an argument (a list item, an object's field): its own schema
        prop = schema_at(schema, loc)
    write = _WRITERS.get(error["type"], _other)
    return write(_name(loc), error, prop)[:MAX_SENTENCE]


def _member(prop: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The member of an optional's `anyOf` holding one of `keys` (minItems, maximum, enum...), else `prop` itself."""
    return next((p for p in prop.get("anyOf", []) if any(k in p for k in keys)), prop)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _range(prop: dict[str, Any]) -> str:
    bounds = _member(prop, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    if "exclusiveMinimum" in bounds or "exclusiveMaximum" in bounds:
        low = f"above {_number(bounds['exclusiveMinimum'])}" if "exclusiveMinimum" in bounds else (
            f"at least {_number(bounds['minimum'])}" if "minimum" in bounds else "")
        high = f"below {_number(bounds['exclusiveMaximum'])}" if "exclusiveMaximum" in bounds else (
            f"at most {_number(bounds['maximum'])}" if "maximum" in bounds else "")
        return " " + " and ".join(b for b in (low, high) if b)
    if "minimum" not in bounds and "maximum" not in bounds:
        return ""
    return f" from {_number(bounds.get('minimum', '-∞'))} to {_number(bounds.get('maximum', '∞'))}"


def _is_integer(prop: dict[str, Any]) -> bool:
    return any(p.get("type") == "integer" for p in prop.get("anyOf", [prop]))


_ALTERNATIVES = {"boolean": "true, false", "null": "null", "string": "a string", "number": "a number", "integer": "a whole number",
                 "object": "an object", "array": "a list"}


def _union(name: str, prop: dict[str, Any], value: Any) -> str:
    """A value that fits none of a union's members (`swap`: true, false or "auto")."""
    options = [json.dumps(p["const"]) if "const" in p else _ALTERNATIVES.get(p.get("type", ""), "another value") for p in prop["anyOf"]]
    options = ", ".join(options).split(", ")
    return f"'{name}' must be {', '.join(options[:-1])} or {options[-1]}, got {value!r}"


# ---- one writer per kind of error: (argument name, the error, the argument's schema) -> sentence ------------------------
Writer = Callable[[str, ErrorDetails, dict[str, Any]], str]


def _required(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' is required"


def _argument(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    """One of args.py's own checks: its message is the predicate ("is empty", "contains a NUL character")."""
    return f"'{name}' {error['msg']}"


def _string(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' must be a string, got {error.get('input')!r}"


def _boolean(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' must be true or false, got {error.get('input')!r}"


def _whole(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' must be a whole number{_range(prop)}, got {error.get('input')!r}"


def _real(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' must be a number{_range(prop)}, got {error.get('input')!r}"


def _bounds(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return (_whole if _is_integer(prop) else _real)(name, error, prop)


def _list(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    items = _member(prop, "items").get("items", {})
    kind = {"string": "strings", "integer": "whole numbers"}.get(items.get("type", ""), "objects" if "$ref" in items else "values")
    if {p.get("type") for p in items.get("anyOf", [])} == {"string", "array"}:  # messages.AnswerLike
        kind = "strings or trajectories (lists of messages)"
    text = "a string or " if any(p.get("type") == "string" for p in prop.get("anyOf", [])) else ""  # score_response's criteria
    value = error.get("input")
    return f"'{name}' must be {text}a list of {kind}, got {'null' if value is None else type(value).__name__}"


def _size(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    value = error.get("input")
    if not isinstance(value, list):
        return _other(name, error, prop)
    sizes = _member(prop, "minItems", "maxItems")
    return f"'{name}' must hold {sizes.get('minItems', 0)} to {sizes.get('maxItems', '∞')} items, got {len(value)}"


def _unicode(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' is not valid Unicode (it contains a lone surrogate)"


def _too_long(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    limit = (error.get("ctx") or {}).get("max_length", 0)
    return f"'{name}' is {len(error.get('input') or ''):,} characters; the limit is {limit:,}"


def _empty(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' is empty"


def _pattern(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}' must match {(error.get('ctx') or {}).get('pattern')}; got {error.get('input')!r}"


def _choice(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    allowed = _member(prop, "enum", "const")
    choices = allowed.get("enum", [allowed["const"]] if "const" in allowed else [])
    listed = ", ".join(repr(c) for c in choices) if choices else (error.get("ctx") or {}).get("expected", "the allowed values")
    return f"'{name}' must be one of {listed}; got {error.get('input')!r}"


def _object(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    fields = ", ".join(prop.get("properties", {}))
    return f"'{name}' must be an object" + (f" ({fields})" if fields else "") + f", got {type(error.get('input')).__name__}"


def _other(name: str, error: ErrorDetails, prop: dict[str, Any]) -> str:
    return f"'{name}': {error['msg']}"


_WRITERS: dict[str, Writer] = {
    "missing": _required,
    "argument": _argument,
    "string_type": _string,
    "bool_type": _boolean,
    "bool_parsing": _boolean,
    "int_type": _whole,
    "int_parsing": _whole,
    "int_from_float": _whole,
    "float_type": _real,
    "float_parsing": _real,
    "greater_than_equal": _bounds,
    "less_than_equal": _bounds,
    "greater_than": _bounds,
    "less_than": _bounds,
    "finite_number": _bounds,
    "list_type": _list,
    "too_short": _size,
    "too_long": _size,
    "string_unicode": _unicode,
    "string_too_long": _too_long,
    "string_too_short": _empty,
    "string_pattern_mismatch": _pattern,
    "literal_error": _choice,
    "enum": _choice,
    "model_type": _object,
    "model_attributes_type": _object,
    "dict_type": _object,
}

# for the sentences about one message of a conversation (messages.py)
WRITERS: dict[str, Writer] = _WRITERS
other: Writer = _other
union = _union
