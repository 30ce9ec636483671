"""Length caps in a requested JSON schema, for the embedded backend's constrained decoding: every free-text string
gets a `maxLength` (so a looping small model must close it), and a method's caps shrink with a lowered answer
budget. Pure functions over schema dicts; the input is never modified.
"""

from __future__ import annotations

import copy
from typing import Any

STRING_MAX_LENGTH = 1500  # cap for free-text strings in a requested schema, so a looping model must close them
MIN_SCALED_LENGTH = 200  # a method's maxLength scaled down with the budget never goes below this


def cap_free_strings(schema: Any, max_length: int = STRING_MAX_LENGTH) -> Any:
    """A copy of `schema` where every free-text string (no enum, const, pattern, format or maxLength) has a
    `maxLength`, so constrained decoding must close it. Caps the method set itself (methods/ask.bounded) are kept;
    this only fills in the ones it did not set. The input is not modified."""
    schema = copy.deepcopy(schema)
    _cap(schema, max_length)
    return schema


def _cap(node: Any, max_length: int) -> None:
    if isinstance(node, list):
        for item in node:
            _cap(item, max_length)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    if is_string and not any(k in node for k in ("enum", "const", "pattern", "format", "maxLength")):
        node["maxLength"] = max_length
    for key in ("properties", "patternProperties", "$defs", "definitions"):
        sub = node.get(key)
        if isinstance(sub, dict):
            for value in sub.values():
                _cap(value, max_length)
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        if isinstance(node.get(key), (dict, list)):
            _cap(node[key], max_length)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            _cap(node[key], max_length)


def scale_length_caps(schema: Any, factor: float) -> Any:
    """A copy of `schema` with every integer `maxLength` times `factor` (at least MIN_SCALED_LENGTH, never raised)."""
    if isinstance(schema, list):
        return [scale_length_caps(item, factor) for item in schema]
    if not isinstance(schema, dict):
        return copy.deepcopy(schema)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "maxLength" and isinstance(value, int) and not isinstance(value, bool):
            out[key] = min(value, max(MIN_SCALED_LENGTH, int(value * factor)))
        elif key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: scale_length_caps(sub, factor) for name, sub in value.items()}
        else:
            out[key] = scale_length_caps(value, factor)
    return out
