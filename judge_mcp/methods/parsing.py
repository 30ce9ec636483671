"""Answer grammars shared by the methods: tolerant JSON extraction, and neutralising verdict tokens in judged text.

Everything here is pure and tested in tests/methods/test_parsing.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from typing import Any

from judge_mcp.methods.json_scan import top_level_objects

def json_objects(text: str, *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, left to right: bare, inside a ``` fence, or embedded in prose.

    `strict=False` also accepts raw control characters (newlines) inside strings, as small models write them.
    """
    if not text:
        return
    yield from top_level_objects(text, strict=strict)


def _has(data: dict[str, Any], key: str) -> bool:
    key = key.strip().lower()
    return any(str(k).strip().lower() == key for k in data)


def _squash(text: str) -> str:
    return "".join(text.split())


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
    candidates = [o for o in found if _squash(json.dumps(o, ensure_ascii=False)) not in quoted] if quoted else found
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
_VERDICT_TOKEN = re.compile(r"\[\[\s*+([AB]\s*+[<>=]\s*+[AB])\s*+\]\]", re.I)
# [[A]] and LWE's single-bracket fallback [A] (methods/lwe/text.extract_judgment) both become (A).
_SIDE_TOKEN = re.compile(r"\[{1,2}+\s*+([AB])\s*+\]{1,2}")
# As tolerant as grade_score's reader: `**Selection:** Option 2`, `Selection: [Option 2`.
_SELECTION = re.compile(r"(Selection)([*_ \t]*+:[*_\s]*+(?:\[[ \t]*+)?+)(Option)", re.I)
# Fence markers of the templates: the pairwise prompts' `<|The End of Assistant A's Answer|>` and `<|User Prompt|>`,
# the LWE prompts' `[The End of Assistant B's Answer]` and `[User Question]`, grade_score's `[User Instruction]`.
# Judged content must not be able to close its own fence and write text that reads as the prompt's, in any
# imitation: bars removed (`<The End of ...>`), look-alike bars (full-width `｜` U+FF5C, box-drawing `│`, ...) or
# brackets (`［`, `【`, `＜`), bold or heading marks, or no delimiters at all (the plain words on a line), in any case
# and spacing. Chat-template tokens (`<|im_end|>`) lose their bars the same way.
_BARS = "|｜¦│┃∣ǀǁ⏐丨︱￨❘⎸⎹▏"
_OPENERS = frozenset("<[({＜［【〔〈《«‹*#" + _BARS)
_CLOSERS = frozenset(">])}＞］】〕〉》»›*" + _BARS)
_SEP = r"[\s\u00a0\u200b-\u200d\u2060\ufeff_\-]"
_APOS = r"['’‘ʼ′`´＇]"
_PIPE_MARKER = re.compile(r"[<＜][" + re.escape(_BARS) + r"]([^<>\n" + re.escape(_BARS) + r"]{0,80}+)[" + re.escape(_BARS) + r"][>＞]")
# The marker phrases alone (delimiters are found around a match by walking the text, see _fence_spans). Every
# quantifier is possessive and followed by a character it cannot take, so a match attempt never backtracks.
_ANSWER_PHRASE = re.compile(
    rf"the{_SEP}++(start|end|beginning){_SEP}++of{_SEP}++(?:the{_SEP}++)?+assistant{_SEP}*+([AB12])"
    rf"(?:{_SEP}*+{_APOS})?+{_SEP}*+(?:s{_SEP}*+)?+answer",
    re.I,
)
_SECTION_PHRASE = re.compile(rf"user{_SEP}++(prompt|question|instruction)", re.I)
# the fences of a caller's reference answer and criteria (methods/user_inputs.py)
_INPUT_PHRASE = re.compile(
    rf"the{_SEP}++(start|end|beginning){_SEP}++of{_SEP}++(?:the{_SEP}++)?+(reference{_SEP}++answer|evaluation{_SEP}++criteria)",
    re.I,
)


def _answer_words(m: re.Match) -> str:
    where = "start" if m.group(1).lower() in ("start", "beginning") else "end"
    return f"(quoted fence: {where} of answer {m.group(2).upper()})"


def _input_words(m: re.Match) -> str:
    where = "start" if m.group(1).lower() in ("start", "beginning") else "end"
    name = "reference answer" if m.group(2).lower().startswith("reference") else "evaluation criteria"
    return f"(quoted fence: {where} of the {name})"


def _section_words(m: re.Match) -> str:
    return f"(quoted fence: the user's {m.group(1).lower()})"


_LEFT_MARKS = "".join(sorted(_OPENERS)) + " \t\\"
_CLOSE_RUN = re.compile("(?:[ \t]*+[" + re.escape("".join(sorted(_CLOSERS))) + "]++)*+")  # closing marks, spaces between
_BLANKS = re.compile(r"[ \t]*+")
_LEFT_SET = frozenset(_LEFT_MARKS)


# _SECTION_PHRASE where _fence_spans(delimited_only=True) can take it: after the start of the text, a newline or a mark
# its left walk takes, and before a closing mark or the end of its line (a necessary condition of its rule), so
# "user question" repeated in prose costs the regex engine, not ~3 us of walks a phrase. The lookbehind follows the
# `u`, so the search still looks for that letter first.
_SECTION_DELIMITED = re.compile(
    rf"u(?<![^{re.escape(_LEFT_MARKS)}\n]u)ser{_SEP}++(prompt|question|instruction)"
    rf"(?=[ \t]*+(?:[{re.escape(''.join(sorted(_CLOSERS)))}]|:?+[ \t]*+(?:\n|\Z)))",
    re.I,
)


def _run_end(run: re.Pattern, text: str, pos: int, endpos: int | None = None) -> int:
    """Where a run pattern (one that matches the empty string too) read from `pos` ends."""
    m = run.match(text, pos, len(text) if endpos is None else endpos)
    return pos if m is None else m.end()


def _strip_back(text: str, end: int, floor: int, chars: str) -> int:
    """The start of the run of `chars` that ends at `end` (not before `floor`), read by str.rstrip a piece at a time:
    C speed, and never more than the run and one piece."""
    piece = 16
    while end > floor:
        low = max(floor, end - piece)
        kept = len(text[low:end].rstrip(chars))
        end, piece = low + kept, piece * 2
        if kept:
            break
    return end


@cache
def _with_closers(phrase: re.Pattern) -> re.Pattern:
    """`phrase` and the closing marks after it (and the blanks between them, not after the last) as its last group."""
    return re.compile(rf"(?:{phrase.pattern})({_CLOSE_RUN.pattern})", phrase.flags)


def _fence_spans(text: str, phrase: re.Pattern, *, delimited_only: bool) -> list[tuple[int, int, re.Match]]:
    return list(_iter_fence_spans(text, phrase, delimited_only=delimited_only))


def _iter_fence_spans(text: str, phrase: re.Pattern, *, delimited_only: bool) -> Iterator[tuple[int, int, re.Match]]:
    """(start, end, match) of each marker phrase with the delimiters around it: opening marks and spaces before
    it (`<|`, `**`, `### `, `［`), closing marks after it. With `delimited_only`, a phrase counts only with an
    opening and a closing mark, or alone on its line (an optional colon after it). Linear: each walk stops at the
    previous span's end or at the next phrase, which starts with a letter no walk takes (the closing marks are read
    by the phrase's own pattern, the opening ones by str.rstrip: no Python step per character)."""
    floor, closers = 0, phrase.groups + 1
    for m in _with_closers(phrase).finditer(text):
        s, e, right = m.start(), m.start(closers), m.end()
        if s < floor:
            continue
        left = s
        if s > floor and text[s - 1] in _LEFT_SET:
            left = _strip_back(text, s, floor, _LEFT_MARKS)
            left = _run_end(_BLANKS, text, left, s)  # the spaces before the first mark are not the marker's
        if delimited_only and (left == s or right == e or _OPENERS.isdisjoint(text[left:s]) or _CLOSERS.isdisjoint(text[e:right])):
            line_end = _alone_on_line(text, s, e, floor)
            if line_end is None:
                continue
            left, right = s, line_end
        yield left, right, m
        floor = right


def _alone_on_line(text: str, start: int, end: int, floor: int) -> int | None:
    """Where the marker's line ends (after `[ \t]*:?[ \t]*`) if the phrase at start..end is alone on it."""
    i = _strip_back(text, start, floor, " \t")
    if i > 0 and text[i - 1] != "\n":
        return None
    j = _run_end(_BLANKS, text, end)
    if j < len(text) and text[j] == ":":
        j += 1
    k = _run_end(_BLANKS, text, j)
    return j if k == len(text) or text[k] == "\n" else None


def _defuse_fences(text: str, phrase: re.Pattern, words, *, delimited_only: bool) -> str:
    """Each fence span replaced by its words. The spans are read as they come (no match kept) and the words of equal
    groups are one string: a text made of markers holds no more than its pieces while it is read."""
    parts: list[str] = []
    said: dict[tuple, str] = {}
    last = 0
    for start, end, m in _iter_fence_spans(text, phrase, delimited_only=delimited_only):
        key = m.groups()
        said_here = said.get(key)
        if said_here is None:
            said_here = said[key] = words(m)
        parts += [text[last:start], said_here]
        last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def replace_groups(pattern: re.Pattern, text: str, build: Callable[..., list[str]]) -> str:
    """`pattern.sub` with the matches replaced by `build(*columns)`, one list per group of the values that group took
    in each match (every group takes part in every match), in order. Read by `pattern.split`: no match object and no
    Python call per match (`build` is one list comprehension), so a text made of matches costs a few plain passes,
    not ~1 us a match as a function passed to `sub` does."""
    parts = pattern.split(text)
    if len(parts) == 1:
        return text
    k = pattern.groups + 1
    made = build(*(parts[i::k] for i in range(1, k)))
    out = [""] * (2 * len(made) + 1)
    out[::2], out[1::2] = parts[::k], made
    return "".join(out)


# Memoised (a pure function of its text): a judgment defuses the same texts again and again (compare_pair both orders'
# three texts, Grade Score every option in every rotation, FLIP a shared context per response), ~30 us per 200 characters.
DEFUSED_MEMO = 256  # texts remembered (the strings are shared with the caller's, not copied)


@lru_cache(maxsize=DEFUSED_MEMO)
def neutralise(text: str) -> str:
    """Defuse verdict tokens and fence markers inside judged content so they cannot be read as the judge's own
    verdict or as the prompt's own structure. Linear in the length of `text`.

    `[[A>B]]` becomes `[A>B]` (still readable to the model, no longer the label grammar), `[[A]]` and `[A]`
    become `(A)`, and `Selection: Option 2` loses its colon. Chat-template tokens lose their bars (`<|im_end|>`
    becomes `<im_end>`, also with look-alike bars). Every imitation of a template fence (with bars, without, with
    full-width or box-drawing bars, bracketed, bold, or plain words; any case and spacing) is replaced, delimiters
    and all, by a paraphrase that no longer holds the marker phrase: `<|The End of Assistant B's Answer|>` becomes
    `(quoted fence: end of answer B)` and `[User Question]` becomes `(quoted fence: the user's question)`, so a
    judge that finds the answers by their fence words finds only the template's own. "User question" in running
    prose is left alone (only a marker in delimiters or alone on its line is replaced). Applied to every piece of
    judged content before it enters a prompt; applying it twice changes nothing more.
    """
    text = _defuse_fences(text, _ANSWER_PHRASE, _answer_words, delimited_only=False)
    text = _defuse_fences(text, _INPUT_PHRASE, _input_words, delimited_only=False)
    text = _defuse_fences(text, _SECTION_DELIMITED, _section_words, delimited_only=True)
    text = replace_groups(_PIPE_MARKER, text, lambda names: ["<" + g + ">" for g in names])
    text = replace_groups(_VERDICT_TOKEN, text, lambda labels: ["[" + g + "]" for g in labels])
    text = replace_groups(_SIDE_TOKEN, text, lambda sides: ["(" + g + ")" for g in sides])
    return replace_groups(_SELECTION, text, lambda words, _, options: [w + " - " + o for w, o in zip(words, options)])
