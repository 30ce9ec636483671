"""Prompt templates: every template is a `.txt` file in this package directory (one per paper and role), so the
wheel and the sdist carry them and an installed server finds them wherever it is started. Placeholders are
`{{name}}`."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

_PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")


@lru_cache(maxsize=None)
def load(name: str) -> str:
    path = resources.files(__name__).joinpath(name)
    if "/" in name or "\\" in name or not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} not found in the judge_mcp.prompts package")
    return path.read_text(encoding="utf-8")


def render(name: str, **values: str) -> str:
    """Fill `{{key}}` placeholders in one pass, so text inside a value is never itself substituted."""
    template = load(name)
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise KeyError(f"prompt {name!r} needs values for {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
