"""Reading FLIP's answers (the FLIP paper, "Small Reward Models via Backward Inference"): the inferred instruction from the paper's JSON
answer, in any of the spellings and shapes small models write, and the best text extraction of an answer that has
no complete instruction value (shown with the similarity it would have scored, never as a reward).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from judge_mcp.methods.parsing import json_objects

MAX_EXTRACTION_CHARS = 2000


@dataclass(frozen=True)
class Inferred:
    instruction: str
    reasoning: str = ""


def _key_kind(key: str) -> str | None:
    """'instruction' for any spelling of the inferred-instruction key, 'reasoning' for the explanation key."""
    k = re.sub(r"[^a-z]", "", key.lower())
    if "reason" in k or "explanation" in k:
        return "reasoning"
    if "instruc" in k or "prompt" in k:  # INFERRRED INSTRUCTION, inferred_instruction, Instructcion, system_prompt
        return "instruction"
    return None


_PLACEHOLDER = re.compile(
    r"^\s*(<[^<>]{0,60}>|\[[^\[\]]{0,60}\]|\.{2,}|…|instruction|n/?a|none|null|\(?the single instruction you inferred\)?)\s*$",
    re.I,
)


def _usable(value: object) -> str | None:
    """A non-empty instruction string that is not the prompt's placeholder copied back (`<instruction>`, `[...]`)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or _PLACEHOLDER.match(value):
        return None
    return value


def _from_dict(data: dict, depth: int = 0) -> Inferred | None:
    instruction = reasoning = None
    for key, value in data.items():
        kind = _key_kind(str(key))
        if kind == "instruction" and instruction is None:
            instruction = _usable(value)
        elif kind == "reasoning" and reasoning is None and isinstance(value, str):
            reasoning = value.strip()
    if instruction is not None:
        return Inferred(instruction, reasoning or "")
    if depth < 2:  # {"answer": {"INFERRED INSTRUCTION": ...}}
        for value in data.values():
            if isinstance(value, dict):
                found = _from_dict(value, depth + 1)
                if found is not None:
                    return found
    return None


# A quoted value: escapes and characters other than the backslash and the closing quote, taken possessively (a
# backslash is only ever the start of an escape), so a value without its closing quote costs one pass, not a
# backtracking search.
_KEYED_VALUE = re.compile(
    r"""(["'])\s*+(inferr*+ed[ _]++instruction|inferred[ _]++system[ _]++prompt|instruction)\s*+\1\s*+:\s*+(["'])"""
    r"""((?:\\.|(?!\3)[^\\])*+)\3""",
    re.I | re.S,
)
# Every _KEYED_VALUE match holds one of these words: a text without them is not searched by it (which tries its
# quote at every quote mark: ~2 plain passes on `{"` repeated)
_KEY_WORD = re.compile(r"instruction|prompt", re.I)
_KEYED_REASONING = re.compile(r"""(["'])\s*+reasoning\s*+\1\s*+:\s*+(["'])((?:\\.|(?!\2)[^\\])*+)\2""", re.I | re.S)


def _unescape(value: str, quote: str) -> str:
    """A quoted value as text: JSON escapes decoded (a single-quoted value's \\' and bare " allowed too)."""
    if quote == "'":
        value = value.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{value}"', strict=False)
    except ValueError:
        return value


def parse_inferred(text: str) -> Inferred | None:
    """The inferred instruction from a JSON answer, or None when there is no complete instruction value.

    Accepts the paper's key (`INFERRRED INSTRUCTION`), the correct spelling and other spellings/cases
    (`inferred_instruction`, `Instruction`, `INFERRED SYSTEM PROMPT`), a fenced or prose-wrapped object, raw newlines
    in strings, and a single-quoted or unterminated object as long as the instruction value itself is complete.
    """
    if not text or not text.strip():
        return None
    # The last top-level object first (the answer ends the reply); small models put raw newlines inside strings.
    for data in reversed(list(json_objects(text, strict=False))):
        found = _from_dict(data)
        if found is not None:
            return found
    m = _KEYED_VALUE.search(text) if _KEY_WORD.search(text) else None
    if m:
        value = _usable(_unescape(m.group(4), m.group(3)))
        if value is not None:
            r = _KEYED_REASONING.search(text)
            return Inferred(value, _unescape(r.group(3), r.group(2)).strip() if r else "")
    return None


_CHAT_TOKENS = re.compile(r"<\|[^|>]{1,30}\|>|</?think>|</?s>|\[/?INST\]", re.I)
_ROLE_PREFIX = re.compile(r"^\s*(?:assistant|answer)\s*:?\s+", re.I)
_TRUNCATED_VALUE = re.compile(
    r"""(["'])\s*+(?:inferr*+ed[ _]++instruction|inferred[ _]++system[ _]++prompt|instruction)\s*+\1\s*+:\s*+(["'])(.+)$""", re.I | re.S
)
# A labelled line ("**Inferred instruction:** ..."). The marks before the label stay on its line ([ \t], not \s: a
# run of blank lines is not re-read from each of its line starts); the spacing around the colon is possessive. The
# lookahead leaves a line that cannot open a label (its first character is no mark and no first letter of a word
# here) at once, so a run of newlines costs one check a line, not a try of every word.
_LABELLED = re.compile(
    r"""(?im)^(?=[ \t>*#_\-tirlosp])[ \t>*#_-]*+(?:the\s++)?+(?:inferr*+ed\s++|reconstructed\s++|likely\s++|original\s++)?+"""
    r"""(?:system\s++prompt|instruction|prompt)\s*+(?:is)?+[*_]*+\s*+[:\-][*_\s]*+(.+)$"""
)
# A quoted instruction: the quoted run stops at any quote mark, opening ones included, so a run of openers without
# a closer is read once, not once per opener.
_QUOTED_AFTER = re.compile(r"""(?is)\b(?:instruction|prompt)\b[^"“\n]{0,60}+["“]([^"“”]{8,}+)["”]""")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text[:MAX_EXTRACTION_CHARS]


def extract_best(text: str) -> str:
    """Best effort for an unparsed answer: a truncated JSON value, a labelled line ("Instruction: ..."), a quoted
    instruction, else the whole answer without chat-template tokens (what the FLIP authors' code falls back to)."""
    if not text:
        return ""
    cleaned = _CHAT_TOKENS.sub(" ", text).replace("```json", " ").replace("```", " ")
    cleaned = _ROLE_PREFIX.sub("", cleaned)
    m = _TRUNCATED_VALUE.search(cleaned)
    if m and m.group(3).strip():
        return _clip(m.group(3).rstrip().rstrip('"}\'').replace('\\"', '"'))
    m = _LABELLED.search(cleaned)
    if m and m.group(1).strip(" *\"'“”"):
        return _clip(m.group(1).strip(" *\"'“”"))
    m = _QUOTED_AFTER.search(cleaned)
    if m:
        return _clip(m.group(1))
    return _clip(cleaned)
