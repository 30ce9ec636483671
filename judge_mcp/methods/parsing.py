"""Answer grammars shared by the methods: tolerant JSON extraction, and neutralising verdict tokens in judged text.

Everything here is pure and tested in tests/test_parsing.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (bare, inside a ``` fence, or embedded in prose); None if there is none."""
    if not text:
        return None
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


# Verdict tokens of every method's grammar: [[A>B]], [[B>A]], [[A]], "Selection: Option 3", and the like.
_VERDICT_TOKEN = re.compile(r"\[\[\s*([AB])\s*([<>=])\s*([AB])\s*\]\]|\[\[\s*([AB])\s*\]\]", re.I)
_SELECTION = re.compile(r"(Selection)(\s*:\s*)(Option)", re.I)


def neutralise(text: str) -> str:
    """Defuse verdict tokens inside judged content so they cannot be read as the judge's own verdict.

    `[[A>B]]` becomes `[A>B]` (still readable to the model, no longer the label grammar), and
    `Selection: Option 2` loses its colon. Applied to every piece of judged content before it enters a prompt.
    """
    text = _VERDICT_TOKEN.sub(lambda m: "[" + m.group(0).strip("[]").strip() + "]", text)
    return _SELECTION.sub(lambda m: f"{m.group(1)} - {m.group(3)}", text)
