"""The text grammar of compare_pair's answers: where the judge's `[[A>B]]` / `[[B>A]]` label stands (pairwise.parse_label
says what counts), read in one pass whose work per label is constant and mostly the regex engine's, so a reply full of
labels costs about what prose does (tests/methods/test_linear_text.py measures it side by side)."""

from __future__ import annotations

import re
from functools import lru_cache

from judge_mcp.methods.parsing import neutralise, replace_groups

# Any [[X op Y]] label the judge writes, the offered ones and others ([[A=B]], [[A>>B]]).
_ANY_LABEL = re.compile(r"\[\[\s*+([AB])\s*+(>>|<<|>|<|=)\s*+([AB])\s*+\]\]")
# A label as it may stand in a reference text: double brackets (raw) or single (neutralised).
_REF_LABEL = re.compile(r"\[{1,2}+\s*+([AB])\s*+(>>|<<|>|<|=)\s*+([AB])\s*+\]{1,2}")
_QUOTES = "\"'`“”‘’«»"
_CONTEXT = 24  # characters of context on each side of a label compared with the judged texts
_MIN_AFTER = 8  # an echo needs at least this much matching text after the label (and before it)


_SPACES = re.compile(r"\s+")
_COLLAPSIBLE = re.compile(r"[^\S ]|  ")  # whitespace _SPACES would change: other than one plain space


def _canon_labels(xs: list[str], ops: list[str], ys: list[str]) -> list[str]:
    return ["⟨" + x + op + y + "⟩" for x, op, y in zip(xs, ops, ys)]


def _canon(text: str) -> str:
    """Lower-case, whitespace collapsed, every label written as ⟨A>B⟩ whatever its brackets."""
    if "[" in text:
        text = replace_groups(_REF_LABEL, text, _canon_labels)
    if _COLLAPSIBLE.search(text):  # most contexts have single spaces only: nothing to collapse
        text = _SPACES.sub(" ", text)
    return text.lower()


def _label_of(m: re.Match) -> str:
    return f"[[{m.group(1).upper()}{m.group(2)}{m.group(3).upper()}]]"


class _EchoIndex:
    """Where each label stands in the reference texts, keyed by the label and the _MIN_AFTER characters after it,
    holding the _MIN_AFTER characters before it (or all of them, when fewer precede it): an echo test is then one
    lookup per label, whatever the number of labels in the answer and the references (linear time overall). Built by
    findall (the long entries as the regex engine's tuples), not a Python step per label of the references."""

    def __init__(self, references: list[str]) -> None:
        self.long: set[tuple[str, str, str]] = set()  # (before, the label without its ⟨⟩, after)
        self.short: dict[tuple[str, str], set[str]] = {}
        self.labels: set[tuple[str, str, str]] = set()  # the labels the references hold, as _ANY_LABEL's groups
        for ref in references:
            found = set(_CANON_LABEL.findall(ref))
            if not found:
                continue
            self.labels.update((x.upper(), op, y.upper()) for x, op, y in found)
            self.long.update(_INDEX_ENTRY.findall(ref))
            for m in _CANON_LABEL.finditer(ref, 0, _MIN_AFTER + 7):  # a label that opens the reference: all of
                if m.start() >= _MIN_AFTER:  # its text before the label must precede the echo
                    break
                after = ref[m.end() : m.end() + _MIN_AFTER]
                if len(after) == _MIN_AFTER:
                    self.short.setdefault((m.group(0), after), set()).add(ref[: m.start()])

    def holds(self, label: str, before: str, after: str) -> bool:
        if len(after) < _MIN_AFTER:
            return False
        after = after[:_MIN_AFTER]
        if len(before) >= _MIN_AFTER and (before[-_MIN_AFTER:], label[1:-1], after) in self.long:
            return True
        return any(before.endswith(b) for b in self.short.get((label, after), ()))


_CANON_LABEL = re.compile(r"⟨([ab])(>>|<<|>|<|=)([ab])⟩")
# A label with _MIN_AFTER characters before and after it: (before, the label inside its ⟨⟩, after). The lookbehind
# follows the `⟨`, so the search looks for that character first.
_INDEX_ENTRY = re.compile(rf"⟨(?<=(.{{{_MIN_AFTER}}})⟨)([ab](?:>>|<<|>|<|=)[ab])⟩(?=(.{{{_MIN_AFTER}}}))", re.S)
_CANON_OF = {(x, op, y): f"⟨{x}{op}{y}⟩".lower() for x in "AB" for op in (">>", "<<", ">", "<", "=") for y in "AB"}


def _is_echo(text: str, m: re.Match, groups: tuple[str, str, str], index: _EchoIndex, seen: dict[tuple[str, int, int], bool]) -> bool:
    """The label sits inside a verbatim copy of a reference text: at least _MIN_AFTER characters after it match
    the text after that label in the reference, and so do at least _MIN_AFTER before it (or all of the
    reference's text before it, when the label opens the reference). `seen`: the answers for the contexts met so far
    in this text (a reply repeating itself is compared once per distinct context)."""
    start, end = m.span()
    low = start - _CONTEXT if start > _CONTEXT else 0
    raw = (text[low : end + _CONTEXT], start - low, end - low)  # the label and its context, one slice
    found = seen.get(raw)
    if found is None:
        if len(seen) >= 4096:
            seen.clear()
        found = seen[raw] = index.holds(_CANON_OF[groups], _canon(text[low:start]), _canon(text[end : end + _CONTEXT]))
    return found


_QUOTE_CLASS = "[" + re.escape(_QUOTES) + "]"


# A label that is not a mention (not wrapped in quote marks on both sides): where the judge's label can start.
_UNQUOTED = re.compile(rf"\[\[(?:(?<!{_QUOTE_CLASS}\[\[){_ANY_LABEL.pattern[4:]}|{_ANY_LABEL.pattern[4:]}(?!{_QUOTE_CLASS}))")


@lru_cache(maxsize=20)  # one per label [[X op Y]]
def _others(key: tuple[str, str, str]) -> re.Pattern:
    """Any label but `key`: once the judge's label is known, the regex engine skips the labels equal to it."""
    x, op, y = key
    return re.compile(rf"\[\[(?!\s*+{x}\s*+{re.escape(op)}\s*+{y}\s*+\]\]){_ANY_LABEL.pattern[4:]}")


@lru_cache(maxsize=20)  # one per label [[X op Y]]
def _reversed(key: tuple[str, str, str]) -> re.Pattern:
    """The label `key` as it reads in the reversed text: the last of them are found first."""
    x, op, y = key
    return re.compile(rf"\]\]\s*+{y}\s*+{re.escape(op[::-1])}\s*+{x}\s*+\[\[")


class _LabelReading:
    """parse_label's reading, in one pass whose work per label is constant and mostly the regex engine's, so a reply
    full of labels costs about what prose does. A label the references never hold is no echo (no comparison). The
    judge's label is the first plain one (mentions are skipped by the pattern); after it, only labels that differ
    from it are read (one plain: unparsed at once; a mention: the verdict is open again until a later plain label);
    which label is the last plain one is then found walking back from the end of the text."""

    def __init__(self, text: str, index: _EchoIndex) -> None:
        self.text, self.index = text, index
        self.seen: dict[tuple[str, int, int], bool] = {}

    def echo(self, m: re.Match) -> bool:
        groups = m.group(1, 2, 3)
        return groups in self.index.labels and _is_echo(self.text, m, groups, self.index, self.seen)

    def mention(self, start: int, end: int) -> bool:
        text = self.text
        return bool(start) and end < len(text) and text[start - 1] in _QUOTES and text[end] in _QUOTES

    def label(self, start: int) -> re.Match:
        return _ANY_LABEL.match(self.text, start)  # type: ignore[return-value]  # a label of another pattern's stands there

    def verdict(self) -> tuple[str, int] | None:
        first = self.first()
        if first is None:
            return None
        key = self.label(first.start()).group(1, 2, 3)
        contradicted = -1  # where the last mention of another label stands
        for m in _others(key).finditer(self.text, first.end()):
            other = self.label(m.start())
            if self.echo(other):
                continue
            if not self.mention(*other.span()):
                return None  # two different plain labels
            contradicted = other.start()
        last = self.last(key, first.start())
        if contradicted > last:
            return None
        return "[[{}{}{}]]".format(*key), last

    def first(self) -> re.Match | None:
        """The first plain label that is no echo. (_UNQUOTED's match is the label itself, its groups 1-3 or 4-6: no
        second match per label, and the labels the references never hold are no echo without a comparison.)"""
        labels = self.index.labels
        for m in _UNQUOTED.finditer(self.text):
            groups = m.group(1, 2, 3) if m.group(1) else m.group(4, 5, 6)
            if groups not in labels or not _is_echo(self.text, m, groups, self.index, self.seen):
                return m
        return None

    def last(self, key: tuple[str, str, str], first: int) -> int:
        """Where the last plain label `key` starts (`first`, the first, when no later one is plain)."""
        size = len(self.text)
        for m in _reversed(key).finditer(self.text[::-1], 0, size - first - 1):
            start = size - m.end()
            found = self.label(start)
            if not self.echo(found) and not self.mention(start, found.end()):
                return start
        return first


def last_label(text: str, judged: tuple[str, ...] | list[str] = ()) -> tuple[str, int] | None:
    """(the label, where it starts) of the judge's last plain label, when every plain label in `text` is that same
    label and no mention of another follows it; None otherwise (pairwise.parse_label has the rules)."""
    if not text:
        return None
    judged = [t for t in judged if t]
    index = _EchoIndex([_canon(t) for t in judged] + [_canon(neutralise(t)) for t in judged])
    return _LabelReading(text, index).verdict()
