"""Prompt templates live as files in `prompts/` (one per paper and role). Placeholders are `{{name}}`."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
_PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")


@lru_cache(maxsize=None)
def load(name: str) -> str:
    path = PROMPTS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} not found in {PROMPTS_DIR}")
    return path.read_text(encoding="utf-8")


def render(name: str, **values: str) -> str:
    """Fill `{{key}}` placeholders in one pass, so text inside a value is never itself substituted."""
    template = load(name)
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise KeyError(f"prompt {name!r} needs values for {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
