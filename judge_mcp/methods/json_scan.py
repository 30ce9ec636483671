"""The top-level JSON objects of a text, found in time linear in its length.

Trying `json.JSONDecoder.raw_decode` at every `{` is quadratic on hostile text: every failed attempt builds an
error that counts the newlines before it (a run of 50,000 `{` took 1.2 s), and an object that opens early and
fails late is re-read from each `{` nested in it. Here one validating pass per start does the reading instead:

- the pass follows Python's JSON grammar exactly (strings with their escapes, `strict` control characters,
  numbers, `true`/`false`/`null`, `NaN`/`Infinity`/`-Infinity`, the digit limit of integers), tokenised with
  regular expressions that cannot backtrack;
- every `{` it meets where a value may start is an object start whose fate it decides on the way (closed at
  some offset, or failing where the pass fails), remembered so that no later start re-reads it;
- `raw_decode` runs only on a start the pass found complete, so it never fails on grammar and never re-reads.
- most starts never get a pass: two regular expressions (below) decide objects nested up to three deep.

A start inside one pass's string is read by a pass of its own; such passes cannot pile up on the same stretch of
text, since two passes that agree on being outside a string at one offset read alike from there on.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 200  # objects and arrays nested deeper than this are not an answer (Python's own parser stops near 1,000)

_WS = re.compile(r"[ \t\n\r]*+")
_STRING = {
    True: re.compile(r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'),
    False: re.compile(r'"(?:[^"\\]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'),
}
_NUMBER = re.compile(r"-?+(?:0|[1-9][0-9]*+)(\.[0-9]++)?+([eE][-+]?+[0-9]++)?+")
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_FAILED = -1

# ---- the fate of most starts decided by one regular expression, without a pass --------------------------------------
# A pass costs a few Python steps per token, which on text made of short failing objects (`{"a":"{` repeated) is
# twenty times a plain pass over it. The reading of an object nested at most _REGEX_DEPTH deep is a regular
# language, so two expressions decide most starts inside the regex engine: _full (the object is complete: its end)
# and _dead (its reading fails without going deeper). Both are exact where they answer (built from the same tokens
# as the pass, numbers whose integer part is too long for them left undecided); a start neither answers gets a pass.
# The search for starts skips the dead ones (`\{(?!dead)`), so hostile text costs one regex scan.
_REGEX_DEPTH = 3
_W = r"[ \t\n\r]*+"
_NUM_RE = r"-?+(?:0|[1-9][0-9]{0,999}+(?![0-9]))(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+"
_VALUE_START = r"""[-0-9\[{"tfnNI]"""


def _patterns(strict: bool) -> tuple[str, str]:
    """(a complete object, a failing reading after its `{`), nested at most _REGEX_DEPTH deep. Each token is read
    once where the grammar allows (atomic groups), so a long string costs a few reads, not one per alternative."""
    s, w, vs = f"(?>{_STRING[strict].pattern})", _W, _VALUE_START
    nonstring = f"(?>{_NUM_RE}|true|false|null|NaN|Infinity|-Infinity)"
    scalar = f"(?>{s}|{_NUM_RE}|true|false|null|NaN|Infinity|-Infinity)"
    value, dead = scalar, f'(?=")(?!{s})'  # depth 0: scalars; a string that fails
    obj_dead_tail = ""
    for _ in range(_REGEX_DEPTH):
        member = f"{s}{w}:{w}{value}"
        obj = rf'\{{{w}(?:{member}{w}(?:,{w}(?=")|(?=\}})))*+\}}'
        arr = rf"\[{w}(?:{value}{w}(?:,{w}(?![\],])|(?=\])))*+\]"
        # after `{`: neither a key nor `}`; or members, then after a comma no key, a key that fails, no colon, no
        # value, a value that fails inside, or a value followed by neither `,` nor `}`
        # (the commonest failures first, the key read once: a key without a colon, a first member whose value is a
        # string followed by neither `,` nor `}`, a string that fails, or another scalar followed by neither)
        obj_dead_tail = (rf'{w}(?:{s}{w}(?:(?!:)|:{w}(?:{s}{w}(?![,}}])|(?=")(?!{s})|{nonstring}{w}(?![,}}])))|(?!["}}])'
                         rf'|(?=")(?:{member}{w},{w})*+(?:(?!")|{s}{w}(?:(?!:)|:{w}(?:{dead}|(?!{vs})'
                         rf"|{value}{w}(?![,}}])))|{dead}))")
        arr_dead = (rf"\[{w}(?:(?!{vs}|\])|(?={vs})(?:{value}{w},{w})*+(?:(?!{vs})|{dead}|{value}{w}(?![,\]])))")
        value, dead = f"(?>{scalar}|{obj}|{arr})", rf"(?:\{{{obj_dead_tail}|{arr_dead}|{dead})"
    return obj, obj_dead_tail


@functools.cache
def _regexes(strict: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(complete object at a start, the next start whose reading is not known to fail), compiled at first use."""
    full, dead_tail = _patterns(strict)
    # `(?=...)`: an object's `{` is followed by a key or its `}`; the cheap test first, so a run of `{` costs a plain
    # pass (the dead reading alone tried three alternatives at each: ~3 plain passes)
    return re.compile(full), re.compile(rf"\{{(?={_W}[\"}}])(?!{dead_tail})")


class TooDeep(Exception):
    """The text nests containers deeper than MAX_DEPTH."""


def _number_end(text: str, pos: int) -> int | None:
    m = _NUMBER.match(text, pos)
    if m is None:
        return None
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if limit and m.group(1) is None and m.group(2) is None and m.end() - pos - (text[pos] == "-") > limit:
        return None  # Python refuses to read an integer that long
    return m.end()


def _scalar_end(text: str, pos: int, strict: bool) -> int | None:
    """End of the string, number or literal starting at `pos`, or None."""
    c = text[pos]
    if c == '"':
        m = _STRING[strict].match(text, pos)
        return m.end() if m else None
    if c == "-" or "0" <= c <= "9":
        end = _number_end(text, pos)
        if end is not None:
            return end
    for word in _LITERALS:
        if text.startswith(word, pos):
            return pos + len(word)
    return None


Step = tuple[int, str] | None  # (where reading goes on, in which state), or None: the reading fails here


class _Pass:
    """One validating pass from one `{` (see the module doc): a pushdown reader of Python's JSON grammar whose
    states are the method names in STATES; each step reads the token at `pos` (first character `c`)."""

    STATES = ("value", "value_or_close", "key", "key_or_close", "colon", "after")

    def __init__(self, text: str, strict: bool, fate: dict[int, int]) -> None:
        self.text, self.strict, self.fate = text, strict, fate
        self.stack: list[tuple[str, int]] = []

    def run(self, start: int) -> None:
        """Read the object at `start`; record in `fate` the end of every object start it closes (this one included)
        or _FAILED for every one still open where the reading fails."""
        text, n = self.text, len(self.text)
        self.stack = [("{", start)]
        pos, state = start + 1, "key_or_close"
        while state != "done":
            m = _WS.match(text, pos)
            pos = m.end() if m else pos
            step = getattr(self, state)(pos, text[pos]) if pos < n else None
            if step is None:
                for kind, at in self.stack:
                    if kind == "{":
                        self.fate[at] = _FAILED
                return
            pos, state = step

    def _open(self, kind: str, pos: int) -> Step:
        if len(self.stack) >= MAX_DEPTH:
            raise TooDeep
        self.stack.append((kind, pos))
        return pos + 1, ("key_or_close" if kind == "{" else "value_or_close")

    def _close(self, pos: int) -> Step:
        kind, at = self.stack.pop()
        if kind == "{":
            self.fate[at] = pos + 1
        return pos + 1, ("after" if self.stack else "done")

    def value(self, pos: int, c: str) -> Step:
        if c == "{":
            known = self.fate.get(pos)  # an object another pass has read: the same tokens, the same fate
            if known is None:
                return self._open("{", pos)
            return None if known == _FAILED else (known, "after")
        if c == "[":
            return self._open("[", pos)
        end = _scalar_end(self.text, pos, self.strict)
        return None if end is None else (end, "after")

    def value_or_close(self, pos: int, c: str) -> Step:
        return self._close(pos) if c == "]" else self.value(pos, c)

    def key(self, pos: int, c: str) -> Step:
        m = _STRING[self.strict].match(self.text, pos) if c == '"' else None
        return None if m is None else (m.end(), "colon")

    def key_or_close(self, pos: int, c: str) -> Step:
        return self._close(pos) if c == "}" else self.key(pos, c)

    def colon(self, pos: int, c: str) -> Step:
        return (pos + 1, "value") if c == ":" else None

    def after(self, pos: int, c: str) -> Step:
        """After a value inside a container: a comma, or the container's own closing bracket."""
        top = self.stack[-1][0]
        if c == ",":
            return pos + 1, ("key" if top == "{" else "value")
        return self._close(pos) if c == ("}" if top == "{" else "]") else None


def _decoded(decoder: json.JSONDecoder, text: str, at: int) -> tuple[Any, int] | None:
    """(the object at `at`, its end) when `raw_decode` reads one there nested at most MAX_DEPTH deep (no more
    brackets in it than that, a bound the pass below cannot exceed); None: left to the pass (once per text, so a
    failing attempt adds one linear read)."""
    try:
        value, end = decoder.raw_decode(text, at)
    except (ValueError, RecursionError):
        return None
    if text.count("{", at, end) + text.count("[", at, end) > MAX_DEPTH:
        return None
    return value, end


def top_level_objects(text: str, *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Each top-level JSON object in `text`, left to right: the first complete object from each `{`, the scan
    resuming after it (so objects nested in another, or in its strings, are part of it). Stops at nesting deeper
    than MAX_DEPTH: no answer starts there or inside it."""
    decoder = json.JSONDecoder(strict=strict)
    at = text.find("{")
    while at >= 0:  # a run of objects each read whole by `raw_decode`: the answer's usual shape, without the regexes
        read = _decoded(decoder, text, at)
        if read is None:
            break
        yield read[0]
        at = text.find("{", read[1])
    if at >= 0:
        yield from _scanned(text, strict, decoder, at)


def _scanned(text: str, strict: bool, decoder: json.JSONDecoder, at: int) -> Iterator[dict[str, Any]]:
    """top_level_objects from offset `at` on, by the regexes and passes (see the module doc)."""
    fate: dict[int, int] = {}
    full, start = _regexes(strict)
    m = start.search(text, at)
    while m is not None:
        i = m.start()
        if i not in fate and (done := full.match(text, i)) is not None:
            fate[i] = done.end()
        elif i not in fate:
            try:
                _Pass(text, strict, fate).run(i)
            except TooDeep:
                return
        end = fate[i]
        if end == _FAILED:
            m = start.search(text, i + 1)
            continue
        try:
            value, end = decoder.raw_decode(text, i)
        except RecursionError:
            return
        except ValueError:  # not expected after the scan; read as "no object here"
            m = start.search(text, i + 1)
            continue
        yield value
        m = start.search(text, end)
