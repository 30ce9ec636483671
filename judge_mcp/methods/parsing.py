"""Answer grammars shared by the methods: tolerant JSON extraction, and neutralising verdict tokens in judged text.

Everything here is pure and tested in tests/methods/test_parsing.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

def _top_level(text: str, decoder: json.JSONDecoder) -> Iterator[dict[str, Any]]:
    """Each top-level JSON object in `text`, left to right. An object nested in another (as a value, or inside one
    of its strings) is part of that object, not a separate answer: the scan resumes after each complete object."""
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        except RecursionError:  # nested past the parser's limit: no answer object starts here or inside it
            return
        if isinstance(value, dict):
            yield value
        i = text.find("{", end)


def json_objects(text: str, *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, left to right: bare, inside a ``` fence, or embedded in prose.

    `strict=False` also accepts raw control characters (newlines) inside strings, as small models write them.
    """
    if not text:
        return
    yield from _top_level(text, json.JSONDecoder(strict=strict))


def _has(data: dict[str, Any], key: str) -> bool:
    key = key.strip().lower()
    return any(str(k).strip().lower() == key for k in data)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def answer_object(
    text: str, required: tuple[str, ...] = (), *, judged: tuple[str, ...] | list[str] = (), strict: bool = True
) -> dict[str, Any] | None:
    """The JSON object that is the answer in `text`, or None.

    Candidates are the top-level objects (see json_objects; objects nested inside another one never count). An
    object that reproduces one found in the judged texts (`judged`, compared without whitespace) is a quotation
    and is skipped, unless it is the whole reply. Of the rest: the last one that carries every `required` key
    (keys compared case-insensitively), else the last that carries any of them, else the last one. So a judge
    that quotes an answer holding `{"port": 8080}` or `{"verdict": "B"}` before its own JSON is read by its own.
    """
    if not text:
        return None
    found = list(json_objects(text, strict=strict))
    if not found:
        return None
    if len(found) == 1 and text.strip().startswith("{") and text.strip().endswith("}"):
        return found[0]
    quoted = {_squash(json.dumps(o, ensure_ascii=False)) for j in judged for o in json_objects(j or "", strict=False)}
    candidates = [o for o in found if _squash(json.dumps(o, ensure_ascii=False)) not in quoted]
    if not candidates:
        return None
    if required:
        for test in (all, any):
            keyed = [o for o in candidates if test(_has(o, k) for k in required)]
            if keyed:
                return keyed[-1]
    return candidates[-1]


def parse_json_object(text: str, required: tuple[str, ...] = (), *, judged: tuple[str, ...] | list[str] = ()) -> dict[str, Any] | None:
    """The answer object of `text` (see answer_object): the last complete top-level object, or the last one
    carrying the schema's `required` keys; None if there is none."""
    return answer_object(text, required, judged=judged)


# Verdict tokens of every method's grammar: [[A>B]], [[B>A]], [[A]], "Selection: Option 3", and the like.
_VERDICT_TOKEN = re.compile(r"\[\[\s*([AB])\s*([<>=])\s*([AB])\s*\]\]", re.I)
# [[A]] and LWE's single-bracket fallback [A] (methods/lwe/text.extract_judgment) both become (A).
_SIDE_TOKEN = re.compile(r"\[{1,2}\s*([AB])\s*\]{1,2}")
# As tolerant as grade_score's reader: `**Selection:** Option 2`, `Selection: [Option 2`.
_SELECTION = re.compile(r"(Selection)([*_ \t]*:[*_\s]*\[?[ \t]*)(Option)", re.I)
# Fence markers of the templates: the pairwise prompts' `<|The End of Assistant A's Answer|>` and `<|User Prompt|>`,
# the LWE prompts' `[The End of Assistant B's Answer]` and `[User Question]`, grade_score's `[User Instruction]`.
# Judged content must not be able to close its own fence and write text that reads as the prompt's, in any
# imitation: bars removed (`<The End of ...>`), look-alike bars (full-width `｜` U+FF5C, box-drawing `│`, ...) or
# brackets (`［`, `【`, `＜`), bold or heading marks, or no delimiters at all (the plain words on a line), in any case
# and spacing. Chat-template tokens (`<|im_end|>`) lose their bars the same way.
_BARS = "|｜¦│┃∣ǀǁ⏐丨︱￨❘⎸⎹▏"
_OPEN = r"[<\[({＜［【〔〈《«‹*#" + re.escape(_BARS) + r"]"
_CLOSE = r"[>\])}＞］】〕〉》»›*" + re.escape(_BARS) + r"]"
_SEP = r"[\s\u00a0\u200b-\u200d\u2060\ufeff_\-]"
_APOS = r"['’‘ʼ′`´＇]"
_PIPE_MARKER = re.compile(r"[<＜][" + re.escape(_BARS) + r"]([^<>\n" + re.escape(_BARS) + r"]{0,80})[" + re.escape(_BARS) + r"][>＞]")
_ANSWER_PHRASE = (
    rf"the{_SEP}+(?:start|end|beginning){_SEP}+of{_SEP}+(?:the{_SEP}+)?assistant{_SEP}*[AB12]"
    rf"{_SEP}*(?:{_APOS}?{_SEP}*s)?{_SEP}+answer"
    # the fences of a caller's reference answer and criteria (methods/user_inputs.py)
    rf"|the{_SEP}+(?:start|end|beginning){_SEP}+of{_SEP}+(?:the{_SEP}+)?(?:reference{_SEP}+answer|evaluation{_SEP}+criteria)"
)
_SECTION_PHRASE = rf"user{_SEP}+(?:prompt|question|instruction)"
_DEFUSED = '(quoted: "'
# The answer fences' words are distinctive: defused wherever they appear, with any delimiters around them.
_ANSWER_FENCE = re.compile(rf'(?<!{re.escape(_DEFUSED)})(?:{_OPEN}[ \t]*)*\\?[ \t]*({_ANSWER_PHRASE})(?:[ \t]*{_CLOSE})*', re.I)
# "User Question" is ordinary prose: defused only as a marker (wrapped in delimiters, or alone on its line).
_SECTION_FENCE = re.compile(
    rf"(?:{_OPEN}[ \t]*)+\\?[ \t]*({_SECTION_PHRASE})(?:[ \t]*{_CLOSE})+"
    rf"|(?m:^[ \t]*({_SECTION_PHRASE})[ \t]*:?[ \t]*$)",
    re.I,
)


def _defuse_fence(m: re.Match) -> str:
    words = re.sub(_SEP + "+", " ", next(g for g in m.groups() if g)).strip()
    return f'{_DEFUSED}{words}")'


# Memoised (a pure function of its text): a judgment defuses the same texts again and again (compare_pair both orders'
# three texts, Grade Score every option in every rotation, FLIP a shared context per response), ~30 us per 200 characters.
DEFUSED_MEMO = 256  # texts remembered (the strings are shared with the caller's, not copied)


@lru_cache(maxsize=DEFUSED_MEMO)
def neutralise(text: str) -> str:
    """Defuse verdict tokens and fence markers inside judged content so they cannot be read as the judge's own
    verdict or as the prompt's own structure.

    `[[A>B]]` becomes `[A>B]` (still readable to the model, no longer the label grammar), `[[A]]` and `[A]`
    become `(A)`, and `Selection: Option 2` loses its colon. Chat-template tokens lose their bars (`<|im_end|>`
    becomes `<im_end>`, also with look-alike bars). Every imitation of a template fence (see _ANSWER_FENCE and
    _SECTION_FENCE: with bars, without, with full-width or box-drawing bars, bracketed, bold, or plain words; any
    case and spacing) becomes `(quoted: "The End of Assistant B's Answer")`: the words stay readable, but marked
    as text of the answer, so judged text cannot close its fence early. Applied to every piece of judged content
    before it enters a prompt; applying it twice changes nothing more.
    """
    text = _ANSWER_FENCE.sub(_defuse_fence, text)
    text = _SECTION_FENCE.sub(_defuse_fence, text)
    text = _PIPE_MARKER.sub(lambda m: f"<{m.group(1)}>", text)
    text = _VERDICT_TOKEN.sub(lambda m: "[" + m.group(0).strip("[]").strip() + "]", text)
    text = _SIDE_TOKEN.sub(lambda m: f"({m.group(1)})", text)
    return _SELECTION.sub(lambda m: f"{m.group(1)} - {m.group(3)}", text)
