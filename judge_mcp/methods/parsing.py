"""Answer grammars shared by the methods: tolerant JSON extraction, and neutralising verdict tokens in judged text.

Everything here is pure and tested in tests/test_parsing.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def json_objects(text: str, *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Every JSON object in `text`: the whole text, each ``` fence, then each object embedded in prose.

    `strict=False` also accepts raw control characters (newlines) inside strings, as small models write them.
    """
    if not text:
        return
    decoder = json.JSONDecoder(strict=strict)
    for candidate in [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]:
        try:
            value = decoder.decode(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (bare, inside a ``` fence, or embedded in prose); None if there is none."""
    return next(json_objects(text), None)


# Verdict tokens of every method's grammar: [[A>B]], [[B>A]], [[A]], "Selection: Option 3", and the like.
_VERDICT_TOKEN = re.compile(r"\[\[\s*([AB])\s*([<>=])\s*([AB])\s*\]\]", re.I)
# [[A]] and LWE's single-bracket fallback [A] (methods/lwe_text.extract_judgment) both become (A).
_SIDE_TOKEN = re.compile(r"\[{1,2}\s*([AB])\s*\]{1,2}")
# As tolerant as grade_score's reader: `**Selection:** Option 2`, `Selection: [Option 2`.
_SELECTION = re.compile(r"(Selection)([*_ \t]*:[*_\s]*\[?[ \t]*)(Option)", re.I)
# Fence markers of the pairwise prompts (`<|The End of Assistant A's Answer|>`, `<|User Prompt|>`; also chat-template
# tokens such as `<|im_end|>`) and of the LWE prompts (`[The End of Assistant B's Answer]`, `[User Question]`):
# judged content must not be able to close its own fence and write text that reads as the prompt's.
_PIPE_MARKER = re.compile(r"<\|([^|<>\n]{0,80})\|>")
_BRACKET_FENCE = re.compile(r"\[\s*(The\s+(?:Start|End)\s+of\s+Assistant\s+[AB]['’]s\s+Answer|User\s+Question)\s*\]", re.I)


def neutralise(text: str) -> str:
    """Defuse verdict tokens inside judged content so they cannot be read as the judge's own verdict.

    `[[A>B]]` becomes `[A>B]` (still readable to the model, no longer the label grammar), `[[A]]` and `[A]`
    become `(A)`, and `Selection: Option 2` loses its colon. Fence markers lose their delimiters
    (`<|The End of Assistant A's Answer|>` becomes `<The End of Assistant A's Answer>`, `[User Question]` becomes
    `(User Question)`), so judged text cannot close its fence early. Applied to every piece of judged content
    before it enters a prompt.
    """
    text = _PIPE_MARKER.sub(lambda m: f"<{m.group(1)}>", text)
    text = _BRACKET_FENCE.sub(lambda m: f"({m.group(1)})", text)
    text = _VERDICT_TOKEN.sub(lambda m: "[" + m.group(0).strip("[]").strip() + "]", text)
    text = _SIDE_TOKEN.sub(lambda m: f"({m.group(1)})", text)
    return _SELECTION.sub(lambda m: f"{m.group(1)} - {m.group(3)}", text)
